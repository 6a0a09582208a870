"""The power of a claim about an estimated margin, averaged over the margin's own estimate, and the
first count of seeds in a block whose power reaches a target, found without evaluating every node.

``_margin_power`` is the definition. ``NodePower`` is a power_at for seeds_needed.py's search that gives
the same numbers: a count is only ever ruled out by a bound its power provably stays below, and
every count that decides is computed in full, as ``_margin_power`` computes it (evaluating the
noncentral t at 24 nodes for each of 64 counts would cost compare ~40 ms near the margin)."""

from __future__ import annotations

import numpy as np

from .._core import _scalar
from .t_test import cached_ppf


def _bound_factors(df, bound_alpha: float):
    """margins.margin_bound_factors(df, bound_alpha), the same arithmetic on remembered chi-square
    quantiles (cached_ppf): every count of seeds tried asks for its bounds again (tests/
    test_stats_cost.py checks the two agree to the bit)."""
    df = np.asarray(df, dtype=float)
    low = np.sqrt(df / cached_ppf("chi2", 1 - bound_alpha, df))
    high = np.sqrt(df / cached_ppf("chi2", bound_alpha, df))
    return _scalar(low), _scalar(high)


_HERMITE = np.polynomial.hermite_e.hermegauss(24)  # nodes and weights for E[g(Z)], Z standard normal
_WEIGHTS = _HERMITE[1] / _HERMITE[1].sum()
# The nodes a bound is built from (_HERMITE's 24, from the middle out): the middle 4 carry 80% of
# the weight, 8 carry 99.1%, the middle 12 99.993%.
_UPPER_STAGES = (np.arange(10, 14), np.r_[8:10, 14:16])
_FEW = 8  # counts from which the second stage of upper bounds pays for its call
_MIDDLE = np.arange(6, 18)
_OUTSIDE = float(_WEIGHTS[np.r_[0:6, 18:24]].sum())
# Slack for rounding: every term is in [0, 1] and the weights sum to 1, so the computed average and
# the bounds each lie within ~1e-13 of their exact values; 1e-9 leaves room to spare.
_SLACK = 1e-9


def _nulls(value: float, bound_alpha: float, n, which: int):
    """(n, null) at the nodes, as _margin_power passes them to power_with (arrays n.shape + (24,))."""
    factor = np.asarray(_bound_factors(n - 1, bound_alpha)[which])
    nu = (n - 1)[..., None]
    z, _ = _HERMITE
    cube = np.clip(1 - 2 / (9 * nu) + z * np.sqrt(2 / (9 * nu)), 0.0, None)
    ratio = cube ** 1.5  # sigma_hat / sigma at the nodes
    return np.broadcast_to(n[..., None], ratio.shape), value * ratio * factor[..., None]


def _margin_power(power_with, value: float, bound_alpha: float, n, which: int, rows: int | None = None):
    """Power of a margin claim with n seeds, averaged over the margin's own estimate.

    Declared (bound_alpha 0): ``power_with(n, value)``. Estimated: with n seeds the claim is tested
    against sigma_hat * f(n - 1), an end of sigma_hat's chi-square bound (``which``: 0 low, 1 high),
    and sigma_hat itself varies from run to run. Its variation lowers the power (measured: a count
    planned at sigma_hat = sigma gave 0.76 instead of 0.8), so the power is averaged over
    sigma_hat = value * sqrt(V / nu), V chi-square with nu = n - 1 df: one arm's, the widest spread the
    pooled estimate can have (arms of one seed correlated -> 1), as the margin's own bound assumes.
    Wilson-Hilferty's normal form of V / nu, Gauss-Hermite nodes.

    ``rows``: only the first ``rows`` counts of a 1-D n (_smallest_t_n's scan), each the number the
    whole call gives it: the average over the nodes is taken in a product of n's full length (BLAS
    sums a row in an order that depends on the number of rows, never on the other rows' values).
    """
    if bound_alpha <= 0:
        return power_with(n if rows is None else n[:rows], value)
    n = np.asarray(n, dtype=float)
    full = n.shape
    if rows is not None:
        n = n[:rows]
    counts, nulls = _nulls(value, bound_alpha, n, which)
    powers = np.asarray(power_with(counts, nulls))
    if rows is None:
        return powers @ _WEIGHTS
    padded = np.zeros(full + powers.shape[-1:])
    padded[:rows] = powers
    return (padded @ _WEIGHTS)[:rows]


