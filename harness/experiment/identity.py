"""A run's identity: its resolved config plus the code that ran -- ours and the researcher's.

``config_hash``: the config without the keys that never change a run's numbers (seed, arm, logging,
statistics). ``code_identity``: the harness's source, the source of every package that a
``_target_`` or ``train.fn`` names (when it lives outside site-packages: the researcher's project),
the version of those that are installed, any extra ``repro.code_paths``, optionally the git tree,
and torch's version. Resume skips a run only when both match, and says which files changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

import harness

from harness.results import NOT_IN_IDENTITY as NOT_IN_HASH  # never change a run's numbers  # noqa: F401
from harness.results import config_digest


# train's keys of a command arm (schema.py): left out of a config that runs train.fn, so that a
# train.fn run's identity (its hash, what resume compares) is what it was before command arms existed
COMMAND_KEYS = ("cmd", "cwd", "args", "seed_arg", "metrics_from", "timeout_s", "compare_files")


def plain(cfg) -> dict:
    out = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    train = out.get("train") if isinstance(out, dict) else None
    if isinstance(train, dict) and train.get("cmd") is None:
        for key in COMMAND_KEYS:
            train.pop(key, None)
    if isinstance(train, dict) and train.get("nproc") == 1:  # one process: the config as before train.nproc
        train.pop("nproc")
    if isinstance(train, dict) and train.get("rank_timeout_s", "") is None:  # unset: the config as before the key
        train.pop("rank_timeout_s")
    if isinstance(out, dict) and out.get("code", "") is None:
        out.pop("code")  # no code arm: the identity every run had before ab.factor=code existed
    return out


def under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def config_hash(arm_cfg: DictConfig, exclude_factor: Optional[str] = None) -> str:
    """The digest resume and the analysis compare: results.config_digest of the plain config (one
    rule, so a result's recorded hash can be recomputed from its own config block)."""
    return config_digest(plain(arm_cfg), exclude_factor)


# -- code ---------------------------------------------------------------------------------------

_CACHE: dict[str, dict] = {}


def _installed_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return [Path(r).resolve() for r in roots if r]


def _is_installed(path: Path) -> bool:
    path = path.resolve()
    return any(root == path or root in path.parents for root in _installed_roots()) or \
        any(part in ("site-packages", "dist-packages") for part in path.parts)


def _digest_files(files: list[Path], base: Path) -> dict[str, str]:
    out = {}
    for f in sorted(files):
        try:
            out[str(f.relative_to(base))] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
        except OSError as e:
            out[str(f.relative_to(base))] = f"unreadable ({e.strerror})"
    return out


def _source_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]


def _harness_digest() -> str:
    src = Path(harness.__file__).parent
    h = hashlib.sha256()
    for name, digest in _digest_files(_source_files(src), src).items():
        h.update(f"{name}:{digest}\n".encode())
    return h.hexdigest()[:12]


def _package_of(target: str):
    """(top-level module name, its source root: a package folder or a module file) for a dotted path."""
    top = target.split(".")[0]
    module = sys.modules.get(top)
    if module is None:  # found, not imported: importing torch to learn where it lives cost seconds
        import importlib.util

        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return top, None
        if spec is None:
            return top, None
        if spec.submodule_search_locations:
            return top, Path(list(spec.submodule_search_locations)[0])
        return top, Path(spec.origin) if spec.has_location and spec.origin else None
    if getattr(module, "__path__", None):
        return top, Path(list(module.__path__)[0])
    file = getattr(module, "__file__", None)
    return top, Path(file) if file else None


def _git_state(folder: Path) -> Optional[dict]:
    def git(*args):
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=20)

    try:
        tree = git("rev-parse", "HEAD^{tree}")
        if tree.returncode != 0:
            return None
        diff = git("diff", "HEAD", "--binary")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"tree": tree.stdout.strip(), "dirty": hashlib.sha256(diff.stdout.encode()).hexdigest()[:16]
            if diff.stdout else None}


def code_identity(targets: list[str], extra_paths=(), use_git: bool = False, git_folders=()) -> dict:
    """The code a run depends on: {"version": one string for resume, "files": {name: digest}, ...}.
    ``git_folders``: folders whose repository's tree counts too with ``use_git`` (a command's script)."""
    key = json.dumps([sorted(targets), list(map(str, extra_paths)), use_git, list(map(str, git_folders)), os.getcwd()])
    if key in _CACHE:
        return _CACHE[key]
    files: dict[str, str] = {}
    packages: dict[str, str] = {}
    git: dict[str, dict] = {}
    sources: list[Path] = []  # the user's own files: which trainer libraries they import
    for target in sorted(set(targets)):
        top, root = _package_of(target)
        if top == "harness" or root is None:
            continue
        if _is_installed(root):
            packages[top] = _dist_version(top)
            continue
        base = root.parent
        sources += _source_files(root)
        for name, digest in _digest_files(_source_files(root), base).items():
            files[name] = digest
        if use_git:
            state = _git_state(root if root.is_dir() else root.parent)
            if state:
                git[top] = state
    for folder in git_folders if use_git else ():
        state = _git_state(Path(folder))
        if state:
            git[f"command:{Path(folder).name}"] = state  # by name: the same tree elsewhere is the same code
    for p in extra_paths:
        path = Path(p).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"repro.code_paths: {p!r} does not exist (relative to {os.getcwd()}).")
        base = path.resolve().parent
        sources += _source_files(path.resolve())
        files.update({f"{p}:{k}": v for k, v in _digest_files(_source_files(path.resolve()), base).items()})
    for top in _trainers_imported(sources):
        packages.setdefault(top, _dist_version(top))
    user = hashlib.sha256(json.dumps([files, packages, git], sort_keys=True).encode()).hexdigest()[:12]
    ours = _harness_digest()
    version = f"{harness.__version__}+{ours}/torch-{torch_version()}"
    if files or packages or git:
        version += f"/user-{user}"
    identity = {"version": version, "harness": ours, "files": files, "packages": packages, "git": git}
    _CACHE[key] = identity
    return identity


