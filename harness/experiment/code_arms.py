"""Code versions as arms (``ab.factor=code``): each arm names a git revision or ``WORKTREE``.

``python -m harness +experiment=loss_ab ab.factor=code 'ab.arms={A: main, B: WORKTREE}'`` compares
two versions of the researcher's code, paired by seed like any other factor. Here: the revisions
read once at launch (``prepare``: a missing repository or revision is refused before anything is
written), each arm's snapshot -- the revision's files (``git archive``), or for ``WORKTREE`` the
tracked files as they are on disk plus the untracked files git does not ignore -- staged outside the
results and moved to ``code/<arm>-<digest>/`` under the results when the units begin
(``materialize``), read-only; the arm's code identity (its commit, and for ``WORKTREE`` the digest
of its changes); and the context a unit runs in (``running``: integrations/code_snapshot.py).

A snapshot's folder is named by its content, so a relaunch after more edits makes a new ``WORKTREE``
snapshot (its units rerun: their identity changed) and reuses the other arm's.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from harness.experiment.arms import ExperimentError
from harness.integrations.code_snapshot import Snapshot, running_from

WORKTREE = "WORKTREE"
FOLDER = "code"  # under the results folder
_ENV = "HARNESS_CODE_ARMS"  # the prepared arms, for the worker processes that run units side by side
_ALLOWED = ("An arm of ab.factor=code names a git revision of the repository the harness is launched "
            "in (a commit, a branch such as main, a tag) or WORKTREE (the working tree as it is at "
            "launch, uncommitted and untracked-but-not-ignored files included).")

MANIFEST = "arms.json"  # under a sweep's code/: the arms its launcher prepared, for jobs that lack the environment
SWEPT_ARMS = ("a sweep over code arms reads the revisions once, in the launching process, before any job: "
              "set ab.factor=code and ab.arms in the experiment or on the command line without sweeping "
              "them (ab.arms={A: main, B: WORKTREE}), and sweep seed, arm or other keys.")


class CodeArmError(ExperimentError):
    """ab.factor=code cannot be run as given; the message names the key."""


@dataclass(frozen=True)
class CodeArm:
    revision: str  # as the arm names it: main, v1.0, 3f2a9c1, WORKTREE
    commit: Optional[str]  # the commit it resolved to (WORKTREE: HEAD, the base of its changes)
    digest: str  # of the snapshot's content: every file's path, mode and bytes
    changes: dict  # WORKTREE: {path: digest of its content, or "deleted"} against the commit
    changes_digest: Optional[str]  # WORKTREE: of those changes (None: none)
    repo: str  # the repository's top folder
    launch: str  # the folder the harness was launched from
    folder: str  # the snapshot's folder (absolute), under the results' code/
    staged: Optional[str] = None  # where it waits until the units begin

    def record(self) -> dict:
        """What a result's code identity holds of it."""
        out = {"revision": self.revision, "commit": self.commit, "snapshot": self.digest,
               "folder": f"{FOLDER}/{Path(self.folder).name}"}
        if self.revision == WORKTREE:
            out.update(changes=self.changes, changes_digest=self.changes_digest)
        return out


_PREPARED: dict = {}  # revision -> CodeArm, for this invocation


def prepare(cfg, out_dir, *, multirun: bool = False, sweep_root=None) -> list[str]:
    """Read the code arms of ``cfg`` (none unless ab.factor=code) and stage their snapshots outside
    the results; what each arm runs, in a line each. Raises CodeArmError, before anything is
    written, for input that cannot run. A sweep's job (``multirun``) takes the arms its launcher
    prepared and reads no revision itself."""
    factor = cfg.ab.factor
    if factor != "code":
        if cfg.get("code") is not None:
            raise CodeArmError(f"code={cfg.code!r} is set, but ab.factor={factor!r}: the code key holds an "
                               "arm's revision and is set only through ab.factor=code and ab.arms. Remove it.")
        return []
    revisions = _revisions(cfg)
    if multirun:  # a sweep's job: its launcher read the revisions (prepare_sweep); never the live tree
        return _from_launcher(revisions, sweep_root)
    repo = _repository()
    out_dir = Path(out_dir).absolute()
    _discard_staged()
    _register_cleanup()  # a refusal after this (the preflight's) leaves no staged copy behind
    try:
        for name, revision in revisions.items():
            if revision not in _PREPARED:
                _PREPARED[revision] = _stage(repo, name, revision, out_dir)
    except BaseException:
        _discard_staged()
        raise
    os.environ[_ENV] = json.dumps({k: asdict(v) for k, v in _PREPARED.items()})
    return [_said(name, _PREPARED[revision]) for name, revision in revisions.items()]


