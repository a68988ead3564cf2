"""bench/ingest/chunking.py: partitions reused by content give the bytes a fresh chunking writes."""

from __future__ import annotations

from pathlib import Path

from bench.ingest.chunking import ChunkReuse, chunk_files, write_atoms
from bench.io import write_parquet
from bench.memo import Memo


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.parquet"))}


def test_reused_partitions_equal_a_fresh_chunking(real_corpus: dict, tmp_path: Path) -> None:
    seg = real_corpus["segments"]
    segments = tmp_path / "segments"
    conv = seg.loc[seg["dataset"].astype(str) == "locomo"]
    some = sorted(set(conv["source_id"].astype(str)))[:6]  # a few real conversations: chunkers work per source
    write_parquet(segments / "conversation" / "locomo.parquet", conv.loc[conv["source_id"].astype(str).isin(some)].reset_index(drop=True))
    files = sorted(segments.glob("*/*.parquet"))
    memo = Memo(tmp_path / "memo")

    def run(params: dict, out: Path, reuse: ChunkReuse | None) -> dict[str, bytes]:
        write_atoms(out, chunk_files(files, params, None, None, reuse), reuse)
        return _files(out)

    turn = {"conversation": {"strategy": "turn", "window_turns": 5, "overlap_turns": 2}}
    window = {"conversation": {"strategy": "window", "window_turns": 5, "overlap_turns": 2}}
    cold = run(turn, tmp_path / "cold", None)
    first = ChunkReuse(memo)
    assert run(turn, tmp_path / "a", first) == cold and not first.found  # stored
    again = ChunkReuse(memo)
    assert run(turn, tmp_path / "b", again) == cold and set(again.found) == {("conversation", "locomo")}  # reused, same bytes
    other = ChunkReuse(memo)
    assert run(window, tmp_path / "c", other) == run(window, tmp_path / "cold-window", None) != cold and not other.found  # new key
