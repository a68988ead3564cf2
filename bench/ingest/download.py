"""Downloads for fetch: a resumable download with retries, and a network probe."""

from __future__ import annotations

import shutil
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.ingest.place import CHUNK


def download(url: str, dest: Path, attempts: int = 3, timeout: float = 20.0, backoff: float = 1.0) -> Path:
    """Download to a '.download' part beside dest (resuming it if present); return the part path.

    A body shorter than its Content-Length (a dropped connection) is an error: the
    next attempt, after a backoff, resumes the part with a Range request. A whole part
    left by a run killed before the rename answers 416 and is returned as it is.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.download")
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            have = part.stat().st_size if part.exists() else 0
            req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                mode = "ab" if have and resp.status == 206 else "wb"
                expected = resp.headers.get("Content-Length")
                with open(part, mode) as fh:
                    before = fh.tell()
                    shutil.copyfileobj(resp, fh, CHUNK)
                    got = fh.tell() - before
                # a dropped connection ends the body early without an error: check the length
                if expected is not None and expected.isdigit() and got != int(expected):
                    raise OSError(f"connection closed after {got} of {expected} bytes")
            return part
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # the part is already whole (a run killed before the rename)
                return part
            last = exc
            time.sleep(backoff * (2**attempt))
        except Exception as exc:  # network errors of any kind: retry with backoff
            last = exc
            time.sleep(backoff * (2**attempt))
    raise OSError(f"download failed after {attempts} attempts: {url}: {last}")


def network_available(host: str = "raw.githubusercontent.com", port: int = 443, timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
