"""ab.sequential.futility_rule=better: stop for futility when the predictive chance that the last look
shows "better" is below ab.sequential.futility (python -m harness.judge's rule), by simulation with
tolerances from the simulations' standard errors; and the default rule ("reach") leaves every record as
it was."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from harness.stats.sequential.design import BETTER, FUTILE, SequentialDesign
from harness.stats.sequential.looks import replay, simulate

from .conftest import compose_cfg

SIMS = 4000  # experiments per cell: the SE of a rate p is sqrt(p (1 - p) / SIMS), 0.0034 at p = 0.05
FUTILITY = 0.05
SUP = dict(max_seeds=30, min_seeds=6, seeds_per_look=3, alpha=0.05, margin=None, equivalence=False)


def tol(p, n=SIMS):
    return p + 3 * math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def designs():
    """The same design three ways: no futility stop, the default rule, and the rule "better"."""
    none = SequentialDesign(**SUP, futility=0)
    return {"none": none, "reach": dataclasses.replace(none, futility=FUTILITY),
            "better": dataclasses.replace(none, futility=FUTILITY, futility_rule="better")}


def _paths(effect, seed):
    return np.random.default_rng(seed).standard_normal((SIMS, SUP["max_seeds"])) + effect


@pytest.mark.parametrize("effect", [0.0, 0.7])
def test_the_better_rule_never_adds_a_claim_of_better(designs, effect):
    """Non-binding: the boundaries are those of the design without the stop, so a path claims "better"
    under the rule only if it does without it; under the null the rate stays within one-sided alpha."""
    x = _paths(effect, 11)
    free, _ = simulate(designs["none"], x)
    ruled, _ = simulate(designs["better"], x)
    assert not ((ruled == BETTER) & (free != BETTER)).any()
    if effect == 0.0:
        assert (ruled == BETTER).mean() <= tol(designs["better"].one_sided_alpha)
    # a "min" metric is the same design on the negated differences
    flipped, _ = simulate(dataclasses.replace(designs["better"], direction="min"), -x)
    assert (flipped == ruled).all()


def test_under_the_null_it_stops_most_runs_early_at_a_small_cost_in_power(designs):
    null = _paths(0.0, 12)
    seeds = {k: simulate(d, null)[1].mean() for k, d in designs.items()}
    # the default rule asks about every claim at every effect inside the interval: most null runs go on
    # long; the rule "better" stops them at about a third of max_seeds (SE of a mean here: < 0.15 seeds)
    assert seeds["better"] <= 0.5 * seeds["none"] and seeds["better"] < seeds["reach"] - 5
    x = _paths(0.7, 13)
    free, _ = simulate(designs["none"], x)
    ruled, _ = simulate(designs["better"], x)
    lost = ((free == BETTER) & (ruled != BETTER)).mean()  # paired on the same paths: SE sqrt(lost / SIMS)
    assert (free == BETTER).mean() > 0.8 and lost <= 0.05  # measured 0.03 at +0.7 sd, 30 seeds


def test_a_futility_stop_means_what_it_says(designs):
    """Of the runs the rule stops (effects spread widely, so the flat prior it plans with is fair), the
    share that would have gone on to claim "better" is below the futility level; and each stopped look
    reports the chance it stopped on."""
    rng = np.random.default_rng(14)
    effects = rng.uniform(-1.0, 2.0, SIMS)
    x = rng.standard_normal((SIMS, SUP["max_seeds"])) + effects[:, None]
    free, _ = simulate(designs["none"], x)
    ruled, used = simulate(designs["better"], x)
    stopped = ruled == FUTILE
    assert stopped.sum() > SIMS / 4 and (used[stopped] < SUP["max_seeds"]).all()
    assert (free[stopped] == BETTER).mean() <= tol(FUTILITY, int(stopped.sum()))
    for row in np.flatnonzero(stopped)[:20]:
        last = replay(designs["better"], x[row])[-1]
        assert last.decision == "futile" and last.chance_to_settle < FUTILITY and last.n == used[row]


def test_the_sentence_of_a_better_futility_stop_claims_nothing_about_worse(designs):
    from harness.experiment.adaptive.sequential_plan import sentence

    x = _paths(0.0, 15)[0] - 0.3
    last = replay(designs["better"], x, arm="B")[-1]
    said = sentence(last, designs["better"], "A", "")
    assert last.decision == "futile" and "B is not shown better than A" in said and "no claim that it is worse" in said
    assert f"{last.chance_to_settle:.2g}, below 0.05" in said


def test_the_default_rule_leaves_the_records_as_they_were(designs):
    from harness.experiment.adaptive.sequential_plan import stored_design_problem

    assert "futility_rule" not in designs["reach"].to_dict()  # sequential.json, analysis.json: as before the key
    stored = designs["better"].to_dict()
    assert stored["futility_rule"] == "better" and SequentialDesign.from_dict(stored) == designs["better"]
    assert SequentialDesign.from_dict(designs["reach"].to_dict()) == designs["reach"]
    # a run declared with one rule is not continued with the other, either way
    for old, new in (("better", "reach"), ("reach", "better")):
        problem = stored_design_problem({"design": designs[old].to_dict(), "metric": "m", "baseline": "A"},
                                        designs[new], "m", "A", "here")
        assert f"futility_rule {old!r} -> {new!r}" in problem
    with pytest.raises(ValueError, match="futility_rule must be one of"):
        SequentialDesign(**SUP, futility_rule="worse")


SEQ = ["+experiment=loss_ab", "ab.sequential.enabled=true", "stats.margin=null", "ab.sequential.max_seeds=10"]


@pytest.mark.parametrize("rule", [None, "better"])
def test_the_config_key_declares_the_rule(rule):
    from harness.config.declaration import Declaration
    from harness.config.sequential_design import design_of

    decl = Declaration.from_config(compose_cfg(SEQ + ([f"ab.sequential.futility_rule={rule}"] if rule else [])))
    assert design_of(decl).futility_rule == (rule or "reach")
    written = decl.to_dict()["sequential"]
    assert ("futility_rule" in written) == (rule is not None)  # declaration.json: as before the key by default
    assert Declaration.from_dict(decl.to_dict()) == decl


def test_a_candidate_that_changes_no_number_stops_at_its_first_look(designs):
    """Every pair bit-identical (all differences 0): the last look can show "better" only if later seeds
    differ where none did, so the rule stops it at the first look instead of running it to max_seeds;
    equal differences beyond 0 go on, and the default rule is unchanged."""
    zeros = np.zeros((1, SUP["max_seeds"]))
    code, used = simulate(designs["better"], zeros)
    assert code[0] == FUTILE and used[0] == SUP["min_seeds"]
    code, used = simulate(designs["reach"], zeros)
    assert code[0] != FUTILE or used[0] > SUP["min_seeds"]
    ones = np.full((1, SUP["max_seeds"]), 0.5)
    code, _ = simulate(designs["better"], ones)
    assert code[0] != FUTILE


# -- futility-only looks before the first claim look (ab.sequential.futility_from; the judge's 4) -------------

LOOP = dict(max_seeds=30, alpha=1e-3, margin=None, equivalence=False, futility_rule="better")  # a loop's small alpha_t


@pytest.fixture(scope="module")
def early():
    """The judge's design at alpha 1e-3 (first claim look at 12 seeds) without and with futility-only looks from 4."""
    from harness.stats.sequential.design import first_claim_seeds

    late = SequentialDesign(min_seeds=first_claim_seeds(**LOOP), **LOOP)
    return late, dataclasses.replace(late, futility_from=4)