class NodePower:
    """power_at(n, rows=None) = _margin_power(power_with, value, bound_alpha, n, which, rows), for
    an estimated margin (bound_alpha > 0), with ``first_reaching`` for the search.

    ``upper_with(n, m)``: at least power_with(n, m) at every node, and cheaper (TOST's lower bound
    near + far - 1 is at most near, its one test against the near end of the margin; for the
    minimum-effect test, power_with itself).
    """

    def __init__(self, power_with, upper_with, value: float, bound_alpha: float, which: int):
        self.power_with, self.upper_with = power_with, upper_with
        self.value, self.bound_alpha, self.which = value, bound_alpha, which
        self._last = None  # (counts' bytes, counts and nulls at the nodes) of the last block

    def __call__(self, n, rows=None):
        return _margin_power(self.power_with, self.value, self.bound_alpha, n, self.which, rows)

    def first_reaching(self, n, power: float, rows=None):
        """The first of ``rows`` (indices into the 1-D counts n, ascending; default all) whose power,
        as ``self(n)`` computes it, is >= power; None when none is.

        Each power is an average over 24 nodes of terms in [0, 1], so the nodes evaluated so far
        bound it: below by their part of the average, above by that plus the others' weight (each
        at most 1). A count whose upper bound stays below the target is ruled out; the first count
        left whose lower bound reaches it is the answer. The middle nodes, which carry most of the
        weight, come first, with the cheaper ``upper_with`` while many counts are left, then 12
        nodes of ``power_with`` itself. A count the bounds leave open is computed in full, alone
        (every node of one count shares its df, so the far-tail quadrature of _t_tail, grouped by
        df, sees the same elements as in the whole call), and averaged in a product of n's full
        shape, as ``self(n)`` averages it.
        """
        n = np.asarray(n, dtype=float)
        if self._last is None or self._last[0] != n.tobytes():  # the scan asks twice of one block
            self._last = (n.tobytes(), *_nulls(self.value, self.bound_alpha, n, self.which))
        _, counts, nulls = self._last
        left = np.arange(len(n)) if rows is None else np.asarray(rows)
        known, rest = np.zeros(len(left)), 1.0
        for nodes in _UPPER_STAGES[:1 if len(left) <= _FEW else None]:
            upper = np.asarray(self.upper_with(counts[left][:, nodes], nulls[left][:, nodes]), dtype=float)
            known += np.where(np.isnan(upper), 1.0, np.minimum(upper, 1.0)) @ _WEIGHTS[nodes]
            rest -= float(_WEIGHTS[nodes].sum())
            keep = known + max(rest, 0.0) + _SLACK >= power
            left, known = left[keep], known[keep]
            if not left.size:
                return None
        terms = np.asarray(self.power_with(counts[left][:, _MIDDLE], nulls[left][:, _MIDDLE]), dtype=float)
        low = np.where(np.isnan(terms), 0.0, terms) @ _WEIGHTS[_MIDDLE]
        high = np.where(np.isnan(terms), 1.0, terms) @ _WEIGHTS[_MIDDLE] + _OUTSIDE
        padded = np.zeros(counts.shape)
        for i, low_i, high_i in zip(left.tolist(), low.tolist(), high.tolist()):
            if high_i + _SLACK < power:
                continue
            if low_i - _SLACK >= power:
                return i
            padded[i] = np.asarray(self.power_with(counts[i:i + 1], nulls[i:i + 1]))[0]
            if (padded @ _WEIGHTS)[i] >= power:
                return i
            padded[i] = 0.0
        return None
