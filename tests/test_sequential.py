"""Sequential decisions (harness.stats.sequential): design checks, error rates by small
simulations (tolerances from their standard errors), replay, direction, several arms. What a run
does next (the next batch, which arms go on) is read from
harness.experiment.adaptive.sequential_plan, the bookkeeping the in-process loop and the sweeper share."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.stats.sequential.bounds import _normal_bounds, spend
from harness.stats.sequential.design import BETTER, DECISIONS, EQUIVALENT, WORSE, SequentialDesign, first_claim_seeds
from harness.experiment.adaptive import sequential_plan as sp
from harness.stats.sequential.looks import evaluate, replay, simulate
from harness.stats.sign_flip import sign_flip_reaches, sign_flip_tail

from . import _results_factory as F

ALPHA = 0.05
SIMS = 4000  # experiments per simulated cell: SE of a rate near 0.05 is 0.0034


def tol(p, n=SIMS):
    return p + 3 * math.sqrt(p * (1 - p) / n)


def _plan(design, diffs: dict):
    """The run's plan over result files whose arm - baseline differences are ``diffs`` (arm -> per seed)."""
    values = {"A": [50.0] * max(len(d) for d in diffs.values()), **{a: [50.0 + x for x in d] for a, d in diffs.items()}}
    return sp.plan(design, F.make_results(values), seeds=[], baseline="A", arms=list(diffs), metric="test_accuracy")


def _pairs(d) -> np.ndarray:
    """The differences the plan reads from those result files (50 + x - 50, as floats give it)."""
    return np.array([50.0 + x for x in d]) - 50.0


# designs shared by the tests (boundaries are cached per look schedule and spending)
SUP = dict(max_seeds=30, min_seeds=6, seeds_per_look=3, alpha=ALPHA, margin=None, equivalence=False)
MAR = dict(max_seeds=30, min_seeds=6, seeds_per_look=3, alpha=ALPHA, margin=0.5)


# -- the design refuses bad values, before any data, with a sentence that says what to do ------

@pytest.mark.parametrize("kwargs, words", [
    (dict(max_seeds=5, min_seeds=8, margin=1.0), "max_seeds (5) is below min_seeds (8)"),
    (dict(seeds_per_look=0, margin=1.0), "seeds_per_look must be >= 1"),
    (dict(margin=None), "margin=..., or set equivalence=False"),
    (dict(margin=0.0), "Equivalence is only claimed within a margin declared before the data"),
    (dict(alpha=0.0, margin=1.0), "alpha is the error rate"),
    (dict(alpha=1.5, margin=1.0), "must lie in (0, 0.5)"),
    (dict(direction="up", margin=1.0), "declared, never guessed"),
    (dict(min_seeds=3, margin=1.0), "a claim needs at least 5 seeds"),
    (dict(min_seeds=5, margin=None, equivalence=False), "a claim needs at least 6 seeds"),
    (dict(margin=-1.0), "margin must be a finite number >= 0"),
    (dict(margin=1.0, spending="linear"), "spending must be one of"),
    (dict(margin=1.0, max_seeds=10.5), "max_seeds must be a whole number"),
])
def test_bad_design_fails_with_a_clear_message(kwargs, words):
    with pytest.raises(ValueError) as e:
        SequentialDesign(**kwargs)
    assert words in str(e.value)
    assert str(e.value).startswith("SequentialDesign: ")


def test_looks_schedule_and_next_batch():
    d = SequentialDesign(max_seeds=20, min_seeds=6, seeds_per_look=4, margin=1.0, futility=0)
    assert d.looks == (6, 10, 14, 18, 20)  # the last look is always at max_seeds
    unsettled = np.resize([6.0, -6.0], 20)  # mean 0, an interval too wide to settle anything before the last look
    batches = [_plan(d, {"B": unsettled[:n]}) for n in (0, 6, 7, 18, 20)]
    assert [len(p.batch_seeds) for p in batches] == [6, 4, 3, 2, 0]  # up to the next look; none after the last
    assert batches[2].batch_seeds == [7, 8, 9] and batches[2].batch_arms == ["A", "B"]
    assert batches[-1].history["B"][-1].decision == "undecided"
    stored = json.loads(json.dumps(d.to_dict()))  # stored with the run, compared on resume
    assert SequentialDesign.from_dict(stored) == d
    assert SequentialDesign.from_dict({**stored, "alpha": 0.1}) != d