def test_futility_only_looks_come_before_the_first_claim_look_and_spend_no_alpha(early):
    late, soon = early
    assert late.futility_looks == () and late.schedule == late.looks
    assert soon.futility_looks == (4, 6, 8, 10) and soon.looks == late.looks == tuple(range(12, 31, 2))
    assert soon.boundaries == late.boundaries  # the claims' boundaries are those of the design without them
    look = replay(soon, np.full(30, 0.4) + np.random.default_rng(3).standard_normal(30), arm="B")[0]
    assert look.n == 4 and look.look == 1 and look.nominal_alpha == 0.0 and look.decision in ("continue", "futile")
    assert look.interval == (-math.inf, math.inf) and look.critical == math.inf
    assert "a futility-only look: it spends no alpha" in look.note


def test_futility_only_looks_never_add_a_claim_stop_null_runs_sooner_and_cost_little_power(early):
    late, soon = early
    null = np.random.default_rng(21).standard_normal((SIMS, 30))
    for x in (null, null + 1.0):
        free, _ = simulate(late, x)
        ruled, _ = simulate(soon, x)
        assert not ((ruled == BETTER) & (free != BETTER)).any()  # non-binding: on the same paths
    assert (simulate(soon, null)[0] == BETTER).mean() <= tol(soon.one_sided_alpha)
    # null runs: 12.3 seeds on average without them, 6.4 with (SE of a mean < 0.1 seed)
    assert simulate(soon, null)[1].mean() <= 0.6 * simulate(late, null)[1].mean()
    free, _ = simulate(late, null + 1.0)
    ruled, _ = simulate(soon, null + 1.0)
    lost = ((free == BETTER) & (ruled != BETTER)).mean()  # measured 0.0185 at +1 sd (power 0.81 without)
    assert lost <= tol(0.02)


