"""The seeds-needed search (harness.stats.power.seeds_needed._smallest_t_n): the smallest n whose power reaches
the target, found with few power evaluations even when it lies thousands of seeds above the normal
approximation (a difference near the margin), and the same n as scanning every count in blocks of 64
from that approximation, which is how it was found before (issue 18: an analysis near the margin
spent seconds here)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats import MIN_PAIRS
from harness.stats.margins import Margin
from harness.stats.power import seeds_needed as P


def _block_scan(power_at, gap, sd, one_sided_alpha, power, max_seeds, min_n=MIN_PAIRS):
    """The search as it was: every count, 64 at a time, from just below the normal approximation."""
    from scipy import stats as sps

    if gap <= 0 or sd <= 0:
        return None
    guess = ((sps.norm.ppf(1 - one_sided_alpha) + sps.norm.ppf(power)) * sd / gap) ** 2
    if guess > max_seeds:
        return None
    start = max(2, int(guess) - 1)
    while start <= max_seeds:
        ns = np.arange(start, start + 64)
        hit = np.flatnonzero(np.asarray(power_at(ns)) >= power)
        if hit.size:
            return max(min_n, int(ns[hit[0]]))
        start += 64
    return None


class _Counted:
    """A power curve that rises with n and reaches the target first at ``first``; counts its calls."""

    def __init__(self, first: int):
        self.first, self.calls = first, 0

    def __call__(self, ns):
        self.calls += 1
        return np.where(np.asarray(ns) >= self.first, 0.9, 0.1)


@pytest.mark.parametrize("first, expected", [(7, 7), (40, 40), (70, 70), (1_000, 1_000), (123_457, 123_457),
                                             (999_999, 999_999), (1_000_063, None), (1_000_100, None)])
def test_a_far_target_is_found_exactly_with_few_power_evaluations(first, expected):
    # gap = sd: the normal approximation guesses ~8 seeds, the target lies up to 10^6 above it; past
    # max_seeds (10^6, the last block of 64 ending at 1,000,006 here) there is no count
    fast, slow = _Counted(first), _Counted(first)
    found = P._smallest_t_n(fast, 1.0, 1.0, 0.025, 0.8, 1_000_000)
    assert found == expected == _block_scan(slow, 1.0, 1.0, 0.025, 0.8, 1_000_000)
    assert fast.calls <= 2 + 2 * 20  # doubling, then halving, over a million seeds
    if first > 5_000:
        assert slow.calls > 70  # one evaluation of 64 counts per block


@pytest.mark.slow
def test_the_seeds_needed_are_the_block_scans_across_effects_near_and_far_from_the_margin(monkeypatch):
    # (effect, sd of the differences, margin, bound_alpha): declared and estimated margins, far from
    # the margin and near it on both sides (0.41 with an estimated margin: ~19,000 seeds to settle)
    cases = [(0.05, 0.6, 0.4, 0.01), (0.3, 0.6, 0.4, 0.01), (0.39, 0.2, 0.4, 0.0), (0.41, 0.2, 0.4, 0.01),
             (0.45, 0.6, 0.4, 0.01), (0.45, 0.2, 0.4, 0.0), (0.8, 0.2, 0.4, 0.0)]
    def margin(m, b):  # declared, or estimated with its bound's share of alpha
        return Margin(m, "auto", "", low=m, high=m, df=11, bound_alpha=b) if b else m

    fast = [P.seeds_needed_for(e, sd, margin(m, b), n=12) for e, sd, m, b in cases]
    monkeypatch.setattr(P, "_smallest_t_n", _block_scan)
    slow = [P.seeds_needed_for(e, sd, margin(m, b), n=12) for e, sd, m, b in cases]
    assert [f.to_dict() for f in fast] == [s.to_dict() for s in slow]
    assert any(f.to_settle_margin and f.to_settle_margin > 10_000 for f in fast)  # a far target is among them


def test_no_count_at_all_when_max_seeds_is_below_the_first_one_tried():
    assert P._smallest_t_n(_Counted(2), 10.0, 1.0, 0.025, 0.8, 1) is None
    assert _block_scan(_Counted(2), 10.0, 1.0, 0.025, 0.8, 1) is None
