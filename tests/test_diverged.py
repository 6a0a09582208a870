"""A diverged run counts (issue 33, item 1): ``stats.diverged: worst | exclude | fail``.

The case that matters: the arm that diverges more often looks better on the seeds where both
finished. Left out, its divergences vanish and the verdict favours it (survivorship); counted as
worst, they are losses of unknown size, and the signed-rank sign-flip test decides.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.analyze import analyze
from harness.analysis.selection import AnalysisError
from harness.analysis.render.summary import lines
from harness.stats.diverged import diverged_pairs_test, diverged_pvalues, signed_ranks

from . import _results_factory as F

NAN = {"type": "NonFiniteLoss", "message": "the loss became nan at step 12", "step": 12}


def _results(rule: str | None, *, b_diverges=(1, 4, 7, 10), crash=()):
    """12 seeds; B is 0.5 points better than A wherever both finish, and diverges in ``b_diverges``."""
    values = F.accuracies(12, shift=0.5, noise=0.2, rng_seed=3)
    out = []
    for r in F.make_results(values):
        if r["arm"] == "B" and r["seed"] in b_diverges:
            r = F.make_result(r["seed"], "B", None, status="failed", error=NAN)
        elif r["arm"] == "B" and r["seed"] in crash:
            r = F.make_result(r["seed"], "B", None, status="failed",
                              error={"type": "RuntimeError", "message": "CUDA error: device lost", "step": None})
        if rule is not None:
            r["config"]["stats"]["diverged"] = rule
        out.append(r)
    return out


def test_worst_counts_the_divergences_and_does_not_call_the_diverging_arm_better():
    a = analyze(_results(None))  # the default: worst
    c = a["comparisons"]["B"]
    assert a["declaration"]["diverged"] == "worst"
    sentence = c["verdict"]["sentence"]
    assert sentence.startswith("diverged: A 0 of 12 seeds, B 4 of 12 seeds (stats.diverged=worst")
    assert c["verdict"]["code"] == "undecided" and "better than A" not in sentence
    test = a["diverged"]["tests"]["B"]
    assert (test["n_pairs"], test["arm_only"], test["baseline_only"], test["both"]) == (12, 4, 0, 0)
    assert test["method"] == "exact" and c["n_pairs"] == 8  # effect sizes on the finished pairs
    assert a["excluded"] == []  # counted, not left out
    assert a["diverged"]["counts"] == {"A": 0, "B": 4}
    assert lines(a)[1].strip().startswith("diverged: A 0 of 12 seeds, B 4 of 12 seeds")  # the verdict's first line
    assert any(line.startswith("runs: 8 seeds finished (diverged: B 4, counted as worst)") for line in lines(a))


def test_exclude_keeps_todays_verdict_behind_a_survivorship_warning():
    a = analyze(_results("exclude"))
    c = a["comparisons"]["B"]
    assert c["n_pairs"] == 8 and c["verdict"]["code"] in ("better", "smaller_than_margin")  # judged on survivors
    assert "SURVIVORSHIP: B diverged in 4 seed(s) and A in 0" in c["verdict"]["sentence"]
    assert c["verdict"]["sentence"].startswith("diverged: A 0 of 12 seeds, B 4 of 12")
    assert {(e["seed"], e["arm"]) for e in a["excluded"]} >= {(1, "B"), (1, "A")}


def test_fail_gives_no_verdict_and_names_the_runs():
    with pytest.raises(AnalysisError, match=r"4 run\(s\) diverged \(seed 1 arm B.*stats.diverged=fail: no verdict"):
        analyze(_results("fail"))


def test_a_genuine_failure_stays_a_failure_not_an_outcome():
    a = analyze(_results(None, b_diverges=(), crash=(2,)))
    assert "diverged" not in a and a["comparisons"]["B"]["n_pairs"] == 11
    assert any(e["seed"] == 2 and "CUDA error" in e["reason"] for e in a["excluded"])


def test_a_bad_rule_is_refused_naming_the_key():
    with pytest.raises(AnalysisError, match="stats.diverged='sometimes' must be one of worst, exclude, fail"):
        analyze(_results("sometimes"))


def test_signed_ranks_put_divergences_on_top_and_drop_ties_at_zero():
    r = signed_ranks([0.5, -math.inf, 0.0, 1.0, math.inf, -0.5])
    assert r.tolist() == [1.5, -4.5, 0.0, 3.0, 4.5, -1.5]
    t = diverged_pairs_test([1.0, 2.0, 3.0, math.inf, math.inf, 4.0], both=0)
    assert t.pvalue == pytest.approx(2 / 64) and t.statistic == 21  # every pair for the arm: the floor


ALPHA, SIMS = 0.05, 20_000


@pytest.mark.parametrize("n, rate", [(8, 0.1), (12, 0.3)])
def test_the_worst_rule_holds_alpha_when_both_arms_diverge_alike(n, rate):
    rng = np.random.default_rng(n)
    a, b = rng.normal(0, 1, (SIMS, n)), rng.normal(0, 1, (SIMS, n))
    da, db = rng.random((SIMS, n)) < rate, rng.random((SIMS, n)) < rate
    d = np.where(da & db, 0.0, np.where(da, np.inf, np.where(db, -np.inf, b - a)))
    rejected = (diverged_pvalues(d) < ALPHA).mean()
    assert rejected <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)


# -- the command: a diverged run counted as worst is an outcome, not a failure -------------------


def diverging(cfg, run, shift: float = 0.0, nan_seeds=()) -> dict:
    """A score of seed noise plus the arm's shift; the arm with a shift diverges at ``nan_seeds``."""
    import torch

    with run.init():
        w = torch.nn.Parameter(torch.randn(1))  # each seed its own start (and final weights)
        noise = torch.randn(()).item()
    run.watch([w])
    loss = (w - 1).pow(2).sum()
    if shift and run.seed in list(nan_seeds):
        loss = loss * float("nan")
    run.step(loss)
    return {"score": 50.0 + noise + shift}


