"""Where a judgement's results go, and the baseline units it reuses from earlier judgements.

Judgements of one baseline commit under one config share a folder, ``<results>/<commit12>-<config12>/``,
and each gets a numbered folder of its own inside it (its own declaration, sequential.json, ledger test).
Before a judgement runs, the baseline arm's completed units of the earlier judgements there are copied
into its folder; the harness's resume rule then skips each one whose config and code match (the same
commit, the same config) and reruns, saying why, any that do not. A loop thus pays for the baseline once.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

BASELINE_ARM, CANDIDATE_ARM = "A", "B"
RESULT = "result.json"


def config_key(overrides, config_dir) -> str:
    """A digest of what composes the config: the overrides as given and the config folder's files."""
    h = hashlib.sha256("\0".join(sorted(overrides)).encode())
    if config_dir:
        root = Path(config_dir)
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def group_folder(results: Path, baseline_commit: str, key: str) -> Path:
    return Path(results) / f"{baseline_commit[:12]}-{key}"


def new_judgement_folder(group: Path, candidate_label: str) -> Path:
    """The next numbered folder of the group, made now (a judgement never writes into another's folder)."""
    group.mkdir(parents=True, exist_ok=True)
    label = re.sub(r"[^A-Za-z0-9._-]", "_", candidate_label)[:40]
    while True:
        numbers = [int(m.group(1)) for p in group.iterdir() if (m := re.match(r"(\d+)-", p.name))]
        folder = group / f"{max(numbers, default=0) + 1:04d}-{label}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:  # another judgement took the number first
            continue


def reuse_baseline(group: Path, folder: Path) -> dict[int, bytes]:
    """Copy the earlier judgements' completed baseline units into ``folder``; {seed: the result's bytes}."""
    copied: dict[int, bytes] = {}
    for earlier in sorted(p for p in group.iterdir() if p.is_dir() and p != folder):
        for result in sorted((earlier / "runs").glob(f"seed=*/arm={BASELINE_ARM}/{RESULT}")):
            seed = int(result.parent.parent.name.split("=", 1)[1])
            if seed in copied:
                continue
            target = folder / "runs" / f"seed={seed}" / f"arm={BASELINE_ARM}"
            shutil.copytree(result.parent, target, ignore=shutil.ignore_patterns(".lock"))
            copied[seed] = result.read_bytes()
    return copied


def baseline_units(folder: Path, copied: dict[int, bytes], seeds) -> dict:
    """Of the seeds the judgement used: the baseline units reused unchanged from earlier judgements, and
    those it ran itself (a copied unit the resume rule did not accept was rerun: it counts as ran)."""
    reused, ran = [], []
    for seed in sorted(seeds):
        result = folder / "runs" / f"seed={seed}" / f"arm={BASELINE_ARM}" / RESULT
        if result.is_file():
            (reused if copied.get(seed) == result.read_bytes() else ran).append(seed)
    return {"reused": reused, "ran": ran}
