"""A kept WORKTREE candidate, committed and passed as the next --baseline: its units are that baseline's
units when the commit holds exactly the judged files, and run anew when it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_code_arms import _git
from .test_judge import _effect, _judge, project  # noqa: F401 - project: the fixture


def _unit(judgement: dict, seed: int, arm: str) -> dict:
    return json.loads(Path(judgement["results"], f"runs/seed={seed}/arm={arm}/result.json").read_text())


@pytest.mark.slow  # three judgements: python -m harness.judge spawns python -m harness
def test_a_kept_candidates_units_are_the_next_baselines_when_its_commit_holds_the_judged_files(project, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    _effect(project, 1.0)
    (project / "notes.txt").write_text("untracked, not ignored: part of WORKTREE\n")
    rc, kept, err = _judge(project, "--baseline", "main", ledger=ledger)
    assert rc == 0, err[-3000:]

    # committed without the untracked file: not the judged files, so the new baseline's units run
    _git(project, "commit", "-qam", "kept: effect 1.0")
    partial = _git(project, "rev-parse", "HEAD")
    _effect(project, -1.0)
    rc, second, err = _judge(project, "--baseline", partial, ledger=ledger)
    assert rc == 1, err[-3000:]
    assert second["baseline"]["units"] == {"reused": [], "ran": second["seeds"]}

    # the same commit with the file too: exactly the judged files, so the kept candidate's units are reused
    _effect(project, 1.0)
    _git(project, "add", "notes.txt")
    _git(project, "commit", "-q", "--amend", "--no-edit")
    whole = _git(project, "rev-parse", "HEAD")
    _effect(project, -1.0)
    rc, third, err = _judge(project, "--baseline", whole, ledger=ledger)
    assert rc == 1, err[-3000:]
    shared = sorted(set(kept["seeds"]) & set(third["seeds"]))
    assert shared and third["baseline"]["units"] == {"reused": shared,
                                                     "ran": sorted(set(third["seeds"]) - set(shared))}
    assert err.count("arm=A: skipped") == len(shared)
    for seed in shared:
        unit, source = _unit(third, seed, "A"), _unit(kept, seed, "B")
        assert unit["metrics"] == source["metrics"] and unit["fingerprints"] == source["fingerprints"]
        assert unit["code"]["code_arm"]["commit"] == whole and unit["arm"] == "A"
        assert unit["reused_from"]["result"] == str(Path(kept["results"], f"runs/seed={seed}/arm=B/result.json"))
        assert unit["reused_from"]["revision"] == "WORKTREE"