def test_normal_boundaries_match_published_obrien_fleming_values():
    # Lan-DeMets O'Brien-Fleming-type, 5 equally spaced looks, one-sided 0.025: the values of
    # Jennison & Turnbull (2000) / gsDesign: 4.877, 3.357, 2.680, 2.290, 2.031
    t = np.arange(1, 6) / 5
    inc = np.diff(np.r_[0.0, spend("obrien-fleming", 0.0, 0.025, t)])
    z = _normal_bounds(tuple(map(float, range(1, 6))), tuple(inc.tolist()))
    assert np.allclose(z, [4.877, 3.357, 2.680, 2.290, 2.031], atol=0.0015)


# -- error rates, by simulation ---------------------------------------------------------------

def test_false_positive_rate_under_the_null_at_most_alpha():
    d = SequentialDesign(**SUP)
    code, used = simulate(d, np.random.default_rng(1).standard_normal((SIMS, 30)))
    fpr = np.isin(code, [BETTER, WORSE]).mean()
    assert fpr <= tol(ALPHA)
    # under the null most runs end as futile or undecided, and futility saves seeds
    assert (code == DECISIONS.index("futile")).mean() > 0.5 and used.mean() < 30
    assert (code == DECISIONS.index("undecided")).any()
    # the same data, a fixed-N t test peeked at every look: the inflation this module prevents
    from scipy import stats as sps
    x = np.random.default_rng(1).standard_normal((SIMS, 30))
    n = np.array(d.looks)
    m = np.cumsum(x, 1)[:, n - 1] / n
    sd = np.sqrt((np.cumsum(x * x, 1)[:, n - 1] - n * m * m) / (n - 1))
    peeked = (np.abs(m / sd * np.sqrt(n)) > sps.t.isf(ALPHA / 2, n - 1)).any(1).mean()
    assert peeked > tol(ALPHA)


@pytest.mark.slow
def test_intervals_cover_the_truth_at_every_look_at_once():
    # the repeated confidence intervals, read at ALL looks (no stopping): simultaneous coverage
    d = SequentialDesign(**MAR)
    x = np.random.default_rng(2).standard_normal((SIMS, 30)) * 2.0 + 0.7  # any mean, any sd
    miss = np.zeros(SIMS, dtype=bool)
    for n in d.looks:
        lo, hi, _, _ = evaluate(d, n, x[:, :n].mean(1), x[:, :n].std(1, ddof=1), x[:, :n])
        miss |= (lo > 0.7) | (hi < 0.7)
    assert miss.mean() <= tol(2 * d.one_sided_alpha)


@pytest.mark.parametrize("truth, claims", [(0.5, ("better", "equivalent")),
                                           (-0.5, ("worse", "equivalent"))])
def test_margin_claims_at_the_boundary_at_most_alpha(truth, claims):
    d = SequentialDesign(**MAR)
    code, _ = simulate(d, np.random.default_rng(3).standard_normal((SIMS, 30)) + truth)
    for claim in claims:
        assert (code == DECISIONS.index(claim)).mean() <= tol(ALPHA), claim


def test_large_effect_is_settled_early():
    x = np.random.default_rng(4).standard_normal((SIMS, 30)) + 2.0
    code, used = simulate(SequentialDesign(**SUP), x)
    assert (code == BETTER).mean() >= 0.99
    # a fixed-N t test needs 10 seeds for power 0.9999 at 2 sigma; boundaries that also hold for
    # skewed differences cost about one seed here, normal-only ones none
    assert used.mean() < 11
    code, used = simulate(SequentialDesign(**SUP, skewness=0.0), x)
    assert (code == BETTER).mean() >= 0.99 and used.mean() < 10


# -- replay: the same seeds give the same decisions, however the run was cut --------------------

def test_replay_is_a_prefix_and_ignores_seeds_after_the_decision():
    d = SequentialDesign(**MAR)
    x = np.random.default_rng(5).standard_normal(30) + 1.5
    full = replay(d, x)
    assert full[-1].decision == "better" and full[-1].n < 30
    for cut in range(len(x) + 1):  # killed after any seed, resumed later
        part = replay(d, x[:cut])
        assert part == full[: len(part)]
    assert replay(d, np.r_[x, np.ones(5)]) == full  # a batch too many changes nothing
    assert _plan(d, {"B": x}).history["B"] == replay(d, _pairs(x), arm="B")  # the run's looks are replay's
    assert _plan(d, {"B": x[:5]}).history["B"] == ()  # before the first look
    json.dumps([look.to_dict() for look in full])


def test_replay_agrees_with_the_vectorised_simulation():
    d = SequentialDesign(**MAR)
    x = np.random.default_rng(6).standard_normal((60, 30)) * 1.3 + np.linspace(-1.5, 1.5, 60)[:, None]
    code, used = simulate(d, x)
    for row, c, u in zip(x, code, used):
        last = replay(d, row)[-1]
        assert (last.decision, last.n) == (DECISIONS[c], u)
    assert len(set(code.tolist())) >= 3  # the rows reach several different decisions


