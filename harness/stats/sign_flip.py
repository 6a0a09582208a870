"""The exact one-sided sign-flip test, vectorised over experiments (pure numpy).

Under H0 "the paired differences e_i are symmetric about 0", every sign pattern of the e_i is
equally likely, so the exact p-value of the sum is the fraction of the 2^n patterns s with
sum(s_i |e_i|) >= sum(e_i). A pattern differs from the all-positive one by the set F of pairs it
makes negative, and its sum is at least the observed one exactly when sum_F |e_i| <= D, the sum of
the observed negative parts. So

    p = #{F subset of the pairs : sum_F |e_i| <= D} / 2^n,

a subset-sum count. It is counted by dynamic programming on a grid of D / G: rounding every |e_i|
down to the grid counts every subset that qualifies and perhaps a few more, so the count is an
upper bound of the exact p (never below it); rounding up gives a lower bound. On a lattice (a
quantised metric: accuracies move in steps of 100 / n_test) the upper bound is the exact p when
D, in steps, times n is below G (at G = 4096 and 50 pairs: D up to 81 steps); otherwise it errs
upwards by the subsets whose sum lies within n D / G of D (conservative; a few percent of p).

Up to EXACT_N pairs (24) the count is exact instead, by meeting in the middle: the subset sums of
each half of the pairs (2^12 at most), sorted together, count the pairs of half-subsets whose sums
add up to at most D (the grid's bound alone disagrees with a full enumeration in about one
simulated verdict in 7,000, always conservatively). Above EXACT_N the grid's upper bound stands, and above
LARGE_N pairs (1000, harness.stats.verdict) the test is its normal limit. ``sign_flip_method(n)``
says which one a p on n pairs is.

``sign_flip_tail`` gives that p; ``sign_flip_reaches`` decides p <= level exactly as
``sign_flip_tail(e) <= level`` would, through coarse grids first (64 and 512: their bounds nest
around the exact count and the fine grid alike), which is what keeps simulations of thousands of
experiments fast; ``sign_flip_below`` decides p < level (strictly) the same way.

Differences within 1e-9 of the largest |e_i| count as 0 and subset sums within that of D as ties
(floats carry ~1e-14 of rounding noise from b - a). No p-value is ever below 2^-n, the floor of
any sign-flip test on n pairs.
"""

from __future__ import annotations

import numpy as np

GRIDS = (64, 512, 4096)  # nested (each divides the next), so the bounds tighten from one to the next
EXACT_N = 24  # up to this many pairs every sign pattern is counted (two halves of 2^12 subset sums)
_EXACT_BLOCK = 256  # rows per block of the exact count (memory: BLOCK x 2^13 floats)
_TIE = 1e-9  # relative: |e_i| below this times max |e| is 0, and sums this close to D are ties
_BLOCK = 2048  # rows per block of the dynamic programme (memory: BLOCK x (G + 1) floats)


def _prepare(e):
    rows = np.atleast_2d(np.asarray(e, dtype=float))
    if not np.isfinite(rows).all():
        raise ValueError("the sign-flip test needs finite differences.")
    a = np.abs(rows)
    scale = a.max(axis=-1, keepdims=True)
    zero = a <= scale * _TIE
    negative = (rows < 0) & ~zero
    deficit = np.where(negative, a, 0.0).sum(axis=-1)  # D: the observed negative parts
    return rows, a, zero, negative, deficit


def _count(a, zero, deficit, grid: int, upper: bool) -> np.ndarray:
    """Fraction of sign patterns whose sum is >= the observed one, |e| rounded to the grid
    D / grid: down (``upper``: a bound from above of the exact p) or up (a bound from below)."""
    m, n = a.shape
    out = np.empty(m)
    cols = np.arange(grid + 1)
    for start in range(0, m, _BLOCK):
        part = slice(start, start + _BLOCK)
        x = a[part] * (grid / deficit[part])[:, None]
        steps = np.floor(x + _TIE) if upper else np.ceil(x - _TIE)
        steps = np.where(zero[part], 0, np.minimum(steps, grid + 1)).astype(np.int64)
        steps.sort(axis=1)  # the order of the pairs does not change the count
        # c[j]: the fraction of the patterns of the pairs so far whose flipped steps sum to j
        c = np.zeros((steps.shape[0], grid + 1))
        c[:, 0] = 1.0
        for i in range(n):
            s = steps[:, i]
            if (s > grid).all():  # these and all later pairs can never be flipped within D
                c *= 0.5 ** (n - i)
                break
            if not s.any():  # zeros: flipped or not, the same sum
                continue
            src = cols[None, :] - s[:, None]
            shifted = np.take_along_axis(c, np.maximum(src, 0), axis=1)
            shifted[src < 0] = 0.0
            c = 0.5 * (c + shifted)
        out[part] = c.sum(axis=1)
    return out


