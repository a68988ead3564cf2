"""Safe reading of zip archives (LoCoMo and any later one).

A member is refused when its name is absolute, holds a '..' part or a drive letter,
or is a symbolic link (zip stores links as members with the S_IFLNK mode bit), and an
archive is refused when it declares more than MAX_MEMBERS members or more than
MAX_UNPACKED_BYTES unpacked bytes in all. Sizes are also enforced while reading, so a
member that lies about its size in the directory cannot exceed its declared size.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path, PurePosixPath

MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 1 << 30  # 1 GiB


class ArchiveError(ValueError):
    pass


def check_members(archive: str | Path, max_members: int = MAX_MEMBERS, max_bytes: int = MAX_UNPACKED_BYTES) -> list[zipfile.ZipInfo]:
    """Return the archive's file members after refusing unsafe names, links and bombs."""
    with _open(archive) as zf:
        return _checked(zf, str(archive), max_members, max_bytes)


def _open(archive: str | Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"{archive}: not a readable zip archive ({exc})") from None


def _checked(zf: zipfile.ZipFile, name: str, max_members: int, max_bytes: int) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > max_members:
        raise ArchiveError(f"{name}: {len(infos)} members, more than the bound of {max_members}")
    total = sum(i.file_size for i in infos)
    if total > max_bytes:
        raise ArchiveError(f"{name}: {total} unpacked bytes, more than the bound of {max_bytes}")
    files: list[zipfile.ZipInfo] = []
    for info in infos:
        member = info.filename
        pure = PurePosixPath(member.replace("\\", "/"))
        if member.startswith(("/", "\\")) or pure.is_absolute() or (len(member) > 1 and member[1] == ":"):
            raise ArchiveError(f"{name}: member {member!r} has an absolute path")
        if ".." in pure.parts:
            raise ArchiveError(f"{name}: member {member!r} leaves the target folder ('..')")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveError(f"{name}: member {member!r} is a symbolic link")
        if not info.is_dir():
            files.append(info)
    return files


def read_member(archive: str | Path, member: str) -> bytes:
    """Read one checked member, never more than its declared size (the archive opened once)."""
    with _open(archive) as zf:
        infos = {i.filename: i for i in _checked(zf, str(archive), MAX_MEMBERS, MAX_UNPACKED_BYTES)}
        if member not in infos:
            raise ArchiveError(f"{archive}: no member {member!r}")
        info = infos[member]
        with zf.open(info) as fh:
            data = fh.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise ArchiveError(f"{archive}: member {member!r} unpacks to more than its declared {info.file_size} bytes")
    return data


def member_names(archive: str | Path) -> list[str]:
    return sorted(i.filename for i in check_members(archive))
