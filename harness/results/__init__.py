"""The result file: its schema, atomic JSON I/O, and loading a directory tree of results.

``runs/seed=<S>/arm=<NAME>/result.json`` is a contract that users' scripts rely on: its keys are
listed in docs/result-format.md.

The per-example records (one bit per test example) are in examples.py; a run's identity (which config
keys count, config_hash) in identity.py.

A reader never sees a half-written file: writes go to a temporary file in the same folder, are
flushed to disk, then renamed over the target (atomic on POSIX). Written files get the mode the
process's umask gives a new file (0644 under the usual 022), not mkstemp's private 0600, so
teammates sharing a results folder can read them.
"""

from __future__ import annotations

import base64
import gc
import json
import math
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness import HarnessError
from harness.results.identity import (  # noqa: F401 - a run's identity, public here too
    CHANGES_NO_BIT, NOT_IN_IDENTITY, REPRO_NOT_IN_IDENTITY, config_digest, differences, flatten)
from harness.results.examples import (  # noqa: F401 - the per-example records, public here too
    SET_ASIDE_KEY, example_correctness, example_record, example_records, pack_example_records, pack_examples,
    set_aside_note, set_aside_records, unpack_examples)

SCHEMA = "harness.result/2"
SCHEMA_V1 = "harness.result/1"
READABLE_SCHEMAS = (SCHEMA, SCHEMA_V1)
RESULT_NAME = "result.json"
STEPS_FORMAT = "hex-concat/base64"  # the hex digits of every step, concatenated, as bytes, base64
_STEP_DIGITS = {"loss": 8, "params": 16}



class ResultsError(ValueError, HarnessError):
    """The results cannot be read as asked."""


def run_dir(root: str | os.PathLike, seed: int, arm: str) -> Path:
    return Path(root) / "runs" / f"seed={seed}" / f"arm={arm}"


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


try:  # 2-3x faster parsing: it decides how long analysing a 10,000-file sweep takes
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; plain json is the fallback
    _orjson = None


def key_bytes(obj, sort_keys: bool = True) -> bytes:
    """Canonical bytes (sorted keys) to group JSON-like values by; unsorted, a third faster, for a cache key."""
    if _orjson is None:  # pragma: no cover
        return json.dumps(obj, sort_keys=sort_keys, default=str).encode()
    return _orjson.dumps(obj, option=(_orjson.OPT_SORT_KEYS if sort_keys else 0) | _orjson.OPT_NON_STR_KEYS, default=str)


# A result.json the harness writes is well under 10 MB (10,000 steps and 10,000 per-example records:
# ~2 MB); a bigger one is not a result: named and skipped unread (parsing 1 GB takes 2-3 GB).
MAX_RESULT_BYTES = 64 * 2**20
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


def write_result(path: str | os.PathLike, result: dict) -> None:
    """Atomically write a result dict as result.json in the current format (steps packed).

    ``result`` itself is not changed: a caller may keep using its per-step lists.
    """
    out = dict(result)
    out.pop("_path", None)
    out["schema"] = SCHEMA
    non_finite = _non_finite(out.get("metrics"))
    if non_finite:  # JSON writes them as null: the marker keeps a diverged run from reading as "missing"
        out[NON_FINITE_KEY] = non_finite
    fingerprints = out.get("fingerprints")
    if isinstance(fingerprints, dict) and "steps" in fingerprints:
        out["fingerprints"] = {**fingerprints, "steps": pack_steps(fingerprints["steps"])}
    write_json(path, out)


def read_result(path: str | os.PathLike) -> dict:
    """One result file as a dict, with ``_path`` set so that load_steps can name it. A file above
    MAX_RESULT_BYTES, or not a regular file, raises FileRefused (an OSError) unread."""
    obj = read_json(path, MAX_RESULT_BYTES)
    if isinstance(obj, dict):
        obj["_path"] = str(path)
    return obj


def pack_steps(steps):
    """{loss: [hex], params: [hex]} -> the packed field; an already packed (or odd) value is kept."""
    if not isinstance(steps, dict) or steps.get("format") == STEPS_FORMAT:
        return steps
    packed = {"format": STEPS_FORMAT, "n": None}
    for key, digits in _STEP_DIGITS.items():
        values = steps.get(key)
        if not isinstance(values, list) or any(not isinstance(v, str) or len(v) != digits for v in values):
            return steps  # not the shape we pack: keep it as it is, load_steps still reads it
        try:
            raw = bytes.fromhex("".join(values))
        except ValueError:
            return steps
        packed[key] = base64.b64encode(raw).decode("ascii")
        if packed["n"] is None:
            packed["n"] = len(values)
        elif packed["n"] != len(values):
            return steps
    return packed


