"""Issue 17, "What you declared is what gets analysed": seeds needed at the level each verdict uses.

The verdict tests a claim at alpha / k over k comparisons with the baseline (Bonferroni), a margin
claim at alpha - alpha/2 when the margin is estimated (the rest goes to the margin's bound), and
never below the exact sign-flip floor (2 * 2**-n two-sided, 2**-n one-sided). "Seeds needed" must
be computed at that same level: each count is checked here by simulating the verdict's own
decision at that many seeds (vectorised; tolerance 2 binomial standard errors of the target power).
"""

import math

import numpy as np
import pytest

from harness import stats

ALPHA, POWER, SIMS = 0.05, 0.8, 4000
LOW = POWER - 2 * math.sqrt(POWER * (1 - POWER) / SIMS)  # "at least the target power", within 2 SE


def _margin(value: float, auto: bool) -> stats.Margin:
    """A margin as the verdict resolves it; auto: estimated (value = the arms' seed std)."""
    if not auto:
        return stats.resolve_margin(value)
    return stats.Margin(value, "auto", "auto (test)", low=value, high=value, df=None, bound_alpha=ALPHA / 2)


def _codes(n, effect, sd_diff, margin: stats.Margin, k: int, rng, rho: float = 0.5):
    """Verdict codes of SIMS experiments with n seeds, the true difference ``effect``.

    Declared margin: normal differences with sd ``sd_diff``. Auto margin: two arms with seed std
    margin.value correlated rho (sd_diff follows from them), the margin estimated from the arms
    as compare() does, each claim at its share of alpha over k comparisons.
    """
    if not margin.estimated:
        d = rng.normal(effect, sd_diff, (SIMS, n))
        p = stats.decision_pvalues(d, margin_beyond=margin.high, margin_equivalent=margin.low, n_comparisons=k,
                                   alpha=ALPHA)
    else:
        s = margin.value
        level = rng.normal(0, s * math.sqrt(rho), (SIMS, n))
        a = level + rng.normal(0, s * math.sqrt(1 - rho), (SIMS, n))
        b = level + effect + rng.normal(0, s * math.sqrt(1 - rho), (SIMS, n))
        d = b - a
        pooled = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / 2)
        f_low, f_high = stats.margin_bound_factors(n - 1, margin.bound_alpha)
        p = stats.decision_pvalues(d, margin_beyond=pooled * f_high, margin_equivalent=pooled * f_low,
                                   margin_share=(ALPHA - margin.bound_alpha) / ALPHA, n_comparisons=k, alpha=ALPHA)
    return stats.decide(p["zero"], p["beyond"], p["equivalent"], d.mean(axis=1), ALPHA)


# -- the two measured defects ---------------------------------------------------------------------


def test_six_seeds_with_an_auto_margin_never_suggest_six():
    # 6 seeds, a huge difference: "beyond the (estimated) margin" is tested at alpha/2 = 0.025, where
    # 6 pairs cannot go below 2 * 2**-6 = 0.031; the report said "about 6 (from 6 to 6) seeds would
    # settle that" although 6 seeds were there and could not.
    a = 95 + np.array([0.0, 1.0, -1.0, 0.5, -0.5, 0.2])
    b = a + 5 + np.array([0.0, 0.1, -0.1, 0.05, 0.0, -0.05])
    c = stats.compare(a, b, n_resamples=199)
    assert c.verdict.code == "differs" and c.margin.estimated
    need = c.seeds_needed
    assert need.to_settle_margin == 7 and need.to_settle_margin_range == (7, 7)
    assert "about 7 (from 7 to 7" in c.verdict.sentence


def test_four_arms_seeds_needed_give_the_power_at_the_bonferroni_level():
    # 4 arms: each claim at alpha / 3. Counted at alpha, "14 seeds" (d_z 0.825) had power 0.64 at
    # the level the verdict uses. Here: the undecided arms' counts, simulated at alpha / 3.
    base = 95 + np.array([0.3, -0.4, 0.1, 0.8, -0.6, 0.0])
    shifts = {"B": [0.5, 1.3, 0.2, 1.1, 0.9, -0.2], "C": [0.1, 0.6, -0.3, 0.9, 0.2, 0.4],
              "D": [-0.2, 0.3, 0.1, -0.5, 0.2, 0.0]}
    pairs = {arm: (base, base + np.array(d)) for arm, d in shifts.items()}
    out = stats.compare_to_baseline(pairs, margin=0.2, n_resamples=199)
    rng = np.random.default_rng(3)
    checked = 0
    for c in out.values():
        assert c.n_comparisons == 3
        n = c.seeds_needed.at_observed
        if c.verdict.code != "undecided" or n is None or n > 100:
            continue
        codes = _codes(n, c.mean_diff, c.noise.std_diff, c.margin, 3, rng)
        assert np.isin(codes, stats.DIFFERS).mean() >= LOW, (c.arm, n)
        checked += 1
    assert checked >= 2