def _revisions(cfg) -> dict:
    revisions = {}
    for name, value in cfg.ab.arms.items():
        if OmegaConf.is_config(value) or isinstance(value, (bool, float)) or value is None or not str(value).strip():
            shown = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
            raise CodeArmError(f"ab.arms.{name}={shown!r} is not a revision. {_ALLOWED} Quote a commit "
                               f"written in digits only: 'ab.arms.{name}=\"0123456\"'.")
        revisions[str(name)] = str(value).strip()
    return revisions


def publish(sweep_dir) -> None:
    """A sweep's launching process, once ``prepare`` read the arms and every job's config passed its
    checks, before any job runs: the snapshots into the sweep's code/, read-only, and beside them the
    manifest its jobs read (``_from_launcher``), wherever they run (a joblib worker, an sbatch job on
    another node): each job runs the code as it was at launch, and edits made meanwhile cannot reach it."""
    from harness.results.atomic_io import write_json

    materialize()
    write_json(Path(sweep_dir) / FOLDER / MANIFEST, {k: {**asdict(v), "staged": None} for k, v in _PREPARED.items()})


def _from_launcher(revisions: dict, sweep_root) -> list[str]:
    """A sweep job's arms as its launcher prepared them: the manifest in the sweep's code/ folder (in
    the launching process itself, before the manifest is written: the arms it prepared). Refused when
    a revision is not among them."""
    manifest = Path(sweep_root) / FOLDER / MANIFEST if sweep_root is not None else None
    if manifest is not None and manifest.is_file():
        known = {k: CodeArm(**v) for k, v in json.loads(manifest.read_text()).items()}
    else:
        known = dict(_PREPARED)
    for name, revision in revisions.items():
        if revision not in known:
            raise CodeArmError(f"ab.arms.{name}={revision!r} was not prepared by this sweep's launching process "
                               f"(it prepared {sorted(known) or 'none'}): {SWEPT_ARMS}")
        arm = known[revision]
        if not Path(arm.folder).is_dir() and not (arm.staged and os.path.isdir(arm.staged)):
            raise CodeArmError(f"ab.arms.{name}={revision!r}: its snapshot {arm.folder} is missing (the sweep's "
                               "launcher writes it before any job). Relaunch the sweep.")
        _PREPARED[revision] = arm
    return []


def _said(name: str, arm: CodeArm) -> str:
    """What an arm runs, said at launch: its revision, commit and snapshot (WORKTREE: its changes)."""
    commit = arm.commit[:12] if arm.commit else "no commit yet"
    what = f"code arm {name}: {arm.revision} = {commit}"
    if arm.revision == WORKTREE:
        files = list(arm.changes)
        what += (f" + {len(files)} changed or untracked file(s): {', '.join(files[:5])}"
                 + (" ..." if len(files) > 5 else "") if files else " (no changes)")
    return f"{what}; snapshot {FOLDER}/{Path(arm.folder).name}"


def materialize() -> None:
    """Move the staged snapshots to their folders under the results (the units begin): a folder of
    the same content already there is kept (a relaunch), and the staged copy dropped."""
    for arm in _PREPARED.values():
        if arm.staged is None or not os.path.isdir(arm.staged):
            continue
        final = Path(arm.folder)
        if not final.is_dir():
            final.parent.mkdir(parents=True, exist_ok=True)
            partial = final.parent / f".{final.name}.{os.getpid()}.tmp"
            shutil.copytree(arm.staged, partial, symlinks=True)
            _read_only(partial)
            try:
                os.rename(partial, final)
            except OSError:  # another process made it meanwhile: the same content, by its name
                shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(arm.staged, ignore_errors=True)


