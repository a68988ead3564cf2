"""bench/systems/partwise.py and step.answer: a built-in system's answers reused with their
latency when every input of the answer is byte-identical, recomputed otherwise, and always
equal to a run that reused nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bench.memo import Memo
from bench.systems.config import check_system
from bench.systems.partwise import MEASURED_IN
from bench.systems.step import RetrievePaths, Serving, SystemPlaces, answer, read_served
from bench.trec.files import trec_run

T0 = pd.Timestamp("2024-01-01", tz="UTC")
WORDS = ("melanie caroline painting sunrise lake dog adoption swimming weather fence report revenue growth chart table "
         "quarter budget museum concert hiking camping recipe garden").split()


def atoms(modality: str, dataset: str, holders: list[str], n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "atom_id": [f"{dataset}:s{i % 5}#{i}" for i in range(n)], "source_id": [f"{dataset}:s{i % 5}" for i in range(n)],
        "dataset": dataset, "modality": modality, "text": [" ".join(rng.choice(WORDS, size=8)) for _ in range(n)],
        "holder": [holders[i % len(holders)] for i in range(n)], "observed_at": T0, "extent": "{}",
    })


def entries() -> list[dict]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(24):
        pdf = i % 2 == 0
        out.append({"query_id": f"{'docs' if pdf else 'chat'}:q{i}", "modality": "pdf" if pdf else "conversation",
                    "question": " ".join(rng.choice(WORDS, size=4)) + "?", "as_of": "2024-06-01T00:00:00+00:00",
                    "scope": {"holder": "owner" if pdf else f"conv-{i % 3}", "session": None, "scenario": "qa"}})
    return out


def serve(root: Path, conversation_seed: int = 2) -> RetrievePaths:
    from bench.ingest.partitions import write_partitions

    served = root / "data" / "served"
    write_partitions(served, [("pdf", "docs", atoms("pdf", "docs", ["owner"], 40, 1)),
                              ("conversation", "chat", atoms("conversation", "chat", ["conv-0", "conv-1", "conv-2"], 60,
                                                              conversation_seed))])
    return RetrievePaths(atoms=root / "data" / "atoms", segments=root / "data" / "segments", manifest=root / "manifest.jsonl", served=served)


def run(root: Path, name: str, memo: Memo | None, paths: RetrievePaths):
    """step.answer as step.retrieve calls it: a reusing run reads only the atoms' ids, modality and holder up front."""
    from bench.systems.partwise import LIGHT_COLUMNS
    from bench.systems.sandbox.workdir import protected_paths

    places = SystemPlaces(root=root, store=root / "store", temp_root=root / "systems", protected=protected_paths(root), host_env={})
    served = read_served(paths.served, LIGHT_COLUMNS if memo is not None else None)
    return answer(check_system({"name": name, "warmup": 3}), entries(), served, Serving(None, {}, None),
                  paths=paths, places=places, where="local", executor=None, memo=memo, text=lambda r: trec_run(r, name))


def test_unchanged_parts_keep_their_answers_and_latency_changed_ones_are_sent(tmp_path: Path) -> None:
    memo = Memo(tmp_path / "memo")
    paths = serve(tmp_path)
    first = run(tmp_path, "bm25-scoped", memo, paths)
    first_id = first.info["run_id"]
    assert first.info["reused_queries"] == 0 and set(first.result.latency[MEASURED_IN]) == {first_id}
    assert first.info["latency_measured_in"] == {first_id: 24} and first.info["warmup_queries"] == 3

    again = run(tmp_path, "bm25-scoped", memo, paths)  # nothing changed: nothing is sent, no index is built
    assert again.info["reused_queries"] == 24 and again.info["parts_built"] == [] and again.info["run_s"] == 0.0
    pd.testing.assert_frame_equal(again.result.run, first.result.run)
    pd.testing.assert_frame_equal(again.result.latency, first.result.latency)  # latency of the run that computed each answer
    assert {k: again.info[k] for k in ("warm", "warmup_queries", "abstains", "isolation", "latency")} == \
        {k: first.info[k] for k in ("warm", "warmup_queries", "abstains", "isolation", "latency")}

    paths = serve(tmp_path, conversation_seed=3)  # the conversation atoms rewritten, the pdf atoms as they were
    changed = run(tmp_path, "bm25-scoped", memo, paths)
    cold = run(tmp_path, "bm25-scoped", None, paths)  # reuse off: every query sent
    assert changed.info["parts_built"] == ["conversation"] and changed.info["reused_queries"] == 12
    pd.testing.assert_frame_equal(changed.result.run, cold.result.run)  # the answers of a run that reused nothing
    assert not changed.result.run.equals(first.result.run)
    lat = changed.result.latency.set_index("query_id")
    pdf = [e["query_id"] for e in entries() if e["modality"] == "pdf"]
    assert set(lat.loc[pdf, MEASURED_IN]) == {first_id}  # each pdf answer: its inputs byte-identical, its latency the first run's
    assert lat.loc[pdf, "latency_ms"].tolist() == first.result.latency.set_index("query_id").loc[pdf, "latency_ms"].tolist()
    assert set(lat.drop(index=pdf)[MEASURED_IN]) == {changed.info["run_id"]}  # measured again where the inputs changed
    assert changed.info["latency_measured_in"] == {first_id: 12, changed.info["run_id"]: 12}
    assert cold.info["reused_queries"] == 0 and cold.info["warmup_queries"] == changed.info["warmup_queries"] == 3
    # the TREC run assembled from the reused groups' stored lines and the new ones: the cold run's, byte for byte
    assert cold.trec is None and changed.trec == trec_run(cold.result.run, "bm25-scoped") and again.trec == trec_run(first.result.run,
                                                                                                                      "bm25-scoped")


