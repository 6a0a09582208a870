"""The sequential mode counts a diverged run by the declaration (issue 33, item 1): ``stats.diverged``.

``worst``: a pair with a divergence is a loss for the arm that diverged, decided by the signed-rank
sign-flip test at the α each look spends; ``exclude``: its seed is left out (not a failure against
``ab.sequential.max_failures``), with the survivorship warning; ``fail``: the run stops, no verdict.
A genuinely failed run (an exception) stays a failure. The runs use ``diverges`` below: the
sequential tests' paired metric (tests/sequential_fns.py), with a loss that becomes NaN in the arm of
``nan_shift`` at ``nan_seeds``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.experiment.adaptive import sequential_plan as sp
from harness.results import read_json

from . import _results_factory as F
from .conftest import compose_cfg, run_cli

NAN = {"type": "NonFiniteLoss", "message": "the loss became nan at step 1", "step": 1}


def diverges(cfg, run, shift: float = 0.0, nan_seeds=(), nan_shift: float = 1.6, crash_seed: int = -1) -> dict:
    """test_accuracy = 50 + shift + seed noise + run noise (sd 1); NaN loss at nan_seeds in the arm of nan_shift."""
    with run.init():
        weight = torch.randn(1)
    run.watch([weight], total_steps=1)
    weight += shift
    bad = shift == nan_shift and run.seed in list(nan_seeds)
    run.step(torch.tensor(float("nan") if bad else 1.0))  # a NaN loss: NonFiniteLoss, the run diverged
    if shift == nan_shift and run.seed == crash_seed:
        raise RuntimeError(f"planned failure of seed {run.seed}")
    common = np.random.default_rng([run.seed, 7]).normal(0.0, 3.0)
    own = np.random.default_rng([run.seed, 11, int(round(shift * 1000)) + 10**6]).normal(0.0, 1.0)
    return {"test_accuracy": 50.0 + shift + common + own, "n_test": 100}


BASE = [
    "+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "repro.certificate=false",
    "train.fn=tests.test_sequential_diverged.diverges", "+train.kwargs.shift=0.0",
    "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6",
    "ab.sequential.enabled=true", "ab.sequential.max_seeds=20", "stats.margin=null", "determinism.threads=1",
]
# B is 1.6 points better wherever both finish, and diverges in 8 of its first 12 seeds: the
# survivorship case, where leaving the divergences out favours B. Looks at 12 and 14 seeds.
OFTEN = ["+train.kwargs.nan_seeds=[0,1,2,4,5,7,9,10,12]", "ab.sequential.min_seeds=12", "ab.sequential.max_seeds=14"]


def _execute(overrides, out):
    from harness.experiment.execute import execute

    return execute(compose_cfg(overrides), out, say=lambda m: None, show_table=False)


@pytest.mark.slow
def test_worst_counts_a_diverged_pair_as_a_loss_and_decides(tmp_path):
    """Counted as worst, B's divergences outweigh its lead on the survivors: worse, exit 0."""
    out = tmp_path / "worst"
    done = run_cli([*BASE, *OFTEN, f"hydra.run.dir={out}"])
    assert done.returncode == 0, done.stderr[-3000:]
    seq = read_json(out / "sequential.json")
    b = seq["arms"]["B"]
    assert seq["status"] == "settled" and seq["stopped"] is None and seq["failed"] == []
    assert b["decision"] == "worse"
    assert b["seeds"] == list(range(12))  # the diverged pairs are counted, not left out
    n, diverged = 12, 8
    assert b["sentence"].startswith(f"diverged: A 0 of {n} seeds, B {diverged} of {n} seeds (stats.diverged=worst")
    assert seq["diverged"]["counts"] == {"A": 0, "B": diverged}
    last = b["looks"][-1]
    assert last["rule"] == "worst" and last["arm_only"] == diverged and last["sign_flip_p"] <= last["nominal_alpha"]
    screen = " ".join(done.stdout.split())
    assert f"diverged: A 0 of {n} seeds, B {diverged} of {n} seeds" in screen


@pytest.mark.slow
def test_exclude_leaves_the_seed_out_with_the_survivorship_warning(tmp_path):
    done = _execute([*BASE, "stats.diverged=exclude", "+train.kwargs.nan_seeds=[1,4]"], tmp_path / "exclude")
    seq = done.analysis["sequential"]
    b = seq["arms"]["B"]
    assert seq["stopped"] is None and seq["failed"] == []  # not failures against max_failures=0
    assert not {1, 4} & set(b["seeds"]) and b["seeds"][:3] == [0, 2, 3]
    assert b["sentence"].startswith("diverged: A 0 of ") and "SURVIVORSHIP: B diverged in 2 seed(s) and A in 0" in b["sentence"]
    assert [(e["seed"], e["arm"]) for e in seq["diverged"]["runs"]] == [(1, "B"), (4, "B")]
    assert all(e["reason"].startswith("failed: NonFiniteLoss") for e in seq["diverged"]["runs"])


@pytest.mark.slow
def test_fail_stops_at_the_first_divergence_with_no_verdict(tmp_path):
    """Even with failures allowed (max_failures=3), the first divergence stops the run: no more batches."""
    from harness.results import load_tree

    out = tmp_path / "fail"
    done = _execute([*BASE, "stats.diverged=fail", "ab.sequential.max_failures=3", "+train.kwargs.nan_seeds=[3]"],
                    out)
    assert "stats.diverged=fail" in done.analysis_error and "seed 3 arm B" in done.analysis_error
    assert "no verdict" in done.analysis_error
    seq = read_json(out / "sequential.json")
    assert seq["status"] == "stopped" and "stats.diverged=fail" in seq["stopped"] and "seed 3 arm B" in seq["stopped"]
    assert all(a["decision"] == "continue" for a in seq["arms"].values())
    first = seq["design"]["looks"][0]
    assert len(load_tree(out).results) == 2 * first  # the first batch only