def digests_version(fingerprints) -> int:
    """The digest version (training/host_digest.py) a result's per-step parameter digests and
    content data-order digest were computed in: 1 where none is recorded (results before 2).
    Those two compare only within one version; init and final compare across versions."""
    v = (fingerprints or {}).get("digests", 1) if isinstance(fingerprints, dict) else 1
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def load_steps(result_or_path) -> dict:
    """The per-step fingerprints {loss: [8 hex digits], params: [16 hex digits]} of a result.

    Takes a result dict (of either schema version, or fresh from training) or a result.json path.
    A result without per-step fingerprints gives empty lists.
    """
    result = result_or_path if isinstance(result_or_path, dict) else read_json(result_or_path)
    steps = (result.get("fingerprints") or {}).get("steps")
    if not isinstance(steps, dict):
        return {"loss": [], "params": []}
    if steps.get("format") != STEPS_FORMAT:
        return {"loss": list(steps.get("loss") or []), "params": list(steps.get("params") or [])}
    out = {}
    for key, digits in _STEP_DIGITS.items():
        hexed = base64.b64decode(steps[key]).hex()
        out[key] = [hexed[i:i + digits] for i in range(0, len(hexed), digits)]
    return out





def diverged(result: dict, metric: str) -> bool:
    """A run whose loss or ``metric`` became non-finite (stats.diverged counts it), as opposed to any
    other failure: a NonFiniteLoss, or a completed run whose metric is NaN or infinite."""
    if result.get("status") != "completed":
        return (result.get("error") or {}).get("type") == "NonFiniteLoss"
    value = metric_value(result, metric)
    return isinstance(value, float) and not math.isfinite(value)


# result.json's record of the metrics that were NaN or infinite ({name: "nan" | "inf" | "-inf"}),
# written beside them only when there are any: JSON has no such numbers, and a null alone reads as
# a metric the run never reported.
NON_FINITE_KEY = "non_finite_metrics"


def _non_finite(metrics) -> dict:
    if not isinstance(metrics, dict):
        return {}
    return {str(k): str(float(v)) for k, v in metrics.items()
            if isinstance(v, float) and not math.isfinite(v)}


def metric_value(result: dict, metric: str):
    """``metric`` of a result as the run reported it: a NaN or infinity written to result.json
    (null there, named under NON_FINITE_KEY) comes back as that float; anything else as stored."""
    value = (result.get("metrics") or {}).get(metric)
    word = (result.get(NON_FINITE_KEY) or {}).get(metric) if value is None else None
    return float(word) if word in ("nan", "inf", "-inf") else value


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


@dataclass
class LoadedResults:
    """Every result.json under a folder; the unreadable ones are named, not silently dropped."""

    root: Path
    results: list[dict] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


_SKIP_DIRS = frozenset(("wandb", ".hydra", ".submitit", "superseded"))


def find_result_files(root: str | os.PathLike, problems: list | None = None) -> list[Path]:
    return [Path(p) for p in _find(root, problems)]


def _find(root, problems: list | None = None) -> list[str]:
    """result.json paths under root as strings, in sorted folder order (no Path objects: 10,000 of
    them cost a noticeable part of loading a big sweep). Any entry of that name but a folder is
    listed (a FIFO, a symlink loop: reading it says what is wrong); a folder that cannot be listed
    goes to ``problems`` as (path, reason)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return [root]
    out, stack = [], [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as e:
            problems is None or problems.append((folder, f"folder could not be listed: {e.strerror or e}"))
            continue
        subdirs = []
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)  # lstat: a symlink loop is no folder, no error
            if entry.name == RESULT_NAME:
                if not is_dir:
                    out.append(entry.path)
            elif entry.name not in _SKIP_DIRS and is_dir:
                # wandb's and Hydra's own folders never hold results; skipping them keeps big trees fast
                subdirs.append(entry.path)
        stack.extend(sorted(subdirs, reverse=True))
    return out


def load_tree(root: str | os.PathLike) -> LoadedResults:
    root = Path(root)
    if not root.exists():
        raise ResultsError(f"{root}: no such file or folder.")
    loaded = LoadedResults(root=root)
    # Parsing creates millions of small objects that all stay alive; the cyclic GC would rescan
    # them again and again (most of the load time on a 10,000-file sweep). JSON has no cycles.
    with gc_paused():
        _load_files(root, loaded)
        loaded.results.sort(key=lambda r: (str(r.get("experiment")), _seed_key(r.get("seed")), str(r.get("arm"))))
    return loaded


class gc_paused:
    """Pause the cyclic garbage collector for a block (restored after): loading and analysing a
    10,000-file tree creates millions of long-lived objects without cycles, which it would rescan
    again and again."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()
        return False


def _load_files(root: Path, loaded: LoadedResults) -> None:
    for path in _find(root, loaded.unreadable):
        try:
            obj = read_json(path, MAX_RESULT_BYTES)
        except (OSError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError and orjson's are ValueErrors
            loaded.unreadable.append((path, unreadable_reason(e)))
            continue
        if not isinstance(obj, dict) or obj.get("schema") not in READABLE_SCHEMAS:
            loaded.unreadable.append((path, f"not a {SCHEMA} (or {SCHEMA_V1}) file"))
            continue
        obj["_path"] = path
        loaded.results.append(obj)


def _seed_key(seed):
    return (0, seed) if isinstance(seed, int) else (1, str(seed))


def save_weights(path: Path, weights: dict) -> None:
    import torch

    atomic_write(path, lambda f: torch.save(weights, f))
