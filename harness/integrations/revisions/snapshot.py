"""Running the user's code from a snapshot of one revision (``ab.factor=code``): the unit's view.

A code arm's unit imports the researcher's code from a read-only copy of its revision kept with the
results (experiment/code_arms.py makes it), never from the live working tree, so an edit made while
an experiment runs cannot leak into it. What changes for the unit, and nothing else:

- a ``train.fn`` unit: every ``sys.path`` entry inside the repository (the launch folder that
  ``python -m harness`` puts first, a PYTHONPATH into the project) points at the same place inside
  the snapshot, and modules already imported from the repository or another snapshot are forgotten
  before and after the unit, so each unit imports its own revision;
- a command arm: the script argument is the snapshot's copy of the script, and PYTHONPATH starts
  with the snapshot's copy of the working folder (``python -m`` runs with PYTHONSAFEPATH, so the
  working folder does not come first).

The working folder stays the user's (a command's mirrors it, workdir.py): a relative path to a file
git ignores (data, checkpoints) reads the user's file, as the script expects. A path built from
``__file__`` is inside the snapshot, where ignored files are absent.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from harness.integrations.command_spec import script_of


@dataclass(frozen=True)
class Snapshot:
    repo: Path  # the repository's top folder (the live tree)
    root: Path  # the snapshot's top folder: the repository's files at one revision
    launch: Path  # the folder the harness was launched from (inside ``repo``)

    def mirror(self, path) -> Optional[Path]:
        """``path`` inside the live repository -> the same place in the snapshot; None when outside."""
        p = Path(path).absolute()
        try:
            return self.root / p.relative_to(self.repo)
        except ValueError:
            return None


_OURS = ("harness", "hydra_plugins")
_ACTIVE: list = []  # the snapshot of the unit running in this process, if any


def active() -> Optional[Snapshot]:
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def running_from(snapshot: Snapshot, forget_under=()) -> Iterator[None]:
    """The unit's imports come from ``snapshot``; ``forget_under``: other folders whose modules are
    forgotten too (every snapshot of the experiment). Put back as it was after the unit."""
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    roots = [snapshot.repo, snapshot.root, *map(Path, forget_under)]
    _forget(roots)
    sys.path[:] = [_redirect(entry, snapshot) for entry in sys.path]
    sys.dont_write_bytecode = True  # the snapshot stays as it was made: no __pycache__ written into it
    importlib.invalidate_caches()
    _ACTIVE.append(snapshot)
    try:
        yield
    finally:
        _ACTIVE.pop()
        _forget(roots)
        sys.path[:] = saved_path
        sys.dont_write_bytecode = saved_bytecode
        importlib.invalidate_caches()


def _redirect(entry: str, snapshot: Snapshot) -> str:
    """An entry inside the repository -> its place in the snapshot. One the snapshot lacks (an
    ignored folder: a virtual environment in the project) or an installed one stays as it is."""
    where = Path(entry or os.getcwd())  # '' is the working folder (python -m puts it first)
    if not where.exists() or _installed(where.resolve()):
        return entry
    mirrored = snapshot.mirror(where.resolve())
    return str(mirrored) if mirrored is not None and mirrored.exists() else entry


def _installed(path: Path) -> bool:
    """Installed packages (a virtual environment may live inside the project): never the user's code."""
    return any(part in ("site-packages", "dist-packages") for part in path.parts) or \
        any(path == p or p in path.parents for p in _prefixes())


@functools.lru_cache(maxsize=1)
def _prefixes() -> frozenset:
    return frozenset(Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))


def _real(path: str) -> str:
    """A module file's real path. Memoized for absolute paths (a relative one depends on the working
    folder): every unit looks at every loaded module (torch's thousands) twice, and resolving them each
    time cost ~0.3 s a unit."""
    return _real_absolute(path) if os.path.isabs(path) else os.path.realpath(path)


@functools.lru_cache(maxsize=None)
def _real_absolute(path: str) -> str:
    return os.path.realpath(path)


@functools.lru_cache(maxsize=None)
def _installed_file(real: str) -> bool:
    return _installed(Path(real))


def _forget(roots) -> None:
    """Drop from sys.modules every module whose file lies under one of ``roots``."""
    folders = [str(Path(r).resolve()) + os.sep for r in roots]
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in _OURS:
            continue  # the harness running the unit, even when it is the repository being compared
        file = getattr(module, "__file__", None)
        paths = [file] if file else list(getattr(module, "__path__", None) or [])
        resolved = [_real(p) for p in paths if p and isinstance(p, str)]
        if any(p.startswith(tuple(folders)) and not _installed_file(p) for p in resolved):
            del sys.modules[name]
    for key in [k for k in sys.path_importer_cache if any(str(k).startswith(f.rstrip(os.sep)) for f in folders)]:
        del sys.path_importer_cache[key]


def for_command(argv: list[str], workdir: Path, env: dict) -> list[str]:
    """A command arm's arguments and environment (``env``, changed in place) when a snapshot is
    active: the script read from the snapshot, the snapshot's working folder first on PYTHONPATH."""
    snapshot = active()
    if snapshot is None:
        return argv
    argv = list(argv)
    base = snapshot.mirror(Path(workdir).resolve())
    script = script_of(argv, Path(workdir))
    first = [str(base)] if base is not None else []
    if script is not None and snapshot.mirror(script.resolve()) is not None:
        copy = snapshot.mirror(script.resolve())
        rest = [a for a in argv[1:] if a not in ("-u", "-O", "-B")]
        python = Path(argv[0]).name.startswith("python")
        if python and rest[:1] == ["-m"]:
            env["PYTHONSAFEPATH"] = "1"  # the working folder (the live tree) does not come first
        else:  # `python main.py` or `./train.sh`: the snapshot's copy of the file runs
            argv[argv.index(rest[0]) if python else 0] = str(copy)
            first.insert(0, str(copy.parent))
    env["PYTHONPATH"] = os.pathsep.join([*first, *filter(None, [env.get("PYTHONPATH")])])
    return argv