def test_an_unscoped_system_reads_every_part_so_any_change_sends_every_query(tmp_path: Path) -> None:
    memo = Memo(tmp_path / "memo")
    run(tmp_path, "bm25", memo, serve(tmp_path))
    assert run(tmp_path, "bm25", memo, serve(tmp_path)).info["reused_queries"] == 24
    changed = run(tmp_path, "bm25", memo, serve(tmp_path, conversation_seed=3))
    assert changed.info["reused_queries"] == 0 and changed.info["parts_built"] == ["conversation", "pdf"]


def test_an_external_system_is_always_sent_every_query(tmp_path: Path) -> None:
    from bench.ingest.partitions import read_modalities
    from bench.systems.sandbox.workdir import protected_paths

    memo, paths = Memo(tmp_path / "memo"), serve(tmp_path)
    places = SystemPlaces(root=tmp_path, store=tmp_path / "store", temp_root=tmp_path / "systems", protected=protected_paths(tmp_path),
                          host_env={})
    cfg = check_system({"name": "mine", "adapter": "python", "entry": "bench.systems.builtin.bm25:bm25_scoped"})  # the same code, not built in
    for _ in range(2):
        out = answer(cfg, entries(), read_modalities(paths.served), Serving(None, {}, None), paths=paths, places=places, where="local",
                     executor=None, memo=memo)
        assert out.info["reused_queries"] == 0 and len(out.result.latency) == 24


def test_the_report_says_which_run_measured_which_latency() -> None:
    from bench.reporting.report import system_section

    one = {"adapter": "builtin", "latency": {"p50_ms": 0.3, "n": 24}, "latency_measured_in": {"2026-12-07T12:00:00Z-aaaaaa": 24}}
    assert not any("measured in run" in line for line in system_section(one))  # one run measured everything: nothing to say
    two = {**one, "latency_measured_in": {"2026-12-07T12:00:00Z-aaaaaa": 12, "2026-12-07T13:00:00Z-bbbbbb": 12}}
    line = next(line for line in system_section(two) if "measured in run" in line)
    assert "12 queries measured in run 2026-12-07T12:00:00Z-aaaaaa" in line and "12 queries measured in run 2026-12-07T13:00:00Z-bbbbbb" in line


def test_a_run_put_together_from_stretches_equals_a_take_of_its_rows(monkeypatch) -> None:
    """Plan.merge's pieces: the rows of several runs in any query order, queries without hits among
    them, as slices (few stretches) or one take (many) and their TREC lines cut out of each run's
    text: the same frame and the same text as taking every row and splitting every text into lines."""
    from bench.systems import partwise

    rng = np.random.default_rng(5)
    runs, lats = [], []
    for f in range(3):
        counts = rng.integers(0, 4, size=12)
        qids = [f"f{f}:q{i}" for i in range(12)]
        runs.append(pd.DataFrame({"query_id": [q for q, c in zip(qids, counts, strict=True) for _ in range(c)],
                                  "rank": [r for c in counts for r in range(1, c + 1)],
                                  "atom_id": [f"a{rng.integers(1000)}" for _ in range(int(counts.sum()))],
                                  "score": rng.random(int(counts.sum()))}))
        lats.append(pd.DataFrame({"query_id": qids, "n_returned": counts}))
    frames = [partwise._spans(lat) for lat in lats]
    spans = [(f, int(s), int(c)) for f, (_, starts, counts) in enumerate(frames) for s, c in zip(starts, counts, strict=True)]
    offsets = np.cumsum([0, *(len(r) for r in runs)])
    texts = [trec_run(r, "t") for r in runs]
    every = [line for text in texts for line in text.splitlines(keepends=True)]
    for order in (list(range(len(spans))), rng.permutation(len(spans)).tolist(), [*range(12, 24), *range(12), *range(24, 36)]):
        wanted = [spans[i] for i in order]
        rows = partwise._rows(np.asarray([offsets[f] + s for f, s, _ in wanted]), np.asarray([c for _, _, c in wanted]))
        expected = pd.concat(runs, ignore_index=True).iloc[rows].reset_index(drop=True)
        stretches = partwise._stretches(wanted)
        assert partwise._splice(texts, frames, stretches) == "".join(every[i] for i in rows.tolist())
        for most in (0, 64):  # one take of every row, or a slice per stretch
            monkeypatch.setattr(partwise, "MAX_SLICES", most)
            pd.testing.assert_frame_equal(partwise._pick(runs, stretches, rows), expected)
