"""Reading one git revision's files: a commit's (its submodules at the commits it records) or the
working tree's as it is on disk, copied into a folder, and the digest of their content.

experiment/code_arms.py stages each code arm's snapshot with these. Errors name the arm (``name``)
whose revision could not be read, and are RevisionError (a HarnessError; code_arms refuses them
as the arm's).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

from harness import HarnessError

WORKTREE = "WORKTREE"
ALLOWED = ("An arm of ab.factor=code names a git revision of the repository the harness is launched "
           "in (a commit, a branch such as main, a tag) or WORKTREE (the working tree as it is at "
           "launch, uncommitted and untracked-but-not-ignored files included).")


class RevisionError(ValueError, HarnessError):
    """A revision's files cannot be read; the message names the arm and what is allowed."""


def git(repo, *args, binary: bool = False):
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        raise RevisionError(f"ab.factor=code needs git to read the revisions, and running it failed ({e}). "
                           "Install git, or choose a config path as ab.factor.") from None


def repository() -> Path:
    found = git(os.getcwd(), "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise RevisionError(f"ab.factor=code compares revisions of a git repository, but the launch folder "
                           f"{os.getcwd()} is in none ({found.stderr.strip() or 'git rev-parse failed'}). Launch "
                           "the harness from inside your project's repository, or choose a config path as "
                           "ab.factor.")
    return Path(found.stdout.strip()).resolve()


def commit_of(repo: Path, name: str, revision: str) -> Optional[str]:
    if revision == WORKTREE:
        head = git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        return head.stdout.strip() or None  # a repository with no commit yet: no base
    found = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    if found.returncode != 0 or revision.startswith("-"):
        raise RevisionError(f"ab.arms.{name}={revision!r}: no commit, branch or tag of that name in the repository "
                           f"{repo}. {ALLOWED}")
    return found.stdout.strip()


def revision_digest(repo, commit: str) -> str:
    """The snapshot digest an arm naming ``commit`` gets (its files, as git archive writes them)."""
    staged = Path(tempfile.mkdtemp(prefix="harness-code-"))
    try:
        fill(Path(repo), "baseline", commit, commit, staged, None)
        return content_digest(staged)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def results_in(repo: Path, out_dir: Path) -> Optional[str]:
    """The results folder as a path inside the repository ('outputs/exp/'), when it is inside."""
    try:
        return out_dir.resolve().relative_to(repo).as_posix().rstrip("/") + "/"
    except ValueError:
        return None


def fill(repo: Path, name: str, revision: str, commit: Optional[str], staged: Path, results: Optional[str]) -> dict:
    """Write the revision's files into ``staged``; WORKTREE's changes against its commit. The results
    folder, when git does not ignore it, is no part of WORKTREE (else every run would change it)."""
    if revision == WORKTREE:
        _copy_worktree(repo, staged, results)
        return _worktree_changes(repo, commit, results)
    _archive(repo, name, revision, commit, staged)
    return {}


def _archive(repo: Path, name: str, revision: str, commit: str, into: Path) -> None:
    """The commit's files, and each submodule's at the commit the superproject records for it."""
    archive = git(repo, "archive", "--format=tar", commit, binary=True)
    if archive.returncode != 0:
        raise RevisionError(f"ab.arms.{name}={revision!r}: git archive of {commit} failed: "
                           f"{archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "tar_filter"):  # Pythons before 3.11.4 (and 3.10.12) have no extraction filters
            tar.extractall(into, filter="tar")
        else:
            tar.extractall(into)
    for path, sub_commit in _submodules_at(repo, commit):
        sub = repo / path
        if git(sub, "cat-file", "-e", f"{sub_commit}^{{commit}}").returncode != 0 or not _is_top(sub):
            raise RevisionError(f"ab.arms.{name}={revision!r}: its submodule {path} is at commit {sub_commit[:12]}, "
                               f"which the submodule's checkout in {repo} does not have. Run git submodule update "
                               "--init --recursive (and fetch in the submodule), then launch again.")
        _archive(sub, name, revision, sub_commit, into / path)


def _submodules_at(repo: Path, commit: str) -> list[tuple[str, str]]:
    """(path, commit) of each submodule (a gitlink, mode 160000) in the commit's tree."""
    listed = git(repo, "ls-tree", "-r", "-z", commit)
    out = []
    for entry in listed.stdout.split("\0") if listed.returncode == 0 else []:
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 commit "):
            out.append((path, meta.split()[2]))
    return out


def _is_top(folder: Path) -> bool:
    """Whether ``folder`` is the top of a git checkout of its own (an initialised submodule)."""
    top = git(folder, "rev-parse", "--show-toplevel")
    return top.returncode == 0 and Path(top.stdout.strip()).resolve() == folder.resolve()


def _listed(repo: Path, *args) -> list[str]:
    found = git(repo, *args, "-z")
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
        head = git(sub, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").stdout.strip() or None
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


def read_only(root: Path) -> None:
    """Files read-only (folders stay writable, so that the results can still be deleted)."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode & 0o555)