def arm_of(cfg) -> CodeArm:
    """The prepared code arm an arm's config names (cfg.code): from this process or, in a worker,
    from the environment its parent gave it."""
    revision = str(cfg.code)
    if revision not in _PREPARED and os.environ.get(_ENV):
        # the parent's staged copies are the parent's to remove: this process only reads the snapshots
        _PREPARED.update({k: CodeArm(**{**v, "staged": None}) for k, v in json.loads(os.environ[_ENV]).items()})
    if revision not in _PREPARED:
        raise CodeArmError(f"code={revision!r}: no snapshot of this revision was prepared in this process. Run "
                           "code arms through python -m harness or harness.run (ab.factor=code).")
    return _PREPARED[revision]


@contextlib.contextmanager
def running(cfg):
    """The unit of ``cfg`` imports (or runs, a command) its revision's snapshot; nothing else changes."""
    if cfg.get("code") is None:
        yield
        return
    arm = arm_of(cfg)
    root = Path(arm.folder)
    if not root.is_dir() and arm.staged and os.path.isdir(arm.staged):
        root = Path(arm.staged)  # the preflight, before the units begin: nothing written in the results yet
    elif not root.is_dir():
        materialize()
    others = [Path(p) for a in _PREPARED.values() for p in (a.folder, a.staged) if p]
    with running_from(Snapshot(repo=Path(arm.repo), root=root, launch=Path(arm.launch)), forget_under=others):
        yield


def preflight_each(cfg, arms: dict, preflight, error) -> bool:
    """ab.factor=code: ``preflight`` (config/preflight.py's, raising ``error``) once per code arm, in its
    snapshot, so that a revision whose train.fn or components cannot import is refused before any unit
    runs, naming the arm. False (nothing done) for another factor."""
    if cfg.ab.factor != "code":
        return False
    for name, arm_cfg in arms.items():
        with running(arm_cfg):
            try:
                preflight(arm_cfg, arms)
            except error as e:
                raise CodeArmError(f"ab.arms.{name}={str(arm_cfg.code)!r}, the code of that revision: {e}") from None
    return True


def identity(cfg, outside) -> dict:
    """A code arm's code identity: ``outside`` (code_identity of what lies outside the repository:
    the harness, torch, installed packages) with the arm's record; its version names the snapshot."""
    arm = arm_of(cfg)
    return {**outside, "version": f"{outside['version']}/code-{arm.digest[:12]}", "code_arm": arm.record()}


def inside_repository(cfg, path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(arm_of(cfg).repo))
        return True
    except ValueError:
        return False


# -- git ----------------------------------------------------------------------------------------


def _git(repo, *args, binary: bool = False):
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        raise CodeArmError(f"ab.factor=code needs git to read the revisions, and running it failed ({e}). "
                           "Install git, or choose a config path as ab.factor.") from None


def _repository() -> Path:
    found = _git(os.getcwd(), "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise CodeArmError(f"ab.factor=code compares revisions of a git repository, but the launch folder "
                           f"{os.getcwd()} is in none ({found.stderr.strip() or 'git rev-parse failed'}). Launch "
                           "the harness from inside your project's repository, or choose a config path as "
                           "ab.factor.")
    return Path(found.stdout.strip()).resolve()


def _commit(repo: Path, name: str, revision: str) -> Optional[str]:
    if revision == WORKTREE:
        head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        return head.stdout.strip() or None  # a repository with no commit yet: no base
    found = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    if found.returncode != 0 or revision.startswith("-"):
        raise CodeArmError(f"ab.arms.{name}={revision!r}: no commit, branch or tag of that name in the repository "
                           f"{repo}. {_ALLOWED}")
    return found.stdout.strip()


