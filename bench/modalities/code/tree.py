"""Safe reading of a source tree from a tar archive or an unpacked folder.

A tar (any compression tarfile reads) is read in memory, never extracted. It is
refused when a member name is absolute (or has a drive letter), holds a '..' part,
is a symbolic or hard link whose target leaves the tree, is a device or fifo, or when
the archive has more than MAX_MEMBERS members or declares more than MAX_TOTAL_BYTES
in all. Links that stay inside the tree are skipped (their target is read under its
own name). A member is read up to its declared size + 1 byte, so a lying header
cannot make it bigger. When every member sits under one top folder (GitHub's
"<name>-<commit>/"), that folder is stripped, so paths are repository paths.

A folder is walked without following links; a link leaving the folder is refused, a
link inside it is skipped; the same bounds apply.

Only text files become part of the tree: a file is kept when it has no NUL byte and
decodes as UTF-8 (a leading BOM is dropped); a Python file that is not UTF-8 is
decoded with its PEP 263 coding cookie. Files over MAX_FILE_BYTES and other binaries
are skipped. Text gets universal newlines (see symbols.normalise).
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import tokenize
from pathlib import Path

from bench.modalities.code.symbols import is_python, normalise

MAX_MEMBERS = 50_000
MAX_TOTAL_BYTES = 1 << 30  # 1 GiB
MAX_FILE_BYTES = 4 << 20  # 4 MiB


class TreeError(ValueError):
    pass


def _check_name(archive: str, name: str) -> str:
    clean = name.replace("\\", "/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise TreeError(f"{archive}: member {name!r} has an absolute path")
    if ".." in clean.split("/"):
        raise TreeError(f"{archive}: member {name!r} leaves the tree ('..')")
    return posixpath.normpath(clean)


def _link_stays_inside(name: str, target: str, hard: bool) -> bool:
    if target.startswith("/") or (len(target) > 1 and target[1] == ":"):
        return False
    base = "" if hard else posixpath.dirname(name)
    resolved = posixpath.normpath(posixpath.join(base, target))
    return resolved != ".." and not resolved.startswith("../")


def read_tar_tree(archive: str | Path, max_members: int = MAX_MEMBERS, max_bytes: int = MAX_TOTAL_BYTES) -> dict[str, bytes]:
    """path -> bytes of every regular file of a checked tar archive."""
    label = str(archive)
    try:
        tf = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise TreeError(f"{label}: not a readable tar archive ({exc})") from None
    files: list[tuple[str, tarfile.TarInfo]] = []
    with tf:
        total = 0
        for count, member in enumerate(tf, start=1):
            if count > max_members:
                raise TreeError(f"{label}: more than the bound of {max_members} members")
            name = _check_name(label, member.name)
            if member.issym() or member.islnk():
                if not _link_stays_inside(name, member.linkname, member.islnk()):
                    raise TreeError(f"{label}: link {member.name!r} -> {member.linkname!r} leaves the tree")
                continue
            if member.isdir():
                continue
            if not member.isfile():
                raise TreeError(f"{label}: member {member.name!r} is not a regular file, folder or link")
            total += member.size
            if total > max_bytes:
                raise TreeError(f"{label}: more than the bound of {max_bytes} unpacked bytes")
            files.append((name, member))
        out: dict[str, bytes] = {}
        for name, member in files:
            if member.size > MAX_FILE_BYTES:
                continue
            fh = tf.extractfile(member)
            data = fh.read(member.size + 1) if fh else b""
            if len(data) > member.size:
                raise TreeError(f"{label}: member {member.name!r} holds more than its declared {member.size} bytes")
            out[name] = data
    return strip_top_folder(out)


def read_dir_tree(root: str | Path, max_members: int = MAX_MEMBERS, max_bytes: int = MAX_TOTAL_BYTES) -> dict[str, bytes]:
    """path -> bytes of every regular file under a folder, links checked and skipped."""
    root = Path(root)
    real_root = os.path.realpath(root)
    out: dict[str, bytes] = {}
    total = 0
    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            count += 1
            if count > max_members:
                raise TreeError(f"{root}: more than the bound of {max_members} entries")
            if os.path.islink(full):
                target = os.path.realpath(full)
                if os.path.commonpath([real_root, target]) != real_root:
                    raise TreeError(f"{root}: link {rel!r} leaves the tree")
                continue
            if name in dirnames or not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            total += size
            if total > max_bytes:
                raise TreeError(f"{root}: more than the bound of {max_bytes} bytes")
            if size <= MAX_FILE_BYTES:
                out[rel] = Path(full).read_bytes()
    return out


def strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    tops = {p.split("/", 1)[0] for p in files}
    if len(tops) == 1 and all("/" in p for p in files):
        return {p.split("/", 1)[1]: data for p, data in files.items()}
    return files


def decode_text(path: str, data: bytes) -> str | None:
    """The file's text, or None for a binary (NUL bytes, undecodable)."""
    if b"\x00" in data:
        return None
    try:
        return normalise(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        pass
    if is_python(path):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return normalise(data.decode(encoding))
        except (SyntaxError, LookupError, UnicodeDecodeError):
            return None
    return None


def read_tree(local: str | Path) -> dict[str, str]:
    """Text files of a tree given as a folder or a tar archive."""
    local = Path(local)
    raw = read_dir_tree(local) if local.is_dir() else read_tar_tree(local)
    texts = {p: decode_text(p, data) for p, data in raw.items()}
    return {p: t for p, t in texts.items() if t is not None}
