"""Loading a directory tree of result files: every result.json under a folder, the unreadable ones
named (not silently dropped), sorted by experiment, seed and arm."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness import HarnessError
from harness.results.atomic_io import read_json, unreadable_reason
from harness.results.schema import MAX_RESULT_BYTES, READABLE_SCHEMAS, RESULT_NAME, SCHEMA, SCHEMA_V1


class ResultsError(ValueError, HarnessError):
    """The results cannot be read as asked."""


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
