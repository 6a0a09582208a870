"""A unit of several processes whose DDP replicas ended up with different parameters (a broken
synchronisation, fingerprints.replicas) is named on the verdict screen and in report.md: its verdict
rests on a run whose training broke its own contract, and the screen must not read as if all were well."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _results_factory as F  # noqa: E402

from harness.analysis.analyze import analyze  # noqa: E402
from harness.analysis.render.markdown import markdown  # noqa: E402
from harness.analysis.render.summary import lines  # noqa: E402

FAST = {"bootstrap_resamples": 199}
BROKEN = {"equal": False, "ranks": 2, "differ": [{"rank": 1, "from": "from step 2 (of 6)"}],
          "says": "rank 1's parameters differ from rank 0's from step 2 (of 6): DDP replicas hold "
                  "bit-identical parameters, so the ranks' synchronisation broke"}


def test_runs_whose_replicas_differ_are_named_on_the_screen_and_in_the_report():
    items = F.make_results(F.accuracies(10, shift=1.0, noise=0.2))
    for r in items:
        r["fingerprints"]["replicas"] = {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    broken = next(r for r in items if r["arm"] == "B" and r["seed"] == 3)
    broken["fingerprints"]["replicas"] = BROKEN
    a = analyze(items, **FAST)
    assert a["replicas_differ"] == [{"seed": 3, "arm": "B", "says": BROKEN["says"]}]
    screen = "\n".join(lines(a))
    assert "REPLICAS DIFFER in 1 run(s)" in screen and "seed 3 arm B: rank 1's parameters differ" in screen, screen
    assert "REPLICAS DIFFER" in markdown(a)


def test_an_analysis_without_broken_replicas_has_no_such_block():
    items = F.make_results(F.accuracies(10, shift=1.0, noise=0.2))
    a = analyze(items, **FAST)
    assert "replicas_differ" not in a  # every other analysis.json stays byte for byte as it was
    assert "REPLICAS" not in "\n".join(lines(a))


def test_one_process_against_two_is_refused_naming_the_world_from_the_results_alone():
    """A run of one process records no world; against runs of two it still differs, and is named."""
    import pytest

    from harness import HarnessError

    items = F.make_results(F.accuracies(6, shift=1.0, noise=0.2))
    for r in items:
        if r["arm"] == "B":
            r["env"]["world"] = {"world_size": 2, "backend": "gloo"}
    with pytest.raises(HarnessError) as refused:
        analyze(items, **FAST)
    text = str(refused.value)
    assert "processes per run: world size and backend (env.world)" in text and "1 process for arm A" in text, text
