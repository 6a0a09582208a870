"""The result file: its schema, atomic JSON I/O, and loading a directory tree of results.

``runs/seed=<S>/arm=<NAME>/result.json`` is a contract that users' scripts rely on. Keys:

    schema         "harness.result/1"
    experiment     experiment name
    seed, arm      the unit of pairing
    factor         the config path where arms differ; factor_value: this arm's value there
    status         "completed" | "failed"; error: {type, message, step} when failed
    metrics        test_accuracy (percentage points), test_loss (plain cross-entropy), train_loss,
                   n_test, n_train
    fingerprints   init, data_order, final (16 hex digits each), steps: {loss: [8 hex digits of the
                   float32 loss bits per step], params: [16 hex digits per step]}
    pairing        which fingerprints arms of one seed must share: {init, data_order} -> bool
    curve          {step: [...], train_loss: [...]}
    env            versions, device, threads, determinism flags, CUBLAS_WORKSPACE_CONFIG
    timing         train_seconds, steps, steps_per_s, ms_per_step, total_seconds
    config         the resolved config of this arm; config_hash: its digest without seed and arm
    code_version   harness version + digest of its source + torch version (for resume)
    examples       optional per-example outcome on the test split: {split, n, correct: base64 of
                   the bits (numpy packbits, little bit order)}; see pack_examples/example_correctness
    created        UTC time the file was written

A reader never sees a half-written file: writes go to a temporary file in the same folder, are
flushed to disk, then renamed over the target (atomic on POSIX).
"""

from __future__ import annotations

import gc
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = "harness.result/1"
RESULT_NAME = "result.json"


class ResultsError(ValueError):
    """The results cannot be read as asked."""


def run_dir(root: str | os.PathLike, seed: int, arm: str) -> Path:
    return Path(root) / "runs" / f"seed={seed}" / f"arm={arm}"


def atomic_write(path: str | os.PathLike, write) -> None:
    """Write through a temporary file in the same folder, then rename: readers never see half a file.

    ``write`` receives the open binary file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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


def write_json(path: str | os.PathLike, obj) -> None:
    """Atomically write ``obj`` as JSON (NaN/inf become null: JSON has no such numbers)."""
    text = json.dumps(_finite(obj), indent=1, sort_keys=False, allow_nan=False) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))


try:  # 2-3x faster parsing: it decides how long analysing a 10,000-file sweep takes
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; plain json is the fallback
    _orjson = None


def read_json(path: str | os.PathLike):
    with open(path, "rb") as f:
        data = f.read()
    return _orjson.loads(data) if _orjson is not None else json.loads(data)


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


def find_result_files(root: str | os.PathLike) -> list[Path]:
    root = Path(root)
    if root.is_file():
        return [root]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        # wandb's and Hydra's own folders never hold results; skipping them keeps big trees fast
        dirnames[:] = sorted(d for d in dirnames if d not in ("wandb", ".hydra", ".submitit", "superseded"))
        if RESULT_NAME in filenames:
            out.append(Path(dirpath) / RESULT_NAME)
    return out


def load_tree(root: str | os.PathLike) -> LoadedResults:
    root = Path(root)
    if not root.exists():
        raise ResultsError(f"{root}: no such file or folder.")
    loaded = LoadedResults(root=root)
    # Parsing creates millions of small objects that all stay alive; the cyclic GC would rescan
    # them again and again (most of the load time on a 10,000-file sweep). JSON has no cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        _load_files(root, loaded)
    finally:
        if was_enabled:
            gc.enable()
    loaded.results.sort(key=lambda r: (str(r.get("experiment")), _seed_key(r.get("seed")), str(r.get("arm"))))
    return loaded


def _load_files(root: Path, loaded: LoadedResults) -> None:
    for path in find_result_files(root):
        try:
            obj = read_json(path)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            loaded.unreadable.append((str(path), f"not valid JSON ({e})"))
            continue
        if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
            loaded.unreadable.append((str(path), f"not a {SCHEMA} file"))
            continue
        obj["_path"] = str(path)
        loaded.results.append(obj)


def pack_examples(correct, split: str = "test") -> dict:
    """A compact record of which test examples a run got right (1 bit each)."""
    import base64

    import numpy as np

    bits = np.asarray(correct, dtype=bool).reshape(-1)
    packed = np.packbits(bits, bitorder="little").tobytes()
    return {"split": split, "n": int(bits.size), "correct": base64.b64encode(packed).decode("ascii")}


def example_correctness(result: dict):
    """The per-example correctness of a result as a bool numpy array, or None when not recorded."""
    import base64

    import numpy as np

    ex = result.get("examples")
    if not isinstance(ex, dict) or not isinstance(ex.get("correct"), str) or not isinstance(ex.get("n"), int):
        return None
    raw = np.frombuffer(base64.b64decode(ex["correct"]), dtype=np.uint8)
    return np.unpackbits(raw, count=ex["n"], bitorder="little").astype(bool)


def _seed_key(seed):
    return (0, seed) if isinstance(seed, int) else (1, str(seed))