@pytest.mark.slow
def test_the_command_exits_0_when_the_diverged_runs_were_counted(tmp_path):
    from .conftest import run_cli

    base = ["+experiment=loss_ab", "train.fn=tests.test_diverged.diverging", "+train.kwargs.nan_seeds=[1,4]",
            "+train.kwargs.shift=0.0",
            "ab.factor=train.kwargs.shift", "ab.arms={A: 0.0, B: 0.5}", "ab.seeds=[0,1,2,3,4,5]",
            "stats.metric=score", "+stats.metrics.score=max", "logger=none", "progress=false", "workers=1",
            "determinism.threads=1", "repro.certificate=false"]
    worst = run_cli([*base, f"hydra.run.dir={tmp_path / 'worst'}"])
    assert worst.returncode == 0, worst.stderr[-2000:]
    assert "diverged: A 0 of 6 seeds, B 2 of 6 seeds" in " ".join(worst.stdout.split())
    # (with exclude they are failures left out: exit 1, as before issue 33 -- counted_runs is empty then)
    from harness.analysis.diverged import counted_runs
    from harness.results import read_json

    analysis = read_json(tmp_path / "worst" / "analysis.json")
    assert counted_runs(analysis) == {(1, "B"), (4, "B")}
    assert counted_runs({**analysis, "diverged": {**analysis["diverged"], "rule": "exclude"}}) == set()


def test_worst_decides_when_too_few_runs_finished_to_estimate_a_size():
    """B diverges in 10 of 12 seeds: 2 finished pairs cannot estimate a size, but 12 counted pairs
    can decide; before, the analysis refused ("Too few complete pairs"), listing each diverged run as
    failed, and the arm that diverges almost always got no verdict at all."""
    a = analyze(_results(None, b_diverges=(0, 1, 2, 3, 4, 5, 6, 7, 8, 10)))
    assert "B" not in a["comparisons"]
    (entry,) = a["not_compared"]
    assert (entry["arm"], entry["n_pairs"]) == ("B", 2)
    assert entry["verdict"]["code"] == "differs"
    sentence = entry["verdict"]["sentence"]
    assert sentence.startswith("diverged: A 0 of 12 seeds, B 10 of 12 seeds (stats.diverged=worst")
    assert "B is worse than A" in sentence and "2 pairs where both finished" in sentence
    test = a["diverged"]["tests"]["B"]
    assert (test["n_pairs"], test["arm_only"]) == (12, 10) and test["pvalue"] < 0.05
    assert a["excluded"] == []  # counted, not left out
    assert any("B is worse than A" in line for line in lines(a))


def test_worst_with_too_few_pairs_even_counting_the_divergences_is_still_refused():
    results = [r for r in _results(None, b_diverges=(0, 1)) if r["seed"] in (0, 1)]
    with pytest.raises(AnalysisError, match="Too few complete pairs"):
        analyze(results)