def test_direction_min_mirrors_max():
    x = np.random.default_rng(7).standard_normal(30) - 1.2  # lower is better: an improvement
    up = replay(SequentialDesign(**MAR), -x)
    down = replay(SequentialDesign(**MAR, direction="min"), x)
    assert [a.decision for a in up] == [b.decision for b in down] and down[-1].decision == "better"
    assert np.allclose([b.interval for b in down], [(-a.interval[1], -a.interval[0]) for a in up])


def test_constant_differences_rest_on_the_exact_sign_flip_test():
    d = SequentialDesign(**SUP)  # looks at 6, 9, 12, ...; each claim one-sided at 0.025 overall
    # six equal differences: sd 0 and a zero-width interval beyond 0, but six equal signs have
    # exact sign-flip p 2**-6 = 0.016, above the first look's nominal level
    look = replay(d, np.full(6, 0.25))[-1]
    assert look.interval == (0.25, 0.25) and look.sd == 0 and look.nominal_alpha < 2.0**-6
    assert look.decision == "continue" and look.sign_flip_p == 2.0**-6
    assert "sd 0" in look.note and "2^-6" in look.note and "no claim at this look" in look.note
    # the first look at which 2**-n reaches the look's level settles it
    first = d.claim_looks[0]
    history = replay(d, np.full(first, 0.25))
    assert history[-1].decision == "better" and history[-1].n == first
    assert all(x.decision == "continue" for x in history[:-1]) and len(history) > 1
    # float noise of b - a (1e-14) does not make equal differences unequal: sd stays exactly 0
    noisy = np.full(first, 95.25) - np.full(first, 95.0) + np.random.default_rng(0).choice([0.0, 1e-14], first)
    assert replay(d, noisy)[0].sd == 0
    assert simulate(d, np.tile(np.r_[noisy, np.full(30, 0.25)][:30], (2, 1)))[1].tolist() == [first, first]
    with pytest.raises(ValueError, match="finite"):
        replay(d, [0.1, np.nan, 0.2, 0.3, 0.1, 0.2])


def test_equivalence_is_claimed_for_a_null_effect():
    d = SequentialDesign(**{**MAR, "margin": 1.0})
    code, _ = simulate(d, np.random.default_rng(8).standard_normal((500, 30)))
    assert (code == EQUIVALENT).mean() > 0.9


# -- several arms ------------------------------------------------------------------------------

def test_arms_split_alpha_and_a_worse_arm_stops_getting_seeds():
    with pytest.raises(ValueError, match="a claim needs at least 7 seeds"):
        SequentialDesign(**{**SUP, "arms": 3})  # alpha / 6 per side and arm: 2**-6 is not enough
    d = SequentialDesign(**{**SUP, "arms": 3, "min_seeds": 7})
    assert d.one_sided_alpha == pytest.approx(ALPHA / 6)
    rng = np.random.default_rng(9)
    diffs = {"bad": rng.standard_normal(12) - 3.0, "b": rng.standard_normal(12), "c": rng.standard_normal(12)}
    state = _plan(d, diffs)
    assert state.history["bad"][-1].decision == "worse" and "bad" not in state.active
    stopped_at = state.history["bad"][-1].n
    assert stopped_at < 12 and state.active == ["b", "c"] and state.batch_arms == ["A", "b", "c"]
    assert state.batch_seeds == list(range(12, next(n for n in d.looks if n > 12)))  # the active arms' next look
    assert state.history == {a: replay(d, _pairs(x)[: len(state.pair_seeds[a])], arm=a) for a, x in diffs.items()}
    # the dropped arm has no more seeds; the others go on: the same decisions for it
    more = {"bad": diffs["bad"][:stopped_at], **{a: np.r_[diffs[a], rng.standard_normal(6)] for a in "bc"}}
    assert _plan(d, more).history["bad"] == state.history["bad"]
    json.dumps({a: [x.to_dict() for x in h] for a, h in state.history.items()})


def test_family_wise_error_across_arms_under_the_null():
    d = SequentialDesign(**{**SUP, "arms": 3, "min_seeds": 7})
    rng = np.random.default_rng(10)
    base = rng.standard_normal((SIMS, 30))
    wrong = np.zeros(SIMS, dtype=bool)
    for _ in range(3):  # differences against a shared baseline: correlated 0.5
        code, _ = simulate(d, (rng.standard_normal((SIMS, 30)) - base) / math.sqrt(2))
        wrong |= np.isin(code, [BETTER, WORSE])
    assert wrong.mean() <= tol(ALPHA)


