"""Atomic JSON I/O: a reader never sees a half-written file, and a reader never hangs on one.

Writes go to a temporary file in the same folder, are flushed to disk, then renamed over the target
(atomic on POSIX). Written files get the mode the process's umask gives a new file (0644 under the
usual 022), not mkstemp's private 0600, so teammates sharing a results folder can read them. Reads
take only a regular file (a FIFO would wait for ever), within a size bound when one is given.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path

from harness import HarnessError


def atomic_write(path: str | os.PathLike, write) -> None:
    """Write through a temporary file in the same folder, then rename: readers never see half a file.
    ``write`` receives the open binary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600, and the rename keeps the mode
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and e.filename is None:
            e.filename = str(path)  # a full disk fails in write(), which names no file: name ours
        raise


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (no window for threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_json(path: str | os.PathLike, obj) -> None:
    """Atomically write ``obj`` as JSON (NaN/inf become null: JSON has no such numbers)."""
    text = json.dumps(_finite(obj), indent=1, sort_keys=False, allow_nan=False) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


try:  # 2-3x faster parsing: it decides how long analysing a 10,000-file sweep takes
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; plain json is the fallback
    _orjson = None


def key_bytes(obj, sort_keys: bool = True) -> bytes:
    """Canonical bytes (sorted keys) to group JSON-like values by; unsorted, a third faster, for a cache key."""
    if _orjson is None:  # pragma: no cover
        return json.dumps(obj, sort_keys=sort_keys, default=str).encode()
    return _orjson.dumps(obj, option=(_orjson.OPT_SORT_KEYS if sort_keys else 0) | _orjson.OPT_NON_STR_KEYS, default=str)


_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFCHR: "device", stat.S_IFBLK: "device"}


class FileRefused(OSError, HarnessError):
    """A file not read: not a regular file (a FIFO, a device), or above its size bound."""


def read_json(path: str | os.PathLike, max_bytes: int | None = None):
    """Parse a JSON file: only a regular file (opening a FIFO would wait for ever), and with
    ``max_bytes`` none larger (FileRefused before a byte is read). fstat of the open file: no race."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"not a regular file (a {_KINDS.get(stat.S_IFMT(st.st_mode), 'folder')}); not read")
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileRefused(f"{st.st_size / 2**20:.0f} MB, above the {max_bytes / 2**20:.0f} MB a result "
                              "file may have (harness.results.MAX_RESULT_BYTES); skipped without reading it")
        # os.read, not a file object (its two objects and context cost ~10 µs a file, a tenth of reading
        # a 10,000-file sweep); read to the end, which the empty read says: a file may grow meanwhile
        parts = [os.read(fd, st.st_size + 1)]
        while parts[-1]:
            parts.append(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 2 else b"".join(parts)
    return _orjson.loads(data) if _orjson is not None else json.loads(data)


def unreadable_reason(e: Exception) -> str:
    """Why a result file could not be read, in words."""
    return str(e) if isinstance(e, FileRefused) else (
        f"could not be read: {e.strerror or e}" if isinstance(e, OSError) else f"not valid JSON ({e})")


def save_weights(path: Path, weights: dict) -> None:
    import torch

    atomic_write(path, lambda f: torch.save(weights, f))