def test_the_ledger_records_the_p_that_decided_under_worst_and_the_arms_decided_on_divergences_alone():
    """A claim decided by the signed-rank test (stats.diverged=worst) is in the ledger with that test's
    p (x the comparisons, as every decision p there), and an arm decided on its divergences alone is a
    claim too: the false discovery rate is held over every claim made."""
    from harness.config.declaration import Declaration
    from harness.ledger.claims import claim_rows

    some = analyze(_results(None))  # B diverged in 4 of 12: decided by the rank test, with a size
    (row,) = claim_rows(some, "/tmp/x", Declaration.from_config(_results(None)[0]["config"], strict=False))
    assert row["p_decision"] == some["diverged"]["tests"]["B"]["pvalue"]  # one comparison: x 1
    assert row["verdict"] == some["comparisons"]["B"]["verdict"]["code"]
    most = analyze(_results(None, b_diverges=(0, 1, 2, 3, 4, 5, 6, 7, 8, 10)))  # decided on divergences alone
    (row,) = claim_rows(most, "/tmp/x", Declaration.from_config(_results(None)[0]["config"], strict=False))
    assert (row["arm"], row["verdict"], row["effect"]) == ("B", "worse", None)  # the screen's "B is worse than A"
    assert row["p_decision"] == most["diverged"]["tests"]["B"]["pvalue"] < 0.05


def test_the_ledger_row_of_a_rank_decided_claim_says_its_direction_not_the_finished_pairs_size():
    """B diverges in 8 of 12 seeds and is 0.5 better on the 4 pairs that finished: the rank test
    says B is worse. The ledger row used to carry the finished pairs' +0.49 as the effect with the
    verdict "differs", read as "B is better"; it now says what decided, in the screen's words."""
    from harness.config.declaration import Declaration
    from harness.ledger.claims import claim_rows

    a = analyze(_results(None, b_diverges=(0, 1, 2, 3, 4, 5, 6, 7)))
    assert "B is worse than A" in a["comparisons"]["B"]["verdict"]["sentence"]
    assert a["comparisons"]["B"]["mean_diff"] > 0  # the survivors' size points the other way
    (row,) = claim_rows(a, "/tmp/x", Declaration.from_config(_results(None)[0]["config"], strict=False))
    assert row["verdict"] == "worse" and row["p_decision"] == a["diverged"]["tests"]["B"]["pvalue"]
    assert (row["effect"], row["ci_low"], row["ci_high"]) == (None, None, None)  # a diverged run has no size
    assert "diverged runs counted as worst" in row["claim"]


def test_worst_ranks_the_differences_rounded_as_every_other_test_rounds_them():
    """+1 test example is 0.27777777777777146 from 300/360 and 0.2777777777777857 from 302/360: the
    same difference, which the signed-rank test must rank as a tie (mid-ranks), as Wilcoxon's test
    on the differences rounded to 12 significant digits does."""
    from scipy import stats

    unit = 100.0 / F.N_TEST
    base = [300, 302, 301, 304, 303, 306, 305, 308, 307, 310]  # A's correct examples per seed
    step = [1, 1, 1, 1, -1, 2, -1, None, 3, 1]  # B - A in examples; None: B diverged
    a = [k * unit for k in base]
    b = [None if s is None else (k + s) * unit for k, s in zip(base, step)]
    raw = [y - x for x, y in zip(a, b) if y is not None]
    assert len({d for d in raw if d > 0 and d < 0.3}) == 2  # the float noise this test is about
    results = []
    for r in F.make_results({"A": a, "B": [0.0 if v is None else v for v in b]}):
        if r["arm"] == "B" and b[r["seed"]] is None:
            r = F.make_result(r["seed"], "B", None, status="failed", error=NAN)
        results.append(r)
    test = analyze(results)["diverged"]["tests"]["B"]

    decimals = 12 - math.ceil(math.log10(max(a + [v for v in b if v is not None])))
    d = [-1e9 if y is None else round(y - x, decimals) for x, y in zip(a, b)]  # the diverged run: the worst
    want = stats.wilcoxon(d, method=stats.PermutationMethod()).pvalue  # 2^10 sign patterns: exact
    assert test["pvalue"] == pytest.approx(want, rel=0, abs=1e-12)