# -- quantised metrics: no look claims more than the exact sign-flip test allows ------

UNIT = 100 / 450  # one test example of a 450-example test set, in points
LOOK50 = dict(max_seeds=50, min_seeds=6, seeds_per_look=2, alpha=ALPHA, equivalence=False)
QSIMS = 8000  # SE of a rate near 0.05: 0.0024


@pytest.mark.slow
@pytest.mark.parametrize("margin", [None, UNIT], ids=["against-0", "at-the-margin"])
def test_one_example_differences_keep_the_false_positive_rate(margin):
    # Per-seed differences of exactly +-1 test example around the null (0, or the margin). Six
    # equal ones at the first look have sd 0 and a zero-width interval, which claimed, though the
    # exact sign-flip p of six equal signs is 2**-6 = 0.016 against that look's level 0.0044:
    # measured 0.0735 +- 0.0012 false positives at alpha 0.05.
    d = SequentialDesign(**LOOK50, margin=margin)
    x = (margin or 0.0) + np.random.default_rng(11).choice([-UNIT, UNIT], (QSIMS, 50))
    code, _ = simulate(d, x)
    wrong = np.isin(code, [BETTER, WORSE]) if margin is None else code == BETTER
    assert wrong.mean() <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / QSIMS)


def _enumerated_tail(e):
    """P(sum s_i |e_i| >= sum e_i) over all 2^n sign patterns (ties within 1e-9 count)."""
    signs = 1 - 2 * ((np.arange(2 ** len(e))[:, None] >> np.arange(len(e))) & 1)
    return float(np.mean(signs @ np.abs(e) >= e.sum() - 1e-9 * np.abs(e).max()))


def test_sign_flip_tail_is_exact_on_a_lattice_and_never_below_exact_off_it():
    rng = np.random.default_rng(12)
    rows = [rng.integers(-3, 4, n) * UNIT + rng.choice([0.0, 1e-14], n) for n in (6, 9, 12) for _ in range(40)]
    shifted = [rng.integers(-2, 5, n) * UNIT - 0.3 for n in (6, 9, 12) for _ in range(40)]  # against a margin
    normal = [rng.normal(0.8, 1.0, n) for n in (6, 9, 12) for _ in range(40)]
    for e in rows + shifted:
        assert sign_flip_tail(e) == pytest.approx(_enumerated_tail(e), abs=1e-12)
    for e in normal:  # the grid errs upwards only: conservative, and by little
        exact = _enumerated_tail(e)
        assert exact - 1e-12 <= sign_flip_tail(e) <= 1.2 * exact + 1e-12
    every = np.array(rows + shifted + normal, dtype=object)
    for n in (6, 9, 12):
        block = np.array([e for e in every if len(e) == n], dtype=float)
        p = sign_flip_tail(block)
        for level in (2.0**-n, 0.004, 0.02, 0.1):  # the fast decision is the fine grid's, exactly
            assert (sign_flip_reaches(block, level) == (p <= level)).all()


def test_no_claim_without_the_exact_test_and_replay_agrees_with_simulate_on_quantised_data():
    d = SequentialDesign(**{**MAR, "margin": 2 * UNIT})
    rng = np.random.default_rng(13)
    shift = rng.integers(-4, 5, (120, 1)) * UNIT  # true effects from -4 to +4 test examples
    x = shift + rng.integers(-2, 3, (120, 30)) * UNIT + rng.choice([0.0, 1e-14], (120, 30))
    code, used = simulate(d, x)
    vetoed = 0
    for row, c, u in zip(x, code, used):
        history = replay(d, row)
        assert (history[-1].decision, history[-1].n) == (DECISIONS[c], u)
        for look in history:
            if look.decision in ("better", "worse", "equivalent"):
                assert look.sign_flip_p <= look.nominal_alpha and 2.0**-look.n <= look.nominal_alpha
            vetoed += "no claim at this look" in look.note
    assert vetoed and len(set(code.tolist())) >= 3


@pytest.mark.slow
def test_the_first_claim_look():
    # the first look of the harness's default designs: 2**-n reaches the look's nominal level
    for kw in (dict(margin=None, equivalence=False), dict(margin=0.5), dict(margin=None, equivalence=False, arms=3)):
        kw["max_seeds"] = 30
        n = first_claim_seeds(**kw)
        design = SequentialDesign(min_seeds=n, **kw)
        assert design.claim_looks[0] == n and design.min_claim_seeds <= n
        if n > design.min_claim_seeds:
            assert SequentialDesign(min_seeds=n - 1, **kw).claim_looks[0] > n - 1