def _half_sums(a) -> np.ndarray:
    """Every subset sum of the columns of ``a``, per row: (rows, 2^columns)."""
    h = a.shape[1]
    bits = (np.arange(2**h)[:, None] >> np.arange(h)[None, :]) & 1
    return a @ bits.T.astype(float)


def _count_exact(a, zero, deficit) -> np.ndarray:
    """The exact fraction of sign patterns whose sum is >= the observed one (n <= EXACT_N): the
    number of (subset of the first half, subset of the second) whose |e| sums add up to at most D,
    counted per row by sorting the second half's sums together with D minus the first half's."""
    m, n = a.shape
    out = np.empty(m)
    a = np.where(zero, 0.0, a)
    for start in range(0, m, _EXACT_BLOCK):
        part = slice(start, start + _EXACT_BLOCK)
        x, d = a[part], deficit[part]
        tol = _TIE * np.maximum(d, x.max(axis=1, initial=0.0))  # sums this close to D are ties
        first, second = _half_sums(x[:, : n // 2]), _half_sums(x[:, n // 2:])
        room = (d + tol)[:, None] - first  # a subset of the second half fits if its sum is <= this
        both = np.concatenate([second, room], axis=1)
        order = np.argsort(both, axis=1, kind="stable")  # equal values: the second half's sums first
        is_second = order < second.shape[1]
        below = np.cumsum(is_second, axis=1)  # second-half sums at or below each position
        out[part] = np.where(is_second, 0, below).sum(axis=1) / 2.0**n
    return out


def sign_flip_method(n: int) -> str:
    """Which p the sign-flip test gives on n pairs: 'exact' (every sign pattern counted), 'upper
    bound' (the 4096-step grid: never below the exact p) or 'normal limit' (above 1000 pairs)."""
    from ._core import LARGE_N

    return "exact" if n <= EXACT_N else ("upper bound" if n <= LARGE_N else "normal limit")


def sign_flip_tail(e) -> np.ndarray | float:
    """Exact one-sided sign-flip p-value of sum(e) ("greater": H1 e_i tend to be positive), per row
    of ``e`` (1-D: one experiment; 2-D: rows = experiments). Test the other side with ``-e`` and a
    null value mu with ``e - mu``. Exact up to EXACT_N pairs, above them an upper bound within the
    grid's resolution (module docstring)."""
    rows, a, zero, negative, deficit = _prepare(e)
    p = 2.0 ** -np.sum(~zero, axis=-1).astype(float)  # no negative part: only all-positive patterns
    live = negative.any(axis=-1)
    if live.any():
        count = _count_exact if rows.shape[-1] <= EXACT_N else lambda *x: _count(*x, GRIDS[-1], True)
        p[live] = count(a[live], zero[live], deficit[live])
    return float(p[0]) if np.ndim(e) == 1 else p


def sign_flip_reaches(e, level) -> np.ndarray | bool:
    """Whether ``sign_flip_tail(e) <= level``, per row, without the fine grid where a coarse one
    already decides. ``level``: a scalar or one per row."""
    rows, a, zero, negative, deficit = _prepare(e)
    m = rows.shape[0]
    level = np.broadcast_to(np.asarray(level, dtype=float), (m,))
    moved = np.sum(~zero, axis=-1).astype(float)
    out = np.zeros(m, dtype=bool)
    none = ~negative.any(axis=-1)
    out[none] = 2.0 ** -moved[none] <= level[none]
    # every subset of the negative pairs qualifies: p >= 2^(negatives - moved), a cheap bound from below
    todo = np.flatnonzero(~none & (2.0 ** (negative.sum(axis=-1) - moved) <= level))
    exact = rows.shape[-1] <= EXACT_N
    for grid in GRIDS[:-1] if exact else GRIDS:
        if todo.size == 0:
            break
        up = _count(a[todo], zero[todo], deficit[todo], grid, True)
        yes = up <= level[todo]
        out[todo[yes]] = True  # the exact count and the fine grid's bound are at most this one
        todo = todo[~yes]
        if grid == GRIDS[-1] or todo.size == 0:
            break
        low = _count(a[todo], zero[todo], deficit[todo], grid, False)
        todo = todo[low <= level[todo]]  # above the level from below: the exact p and fine bound are too
    if exact and todo.size:
        out[todo] = _count_exact(a[todo], zero[todo], deficit[todo]) <= level[todo]
    return bool(out[0]) if np.ndim(e) == 1 else out


def sign_flip_below(e, level) -> np.ndarray | bool:
    """Whether ``sign_flip_tail(e) < level`` (strictly, as a verdict compares p < alpha), per row.

    Every p on n pairs is a count of sign patterns over 2^n, so p < level exactly when p is at most
    the largest multiple of 2^-n below level; ``sign_flip_reaches`` decides that."""
    rows = np.atleast_2d(np.asarray(e, dtype=float))
    n = rows.shape[-1]
    level = np.asarray(level, dtype=float)
    below = (np.ceil(level * 2.0**n) - 1.0) / 2.0**n
    return sign_flip_reaches(e, below)
