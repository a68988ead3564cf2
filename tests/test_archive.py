"""bench.archive: unsafe zip members and zip bombs are refused; the real LoCoMo zip passes."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from bench.archive import ArchiveError, check_members, member_names, read_member

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
LOCOMO_ZIP = MIRROR / "locomo" / "data" / "locomo10.zip"
need_locomo = pytest.mark.skipif(not LOCOMO_ZIP.is_file(), reason=f"LoCoMo mirror absent at {LOCOMO_ZIP}")


def make_zip(path: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def link_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def test_safe_archive_passes_and_lists_files_only(tmp_path):
    z = make_zip(tmp_path / "ok.zip", [("dir/", b""), ("dir/b.json", b"{}"), ("a.txt", b"hello"), ("dir/sub/c", b"x")])
    assert member_names(z) == ["a.txt", "dir/b.json", "dir/sub/c"]  # sorted, directories left out
    assert read_member(z, "a.txt") == b"hello"
    assert read_member(z, "dir/b.json") == b"{}"


@pytest.mark.parametrize("name", ["/etc/passwd", "\\windows\\evil.dll", "C:/evil.txt", "c:evil.txt"])
def test_absolute_member_refused(tmp_path, name):
    z = make_zip(tmp_path / "abs.zip", [("fine.txt", b"x"), (name, b"evil")])
    stored = zipfile.ZipFile(z).namelist()[1]  # the name as the archive really holds it
    with pytest.raises(ArchiveError) as info:
        check_members(z)
    assert "absolute path" in str(info.value)
    assert repr(stored) in str(info.value)
    with pytest.raises(ArchiveError):
        member_names(z)
    with pytest.raises(ArchiveError):
        read_member(z, "fine.txt")  # one bad member spoils the archive


@pytest.mark.parametrize("name", ["../escape.txt", "data/../../escape.txt", "a/b/..", "..\\escape.txt"])
def test_dotdot_member_refused(tmp_path, name):
    z = make_zip(tmp_path / "dots.zip", [(name, b"evil")])
    with pytest.raises(ArchiveError) as info:
        check_members(z)
    assert "'..'" in str(info.value)
    assert repr(zipfile.ZipFile(z).namelist()[0]) in str(info.value)


def test_name_with_dots_inside_a_part_is_fine(tmp_path):
    z = make_zip(tmp_path / "dots.zip", [("a..b/c...json", b"{}"), ("..hidden", b"")])
    assert member_names(z) == ["..hidden", "a..b/c...json"]


def test_symlink_member_refused(tmp_path):
    z = make_zip(tmp_path / "link.zip", [("real.txt", b"x"), (link_info("data/link"), b"/etc/passwd")])
    with pytest.raises(ArchiveError) as info:
        check_members(z)
    assert "'data/link'" in str(info.value) and "symbolic link" in str(info.value)


def test_symlink_bit_alone_is_enough(tmp_path):
    info = zipfile.ZipInfo("l")
    info.external_attr = stat.S_IFLNK << 16  # no permission bits at all
    z = make_zip(tmp_path / "link.zip", [(info, b"target")])
    with pytest.raises(ArchiveError, match="'l' is a symbolic link"):
        member_names(z)


def test_regular_file_mode_is_not_a_link(tmp_path):
    info = zipfile.ZipInfo("f")
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    z = make_zip(tmp_path / "reg.zip", [(info, b"x")])
    assert member_names(z) == ["f"]


def test_too_many_members_refused(tmp_path):
    z = make_zip(tmp_path / "many.zip", [(f"m{i}.txt", b"") for i in range(6)])
    assert len(check_members(z, max_members=6)) == 6  # the bound itself is allowed
    with pytest.raises(ArchiveError) as info:
        check_members(z, max_members=5)
    msg = str(info.value)
    assert "6 members" in msg and "bound of 5" in msg


def test_too_many_declared_bytes_refused(tmp_path):
    z = make_zip(tmp_path / "bomb.zip", [("a", b"0" * 600), ("b", b"0" * 500)])
    assert len(check_members(z, max_bytes=1100)) == 2
    with pytest.raises(ArchiveError) as info:
        check_members(z, max_bytes=1099)
    msg = str(info.value)
    assert "1100 unpacked bytes" in msg and "bound of 1099" in msg


def test_compressed_bomb_judged_by_unpacked_size(tmp_path):
    path = tmp_path / "deflated.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("zeros", b"\0" * 100_000)
    assert path.stat().st_size < 2_000  # small on disk ...
    with pytest.raises(ArchiveError, match="100000 unpacked bytes"):
        check_members(path, max_bytes=50_000)  # ... but large unpacked


def test_not_a_zip(tmp_path):
    bad = tmp_path / "x.zip"
    bad.write_bytes(b"this is not a zip archive")
    with pytest.raises(ArchiveError, match="not a readable zip"):
        member_names(bad)


def test_missing_member(tmp_path):
    z = make_zip(tmp_path / "ok.zip", [("a", b"1")])
    with pytest.raises(ArchiveError, match="no member 'b'"):
        read_member(z, "b")


@need_locomo
def test_real_locomo_zip_passes():
    names = member_names(LOCOMO_ZIP)
    prefix = "data/multimodal_dialog/locomo10_v2/"
    assert len(names) == 10
    assert all(n.startswith(prefix) and n.endswith(".json") for n in names)
    assert sorted(int(Path(n).stem) for n in names) == [26, 30, 41, 42, 43, 44, 47, 48, 49, 50]
    data = read_member(LOCOMO_ZIP, prefix + "26.json")
    with zipfile.ZipFile(LOCOMO_ZIP) as zf:
        assert data == zf.read(prefix + "26.json")
    assert data.startswith(b"{")