# -- every count, simulated at the level the verdict uses ----------------------------------------


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("effect", [0.6, 1.5])
def test_seeds_to_detect_a_difference_reach_the_power(k, effect):
    rng = np.random.default_rng(int(10 * effect) + k)
    need = stats.seeds_needed_for(effect, 1.0, _margin(0.3, False), alpha=ALPHA, n_comparisons=k)
    n = need.at_observed
    assert n >= stats.claim_floors(ALPHA, k)["zero"]
    assert np.isin(_codes(n, effect, 1.0, _margin(0.3, False), k, rng), stats.DIFFERS).mean() >= LOW
    if n > stats.claim_floors(ALPHA, k)["zero"]:  # and no more than needed: one fewer falls short
        short = np.isin(_codes(n - 1, effect, 1.0, _margin(0.3, False), k, rng), stats.DIFFERS).mean()
        assert short < POWER + 2 * math.sqrt(POWER * (1 - POWER) / SIMS)


@pytest.mark.parametrize("auto", [False, True], ids=["declared", "auto"])
@pytest.mark.parametrize("k", [1, 2])
def test_seeds_to_settle_beyond_the_margin_reach_the_power(auto, k):
    rng = np.random.default_rng(20 + k + 10 * auto)
    margin, effect = _margin(1.0, auto), 2.0  # auto: the arms' seed std is 1; differences' sd 1 (rho 0.5)
    need = stats.seeds_needed_for(effect, 1.0, margin, alpha=ALPHA, n_comparisons=k)
    n = need.to_settle_margin
    assert n >= stats.claim_floors(ALPHA, k, margin_share=0.5 if auto else 1.0)["beyond"]
    assert (_codes(n, effect, 1.0, margin, k, rng) == "better").mean() >= LOW


@pytest.mark.parametrize("auto", [False, True], ids=["declared", "auto"])
@pytest.mark.parametrize("k", [1, 3])
def test_seeds_to_settle_within_the_margin_reach_the_power(auto, k):
    rng = np.random.default_rng(40 + k + 10 * auto)
    margin = _margin(1.0, auto)
    need = stats.seeds_needed_for(0.1, 1.0, margin, alpha=ALPHA, n_comparisons=k)
    n = need.to_settle_margin
    codes = _codes(n, 0.1, 1.0, margin, k, rng)
    assert np.isin(codes, ["equivalent", "smaller_than_margin"]).mean() >= LOW


@pytest.mark.parametrize("k, auto, beyond", [(1, False, 6), (1, True, 7), (2, False, 7), (2, True, 8),
                                             (3, False, 7), (3, True, 8)])
def test_a_huge_difference_needs_the_sign_flip_floor_at_the_level_used(k, auto, beyond):
    # 20 sd beyond the margin: the t test is certain, only the exact floor limits the count
    margin = _margin(1.0, auto)
    need = stats.seeds_needed_for(20.0, 0.5, margin, alpha=ALPHA, n_comparisons=k)
    assert need.to_settle_margin == beyond == stats.claim_floors(ALPHA, k, 0.5 if auto else 1.0)["beyond"]
    rng = np.random.default_rng(k)
    assert (_codes(beyond, 20.0, 0.5, margin, k, rng, rho=0.9) == "better").mean() >= LOW
    assert (_codes(beyond - 1, 20.0, 0.5, margin, k, rng, rho=0.9) == "better").mean() == 0.0


def test_claim_floors_at_alpha_005():
    # the fewest seeds each claim can rest on, from the code (docs/statistics.md tabulates these)
    cases = {(1, 1.0): (6, 6, 5), (1, 0.5): (6, 7, 6), (2, 1.0): (7, 7, 6), (2, 0.5): (7, 8, 7),
             (3, 1.0): (7, 7, 6), (3, 0.5): (7, 8, 7)}
    for (k, share), (zero, beyond, equivalent) in cases.items():
        assert stats.claim_floors(ALPHA, k, share) == {"zero": zero, "beyond": beyond, "equivalent": equivalent}


def test_the_floors_table_in_the_docs_is_the_codes():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "statistics.md").read_text()
    for k in (1, 2, 3):
        declared, auto = stats.claim_floors(ALPHA, k, 1.0), stats.claim_floors(ALPHA, k, 0.5)
        row = (f"| {k} ({k + 1} arms) | {declared['zero']} | {declared['beyond']} | {auto['beyond']} | "
               f"{declared['equivalent']} | {auto['equivalent']} |")
        assert row in text, row