def test_a_candidate_that_changes_no_number_stops_at_the_first_futility_only_look(early):
    from harness.experiment.adaptive.sequential_plan import sentence

    late, soon = early
    zeros = np.zeros((1, 30))
    assert simulate(late, zeros)[1][0] == late.min_seeds == 12
    code, used = simulate(soon, zeros)
    assert code[0] == FUTILE and used[0] == 4
    last = replay(soon, zeros[0], arm="B")[-1]
    said = sentence(last, soon, "A", "")
    assert said.startswith("B is not shown better than A") and "after 4 seeds, look 1 of 14" in said
    assert "repeated CI" not in said and "every difference is +0 (sd 0)" in said


def test_futility_from_is_refused_where_it_cannot_work_and_kept_out_of_old_records(early):
    from harness.experiment.adaptive.sequential_plan import stored_design_problem

    late, soon = early
    for bad in (dict(futility_from=2), dict(futility_from=4, futility_rule="reach"), dict(futility_from=4, futility=0)):
        with pytest.raises(ValueError, match="futility_from"):
            dataclasses.replace(late, **bad)
    assert "futility_from" not in late.to_dict() and "futility_looks" not in late.to_dict()
    stored = soon.to_dict()
    assert stored["futility_from"] == 4 and stored["futility_looks"] == [4, 6, 8, 10]
    assert SequentialDesign.from_dict(stored) == soon and SequentialDesign.from_dict(late.to_dict()) == late
    problem = stored_design_problem({"design": late.to_dict(), "metric": "m", "baseline": "A"}, soon, "m", "A", "here")
    assert "futility_from None -> 4" in problem


def test_the_config_key_declares_futility_only_looks():
    from harness.config.declaration import Declaration
    from harness.config.sequential_design import design_of

    decl = Declaration.from_config(compose_cfg(SEQ + ["ab.sequential.futility_rule=better", "ab.sequential.futility_from=3"]))
    d = design_of(decl)
    assert d.futility_looks == tuple(range(3, d.looks[0], 2)) and d.looks[0] > 5  # every 2 seeds, up to the first claim look
    assert decl.to_dict()["sequential"]["futility_from"] == 3 and Declaration.from_dict(decl.to_dict()) == decl
    assert "futility_from" not in Declaration.from_config(compose_cfg(SEQ)).to_dict()["sequential"]