# Libraries that drive the training loop, whose version changes the numbers as torch's does: a
# user's file importing one makes its installed version part of the run's identity.
TRAINERS = ("lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate", "timm")
_TRAINER_IMPORT = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(TRAINERS)})\b", re.M)


def _trainers_imported(sources: list[Path]) -> list[str]:
    found = set()
    for path in sources:
        try:
            found.update(_TRAINER_IMPORT.findall(path.read_text(errors="replace")))
        except OSError:
            continue
    return [top for top in sorted(found) if _installed(top)]


def _installed(top: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def torch_version() -> str:
    """torch.__version__ (e.g. 2.14.1+cu130), read without importing torch when it is not imported yet:
    a no-op rerun decides what to skip without paying torch's import. (The distribution's metadata
    says 2.14.1, without the build suffix every recorded code_version carries.)"""
    import importlib.util
    import re
    import sys

    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    spec = importlib.util.find_spec("torch")
    try:
        text = (Path(spec.origin).parent / "version.py").read_text()
        return re.search(r"__version__ = '([^']+)'", text).group(1)
    except (AttributeError, OSError, TypeError):
        import torch

        return torch.__version__


def _dist_version(top: str) -> str:
    """'dist==version' of the first installed distribution that provides ``top`` (what
    metadata.packages_distributions()[top][0] names, found without reading every distribution's file
    list: that read cost about a second per run)."""
    from importlib import metadata

    for dist in metadata.distributions():
        if top in _provides(dist):
            name = dist.metadata["Name"]
            try:
                return f"{name}=={metadata.version(name)}"
            except metadata.PackageNotFoundError:
                continue
    return "unknown version"


def _provides(dist) -> set:
    """The top-level import names of a distribution, read as packages_distributions reads them."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    record = dist.read_text("RECORD")
    if record is None or '"' in record:  # no RECORD, or quoted names: let importlib parse it
        return {f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name for f in (dist.files or [])
                if f.suffix == ".py"}
    names = (line.split(",", 1)[0] for line in record.splitlines())  # dist.files, without its objects
    return {n.split("/", 1)[0] if "/" in n else n[:-3] for n in names if n.endswith(".py") and n != ".py"}


def describe_code_change(old: Optional[dict], new: dict) -> str:
    """What changed between two code identities, for the resume log."""
    if not isinstance(old, dict):
        return f"the code changed (now {new['version']})"
    parts = []
    if (old.get("code_arm") or {}) != (new.get("code_arm") or {}):
        parts.append(_code_arm_change(old.get("code_arm") or {}, new["code_arm"]))
    if old.get("harness") != new["harness"]:
        parts.append("the harness's own source")
    of, nf = old.get("files") or {}, new["files"]
    changed = sorted(k for k in set(of) & set(nf) if of[k] != nf[k])
    added, removed = sorted(set(nf) - set(of)), sorted(set(of) - set(nf))
    if changed:
        parts.append("edited: " + ", ".join(changed))
    if added:
        parts.append("new: " + ", ".join(added))
    if removed:
        parts.append("gone: " + ", ".join(removed))
    if (old.get("packages") or {}) != new["packages"]:
        parts.append(f"installed packages {old.get('packages')} -> {new['packages']}")
    if (old.get("git") or {}) != new["git"]:
        parts.append("the git tree")
    if not parts:
        parts.append(f"the code version ({old.get('version')} -> {new['version']})")
    return "the code changed: " + "; ".join(parts)


def _code_arm_change(old: dict, new: dict) -> str:
    """A code arm's snapshot changed (ab.factor=code): which revision, commit and files."""
    what = f"{new['revision']}'s snapshot {str(old.get('snapshot'))[:12]} -> {new['snapshot'][:12]}"
    if old.get("commit") != new.get("commit"):
        what += f" (commit {str(old.get('commit'))[:12]} -> {str(new.get('commit'))[:12]})"
    before, after = old.get("changes") or {}, new.get("changes") or {}
    files = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if files:
        what += f", files changed since the last launch: {', '.join(files[:8])}" + (
            f" and {len(files) - 8} more" if len(files) > 8 else "")
    return what


def describe_config_change(old: Optional[dict], new: Optional[dict], limit: int = 8) -> str:
    """'optim.lr: 0.05 -> 0.1; ...': the keys config_hash depends on whose values differ between a
    result's recorded config and this run's (diff.differences on the flattened configs, as the
    golden check and harness.diff name them), for the resume log. '' when there is nothing to
    compare (a result without a config block) or no such key differs."""
    from harness.results import differences
    from harness.results import REPRO_NOT_IN_IDENTITY

    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    ignore = [*NOT_IN_HASH, *(f"repro.{k}" for k in REPRO_NOT_IN_IDENTITY)]
    changes = differences(old, new, ignore=ignore)

    def shown(value) -> str:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        return text if len(text) <= 60 else text[:57] + "..."

    text = "; ".join(f"{key}: {shown(a)} -> {shown(b)}" for key, a, b in changes[:limit])
    return text + (f"; and {len(changes) - limit} more" if len(changes) > limit else "")
