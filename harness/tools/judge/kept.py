"""A kept candidate's units, reused as its commit's baseline units when the commit is what was judged.

A loop judges an edit as ``WORKTREE`` (arm B), keeps it, commits it, and passes the commit as the next
``--baseline``. That commit's units are the candidate's units when the commit's files are the judged
snapshot's files: the snapshot's digest covers every file's path, kind and bytes, and the harness's
code identity of a code arm is that digest (with the harness, torch and the packages outside the
repository). So before a judgement runs, each completed ``WORKTREE`` unit of an earlier judgement under
the same config whose snapshot digest equals the baseline commit's is copied in as the baseline's unit
of its seed, relabelled as the harness would label a unit of the commit (arm A, ``code`` the commit, the
config's hash recomputed, the code arm's record naming the commit) and marked ``reused_from`` (where it
ran, as what). The harness's resume rule then decides as for any earlier unit: it skips the unit only when
its config and code version equal this run's, else reruns it and says why. A commit that differs from
the judged snapshot in any file (an untracked file left out of the commit, a line ending git converted)
has another digest: its units run.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from harness.results import config_digest, read_json, write_result

WORKTREE = "WORKTREE"
SOURCE_ARM, TARGET_ARM = "B", "A"


def reuse_kept(results: Path, key: str, commit: str, digest: str, folder: Path, have) -> dict[int, bytes]:
    """Copy into ``folder`` the WORKTREE units of earlier judgements (config ``key``) whose snapshot is
    ``digest`` (the baseline ``commit``'s), for the seeds not in ``have``; {seed: the written bytes}."""
    copied: dict[int, bytes] = {}
    # the judgements that ran such a snapshot hold it in code/WORKTREE-<digest12>/ (code_arms.py): only theirs are read
    judged = sorted(p.parent.parent for p in Path(results).glob(f"*-{key}/*/code/{WORKTREE}-{digest[:12]}"))
    for source in (s for j in judged if j != folder for s in sorted(j.glob(f"runs/seed=*/arm={SOURCE_ARM}/result.json"))):
        seed = int(source.parent.parent.name.split("=", 1)[1])
        if seed in have or seed in copied:
            continue
        try:
            result = read_json(source)
        except (OSError, ValueError):
            continue
        arm = (result.get("code") or {}).get("code_arm") or {}
        if result.get("status") != "completed" or arm.get("revision") != WORKTREE or arm.get("snapshot") != digest:
            continue
        target = folder / "runs" / f"seed={seed}" / f"arm={TARGET_ARM}"
        shutil.copytree(source.parent, target, ignore=shutil.ignore_patterns(".lock", "result.json", "superseded"))
        write_result(target / "result.json", as_commit(result, commit, source))
        copied[seed] = (target / "result.json").read_bytes()
    return copied


def as_commit(result: dict, commit: str, source: Path) -> dict:
    """A WORKTREE unit's result as the harness records a unit of ``commit`` with the same files."""
    config = {**result["config"], "code": commit}
    if "arm" in config:
        config["arm"] = TARGET_ARM
    before = result["code"]["code_arm"]
    label = re.sub(r"[^A-Za-z0-9._-]", "_", commit)
    record = {"revision": commit, "commit": commit, "snapshot": before["snapshot"],
              "folder": f"code/{label}-{before['snapshot'][:12]}"}
    out = {k: v for k, v in result.items() if k != "_path"}
    out.update(arm=TARGET_ARM, factor_value=commit, config=config, config_hash=config_digest(config),
               code={**result["code"], "code_arm": record},
               reused_from={"result": str(source.resolve()), "arm": result.get("arm"), "revision": WORKTREE,
                            "commit": before.get("commit"), "changes_digest": before.get("changes_digest"),
                            "why": "a judged WORKTREE snapshot with the same files as this commit"})
    return out