def _stage(repo: Path, name: str, revision: str, out_dir: Path) -> CodeArm:
    commit = _commit(repo, name, revision)
    staged = Path(tempfile.mkdtemp(prefix="harness-code-"))
    try:
        changes = _fill(repo, name, revision, commit, staged, _results_in(repo, out_dir))
        digest = content_digest(staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    changes_digest = hashlib.sha256(json.dumps(changes, sort_keys=True).encode()).hexdigest()[:16] if changes else None
    label = re.sub(r"[^A-Za-z0-9._-]", "_", revision)
    folder = out_dir / FOLDER / f"{label}-{digest[:12]}"
    return CodeArm(revision=revision, commit=commit, digest=digest, changes=changes, changes_digest=changes_digest,
                   repo=str(repo), launch=os.getcwd(), folder=str(folder), staged=str(staged))


def _results_in(repo: Path, out_dir: Path) -> Optional[str]:
    """The results folder as a path inside the repository ('outputs/exp/'), when it is inside."""
    try:
        return out_dir.resolve().relative_to(repo).as_posix().rstrip("/") + "/"
    except ValueError:
        return None


def _fill(repo: Path, name: str, revision: str, commit: Optional[str], staged: Path, results: Optional[str]) -> dict:
    """Write the revision's files into ``staged``; WORKTREE's changes against its commit. The results
    folder, when git does not ignore it, is no part of WORKTREE (else every run would change it)."""
    if revision == WORKTREE:
        _copy_worktree(repo, staged, results)
        return _worktree_changes(repo, commit, results)
    _archive(repo, name, revision, commit, staged)
    return {}


def _archive(repo: Path, name: str, revision: str, commit: str, into: Path) -> None:
    """The commit's files, and each submodule's at the commit the superproject records for it."""
    archive = _git(repo, "archive", "--format=tar", commit, binary=True)
    if archive.returncode != 0:
        raise CodeArmError(f"ab.arms.{name}={revision!r}: git archive of {commit} failed: "
                           f"{archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "tar_filter"):  # Pythons before 3.11.4 (and 3.10.12) have no extraction filters
            tar.extractall(into, filter="tar")
        else:
            tar.extractall(into)
    for path, sub_commit in _submodules_at(repo, commit):
        sub = repo / path
        if _git(sub, "cat-file", "-e", f"{sub_commit}^{{commit}}").returncode != 0 or not _is_top(sub):
            raise CodeArmError(f"ab.arms.{name}={revision!r}: its submodule {path} is at commit {sub_commit[:12]}, "
                               f"which the submodule's checkout in {repo} does not have. Run git submodule update "
                               "--init --recursive (and fetch in the submodule), then launch again.")
        _archive(sub, name, revision, sub_commit, into / path)


def _submodules_at(repo: Path, commit: str) -> list[tuple[str, str]]:
    """(path, commit) of each submodule (a gitlink, mode 160000) in the commit's tree."""
    listed = _git(repo, "ls-tree", "-r", "-z", commit)
    out = []
    for entry in listed.stdout.split("\0") if listed.returncode == 0 else []:
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 commit "):
            out.append((path, meta.split()[2]))
    return out


def _is_top(folder: Path) -> bool:
    """Whether ``folder`` is the top of a git checkout of its own (an initialised submodule)."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    return top.returncode == 0 and Path(top.stdout.strip()).resolve() == folder.resolve()


def _listed(repo: Path, *args) -> list[str]:
    found = _git(repo, *args, "-z")
    return [p for p in found.stdout.split("\0") if p] if found.returncode == 0 else []


def _copy_worktree(repo: Path, into: Path, results: Optional[str]) -> None:
    """The tracked files as they are on disk, and the untracked files git does not ignore; a
    submodule's the same way, as it is checked out."""
    for rel in _outside(_listed(repo, "ls-files", "--cached", "--others", "--exclude-standard"), results):
        source = repo / rel
        if not os.path.lexists(source):
            continue  # deleted in the tree
        if source.is_dir() and not source.is_symlink():
            if _is_top(source):  # an initialised submodule (an uninitialised one is an empty folder)
                _copy_worktree(source, into / rel, None)
            continue
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def _outside(paths, results: Optional[str]) -> list[str]:
    return sorted(p for p in set(paths) if results is None or not p.startswith(results))


def _worktree_changes(repo: Path, commit: Optional[str], results: Optional[str]) -> dict:
    """{path: digest, or "deleted"} of each file that differs from ``commit``; inside a submodule, the
    files that differ from the submodule's own commit, and its commit when it moved."""
    changed = set(_listed(repo, "ls-files", "--others", "--exclude-standard"))
    if commit is not None:
        changed |= set(_listed(repo, "diff", "--name-only", "--ignore-submodules=all", commit))
    else:
        changed |= set(_listed(repo, "ls-files", "--cached"))
    out = {rel: _file_digest(repo / rel) if os.path.lexists(repo / rel) else "deleted"
           for rel in _outside(changed, results) if not _is_submodule(repo / rel)}
    for rel, recorded in (_submodules_at(repo, commit) if commit is not None else []):
        sub = repo / rel
        if not _is_top(sub) or (results is not None and rel.startswith(results)):
            continue
        head = _git(sub, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").stdout.strip() or None
        if head != recorded:
            out[rel] = f"submodule:{head}"
        out.update({f"{rel}/{k}": v for k, v in _worktree_changes(sub, head, None).items()})
    return out


def _is_submodule(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _file_digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    kind = "x" if os.access(path, os.X_OK) else "f"
    return kind + ":" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def content_digest(root: Path) -> str:
    """Every file's path, kind (file, executable, link) and content, in path order."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            h.update(f"{path.relative_to(root).as_posix()}\0{_file_digest(path)}\n".encode())
    return h.hexdigest()


def _read_only(root: Path) -> None:
    """Files read-only (folders stay writable, so that the results can still be deleted)."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode & 0o555)


_CLEANUP: list = []


def _register_cleanup() -> None:
    if not _CLEANUP:
        atexit.register(_discard_staged)
        _CLEANUP.append(True)


def _discard_staged() -> None:
    for arm in _PREPARED.values():
        if arm.staged:
            shutil.rmtree(arm.staged, ignore_errors=True)
    _PREPARED.clear()


# -- did the code change the numerics? -----------------------------------------------------------


def steps_compared(results: list) -> Optional[str]:
    """Whether the code arms trained bit for bit alike: every step's loss and parameter fingerprints
    and the final weights of each seed's arms, compared; the sentence says how many steps it covers
    and where the arms first part. None when no seed has two completed arms."""
    from harness.results import load_steps

    by_seed: dict = {}
    for r in results:
        if r.get("status") == "completed":
            by_seed.setdefault(r["seed"], {})[r["arm"]] = r
    pairs = [(seed, runs) for seed, runs in sorted(by_seed.items()) if len(runs) >= 2]
    if not pairs:
        return None
    names = " and ".join(pairs[0][1])
    if any((r.get("fingerprints") or {}).get("black_box") for _, runs in pairs for r in runs.values()):
        return (f"code arms {names}: no steps to compare (a command is a black box); the verdict compares "
                "their metrics")
    compared = 0
    for seed, runs in pairs:
        steps = [load_steps(r) for r in runs.values()]
        n = min(len(s["loss"]) for s in steps)
        for i in range(n):
            for key in ("loss", "params"):
                if len({tuple(s[key][i:i + 1]) for s in steps}) > 1:
                    return (f"code arms {names}: the numerics differ, first at seed {seed} step {i + 1} ({key}; "
                            f"{compared + i} earlier steps compared equal)")
        compared += n
        if len({len(s["loss"]) for s in steps}) > 1 or n == 0:
            return f"code arms {names}: seed {seed}'s arms recorded different numbers of steps ({n} in common)"
        if len({r["fingerprints"].get("final") for r in runs.values()}) > 1:
            return f"code arms {names}: every step equal in seed {seed}, yet the final weights differ"
    return (f"code arms {names}: bit-identical numerics: every step's loss and parameters and the final "
            f"weights equal ({compared} steps compared, in {len(pairs)} seed(s))")
