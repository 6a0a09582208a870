"""How much of the t test's power survives the exact sign-flip test, below _EXACT_BELOW pairs.

``simulate_share(n, delta, level)`` is the definition: a seeded simulation of _EXACT_SIMS
experiments of n normal differences (the same draws for every delta). It costs 4-80 ms, and
seeds_needed asks it for every new effect size (simulating each would triple `compare`'s time),
so ``exact_share`` answers from a table shipped with the package (exact_share_table.json, built
by scripts/build_exact_share_table.py from simulate_share itself, and checked against it by
tests/test_stats_cost.py) and simulates only what the table does not hold.

Outside the table's range of effects the answer is 1.0 without simulating, provably the same:
  * at or below ``low`` (every simulated difference is negative) the t test rejects no experiment
    (its one-sided p is above 1/2), and simulate_share says 1.0;
  * at or above ``high`` (every difference is positive, and none within 1e-6 of the largest: the
    sign-flip test counts each as moved) the exact test's p of every experiment is its floor 2^-n,
    below the level whenever 2^n level > 1, so every experiment the t test rejects it rejects too.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from .._core import one_sample_t

_EXACT_BELOW = 20  # from this many pairs on the share is 1.0 (seeds_needed.py says why)
_EXACT_SIMS = 4096
_STEP = 20  # effects on the table are multiples of 1/_STEP sd (seeds_needed._share rounds them down)
TABLE = Path(__file__).with_name("exact_share_table.json")


def draws(n: int) -> np.ndarray:
    """The standard normal differences every delta shares for n pairs."""
    return np.random.default_rng([n, 20261130]).standard_normal((_EXACT_SIMS, n))


def simulate_share(n: int, delta: float, level: float) -> float:
    """P(the exact sign-flip test also rejects | the t test rejects), one-sided at ``level``, for n
    normal differences whose mean is ``delta`` sds beyond the null: a seeded simulation of
    _EXACT_SIMS experiments (the same draws for every delta), 1.0 from _EXACT_BELOW pairs on."""
    if n >= _EXACT_BELOW:
        return 1.0
    from ..sign_flip import sign_flip_below
    d = draws(n) + delta
    _, p = one_sample_t(d, 0.0, "greater")
    t_rejects = p < level
    if not t_rejects.any():
        return 1.0
    return float(np.mean(sign_flip_below(d[t_rejects], level)))


def bounds(n: int) -> tuple[int, int]:
    """(low, high): grid steps j (delta = j / _STEP) at or below which every difference of the
    draws is negative, and at or above which every one is positive and counted as moved."""
    z = draws(n)
    low = math.floor(-z.max() * _STEP)
    while not np.all(z + low / _STEP < 0):
        low -= 1
    high = math.ceil(-z.min() * _STEP)
    while not _all_moved(z + high / _STEP):
        high += 1
    return low, high


def _all_moved(d) -> bool:
    # all positive, and clear of the sign-flip test's zero threshold (1e-9 of the largest) by far
    return bool(np.all(d > 1e-6 * d.max(axis=-1, keepdims=True)))


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    try:
        raw = json.loads(TABLE.read_text())
    except FileNotFoundError:  # a checkout without the table: every share is simulated
        return {}
    return {(int(n), float(level)): entry for n, by_level in raw["shares"].items()
            for level, entry in by_level.items()}


@functools.lru_cache(maxsize=4096)
def exact_share(n: int, delta: float, level: float) -> float:
    """simulate_share(n, delta, level), from the table where it holds the answer."""
    if n >= _EXACT_BELOW:
        return 1.0
    entry = _table().get((int(n), float(level)))
    j = round(delta * _STEP) if math.isfinite(delta) else None
    if entry is not None and j is not None and j / _STEP == delta:  # delta is a point of the grid
        if j <= entry["low"]:
            return 1.0
        if j >= entry["high"] and level * 2.0**n > 1:
            return 1.0
        if j > entry["low"] and j < entry["high"]:
            t, both = entry["t"][j - entry["low"] - 1], entry["both"][j - entry["low"] - 1]
            return 1.0 if t == 0 else both / t  # what np.mean of t decisions, both of them True, gives
    return simulate_share(n, delta, level)


def counts(n: int, delta: float, level: float) -> tuple[int, int]:
    """(experiments the t test rejects, of those the exact test rejects too): simulate_share's
    counts, which the table stores."""
    from ..sign_flip import sign_flip_below
    d = draws(n) + delta
    _, p = one_sample_t(d, 0.0, "greater")
    t_rejects = p < level
    return int(t_rejects.sum()), int(np.sum(sign_flip_below(d[t_rejects], level))) if t_rejects.any() else 0