@pytest.mark.slow
def test_a_genuine_failure_stays_a_failure_under_worst(tmp_path):
    """An exception is not a divergence: it counts against max_failures (0), and the run stops."""
    done = _execute([*BASE, "+train.kwargs.nan_seeds=[1]", "+train.kwargs.crash_seed=2"], tmp_path / "crash")
    assert done.analysis_error.startswith("sequential run stopped unsettled: 1 failed run(s), more than "
                                          "ab.sequential.max_failures=0")
    assert "seed 2 arm B: failed: RuntimeError" in done.analysis_error and "seed 1" not in done.analysis_error


# -- the rule on result files, and its error rate -------------------------------------------------


def _design(**kw):
    from harness.stats.sequential.design import SequentialDesign

    return SequentialDesign(**{"max_seeds": 16, "min_seeds": 8, "margin": None, "equivalence": False, **kw})


def _results(values, down_a=(), down_b=()):
    out = []
    for r in F.make_results(values):
        if (r["arm"] == "A" and r["seed"] in down_a) or (r["arm"] == "B" and r["seed"] in down_b):
            r = F.make_result(r["seed"], r["arm"], None, status="failed", error=NAN)
        out.append(r)
    return out


def _plan(results, rule="worst", design=None):
    return sp.plan(design or _design(), results, seeds=[], baseline="A", arms=["B"], metric="test_accuracy",
                   diverged=rule)


def test_a_pair_where_both_diverged_is_a_tie_and_the_baseline_diverging_is_a_win():
    values = {"A": [50.0 + 0.1 * i for i in range(8)], "B": [50.0 + 0.1 * i for i in range(8)]}
    p = _plan(_results(values, down_a=range(8), down_b=[0]))
    x = p.history["B"][-1]
    assert (x.arm_only, x.baseline_only, x.both) == (0, 7, 1) and x.rule == "worst"
    assert x.decision == "better"  # 7 wins of unknown size and a tie: p = 2/128, below the 0.031 the look spends
    assert math.isclose(x.sign_flip_p, 2 / 128) and p.failed == [] and p.pair_seeds["B"] == list(range(8))


def test_before_the_first_divergence_the_looks_are_the_design_s_own():
    """A divergence after the first look changes nothing of that look: it is the same Look as without it."""
    from harness.stats.sequential.looks import replay

    values = F.accuracies(12, shift=0.3, noise=0.5, rng_seed=5)
    p = _plan(_results(values, down_b=[9]))
    d = np.array(values["B"]) - np.array(values["A"])
    assert p.history["B"][0] == replay(_design(), d[:8], arm="B")[0]
    assert p.history["B"][1].rule == "worst" and p.history["B"][1].n == 10


def _sim_rank_claims(design, rate, experiments, rng):
    """Null: the arms exchangeable, each run diverging with ``rate``; how often a claim is made."""
    claims = 0
    for _ in range(experiments):
        d = rng.normal(0, 1, design.max_seeds)
        a_down, b_down = rng.random(design.max_seeds) < rate, rng.random(design.max_seeds) < rate
        from harness.experiment.adaptive.sequential_diverged import replay_pairs

        g = np.where(a_down & b_down, 0.0, np.where(a_down, np.inf, np.where(b_down, -np.inf, d)))
        h = replay_pairs(design, g, ~(a_down | b_down), both=a_down & b_down, arm="B")
        claims += h[-1].decision in ("better", "worse")
    return claims


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_null_claims_stay_within_alpha_when_both_arms_diverge_alike(rate):
    """False claims <= alpha + 2 SE over 1500 null experiments (normal differences, divergences
    independent of them, at the same rate in both arms)."""
    design = _design(max_seeds=16, min_seeds=8)
    n = 1500
    rate_claimed = _sim_rank_claims(design, rate, n, np.random.default_rng(17)) / n
    se = math.sqrt(design.alpha * (1 - design.alpha) / n)
    assert rate_claimed <= design.alpha + 2 * se, (rate_claimed, se)


def test_a_counted_look_ranks_the_differences_rounded_as_every_other_test_rounds_them():
    """+1 test example is 0.27777777777777146 from 300/360 and 0.2777777777777857 from 302/360: a tie
    for Wilcoxon's mid-ranks on the differences rounded to 12 significant digits, and so here."""
    from scipy import stats

    unit = 100.0 / F.N_TEST
    base = [300, 302, 301, 304, 303, 306, 305, 308]
    step = [1, 1, 1, 1, -1, 2, -1, None]  # None: B diverged at the last seed
    values = {"A": [k * unit for k in base], "B": [(k + (s or 0)) * unit for k, s in zip(base, step)]}
    x = _plan(_results(values, down_b=[7])).history["B"][-1]
    assert x.rule == "worst" and x.n == 8
    top = max(values["A"] + values["B"][:7])
    decimals = 12 - math.ceil(math.log10(top))
    d = [round(b - a, decimals) for a, b in zip(values["A"][:7], values["B"][:7])] + [-1e9]
    want = stats.wilcoxon(d, method=stats.PermutationMethod()).pvalue  # 2^8 sign patterns: exact
    assert x.sign_flip_p == pytest.approx(want, rel=0, abs=1e-12)
