"""Decision p-values: each claim's p is never below the exact sign-flip test's of the same claim on
the same differences (the sign-flip floor, then the test itself), times the comparisons
(Bonferroni), and for a claim about an estimated margin divided by its share of alpha. What
verdict.decide compares with alpha; docs/statistics.md, "Decision p-values"."""

from __future__ import annotations

import numpy as np

from ._core import LARGE_N, _scalar
from .margins import minimum_effect_test, tost
from .sign_flip import sign_flip_below, sign_flip_tail


def sign_flip_floor(n_moved, two_sided: bool = True):
    """The smallest p-value an exact sign-flip test can reach on n_moved nonzero differences.

    All 2^n sign patterns are equally likely under H0; the observed one is the most extreme at
    best, together with its mirror image when two-sided: 2 / 2^n (one-sided 1 / 2^n).
    """
    n_moved = np.asarray(n_moved, dtype=float)
    return _scalar(np.minimum(1.0, 2.0 ** ((1 if two_sided else 0) - n_moved)))


def _tail(e) -> np.ndarray:
    """The exact one-sided ("greater") sign-flip p of sum(e), per row (harness.stats.sign_flip);
    above LARGE_N pairs the normal limit of the sign-flip distribution, as sign_flip_permutation."""
    e = np.atleast_2d(np.asarray(e, dtype=float))
    if e.shape[-1] > LARGE_N:
        from scipy import stats as sps  # lazily: the analysis CLI starts faster
        scale = np.sqrt(np.sum(e * e, axis=-1))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(scale > 0, e.sum(axis=-1) / np.where(scale > 0, scale, 1.0), 0.0)
        return np.where(scale > 0, sps.norm.sf(z), 1.0)
    return np.atleast_1d(sign_flip_tail(e))


def _reaches_below(e, level) -> np.ndarray:
    """Per row, whether ``_tail(e) < level`` (strictly, as decide compares p < alpha), without the
    full count where a coarse one decides (``sign_flip_below``)."""
    e = np.atleast_2d(np.asarray(e, dtype=float))
    if e.shape[-1] > LARGE_N:
        return _tail(e) < level
    return np.atleast_1d(sign_flip_below(e, level))


def _exact_tests(d, margin_beyond, margin_equivalent):
    """The one-sided exact sign-flip tests behind each claim: name -> [(e, combine)] per row.

    zero: two-sided against 0, 2 min(p(d), p(-d)); beyond: the minimum-effect test, 2 min(p(d - m),
    p(-(d + m))); equivalent: TOST, max(p(d + m), p(-(d - m))). Margins broadcast per row."""
    d = np.atleast_2d(np.asarray(d, dtype=float))
    mb = np.asarray(margin_beyond, dtype=float).reshape(-1, 1)
    me = np.asarray(margin_equivalent, dtype=float).reshape(-1, 1)
    return {"zero": ([d, -d], "two"), "beyond": ([d - mb, -(d + mb)], "two"),
            "equivalent": ([d + me, -(d - me)], "both")}


def exact_sign_flip_pvalues(d, *, margin_beyond, margin_equivalent) -> dict:
    """The exact sign-flip p-value of each claim's test on the same differences (before any
    adjustment): zero (two-sided against 0), beyond (minimum-effect test against margin_beyond)
    and equivalent (TOST against margin_equivalent). d: 1-D (one experiment) or 2-D (rows)."""
    one = np.ndim(d) == 1
    out = {}
    for name, (sides, how) in _exact_tests(d, margin_beyond, margin_equivalent).items():
        p1, p2 = (_tail(e) for e in sides)
        p = np.minimum(1.0, 2 * np.minimum(p1, p2)) if how == "two" else np.maximum(p1, p2)
        out[name] = float(p[0]) if one else p
    return out


def decision_pvalues(d, *, margin_beyond, margin_equivalent, margin_share: float = 1.0,
                     n_comparisons: int = 1, n_moved=None, alpha: float | None = None,
                     sign_flip_p: dict | None = None, t_p: dict | None = None) -> dict:
    """The p-values a verdict compares with alpha; d is 1-D (one experiment) or 2-D (rows).

    Each is max(t-based p, the exact sign-flip p of the same test on the same differences), times
    n_comparisons (Bonferroni), and for the margin claims divided by ``margin_share``, the part of
    alpha the test gets when the margin is estimated (the rest goes to the margin's bound). Capped
    at 1. The exact p is never below the sign-flip floor 2^-n (one-sided; twice that two-sided),
    counting for the test against 0 only pairs whose difference is not 0 (``n_moved``: default
    counted from d); the floor stays in the max for the limit of large n.

    ``alpha`` (for simulations of many rows): the exact test is run only where it can change a
    decision: rows whose t-based p already fails are left as they are, and rows where the exact
    test agrees with the claim keep the t-based p. The values then give the same decisions
    (``decide`` at this alpha) as without it, in a fraction of the time, but are not the decision
    p-values themselves; leave it None to report them. ``sign_flip_p``: the exact p-values when
    already computed (``exact_sign_flip_pvalues`` on the same arguments); ``t_p``: the t-based p of
    beyond and equivalent when already computed (minimum_effect_test and tost on the same d and margins).
    """
    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    if n_moved is None:
        n_moved = np.sum(d != 0, axis=-1)
    p_zero = minimum_effect_test(d, 0.0).pvalue  # the two-sided t test, also for rows with sd 0
    if t_p is None:
        t_p = {"beyond": minimum_effect_test(d, margin_beyond).pvalue, "equivalent": tost(d, margin_equivalent).pvalue}
    p_beyond, p_equivalent = t_p["beyond"], t_p["equivalent"]
    k = n_comparisons
    raw = {"zero": np.maximum(p_zero, sign_flip_floor(n_moved)),
           "beyond": np.maximum(p_beyond, sign_flip_floor(n)),
           "equivalent": np.maximum(p_equivalent, sign_flip_floor(n, False))}
    scale = {"zero": k, "beyond": k / margin_share, "equivalent": k / margin_share}
    if alpha is None:
        exact = sign_flip_p or exact_sign_flip_pvalues(d, margin_beyond=margin_beyond,
                                                       margin_equivalent=margin_equivalent)
        raw = {name: np.maximum(raw[name], exact[name]) for name in raw}
    else:
        tests = _exact_tests(d, margin_beyond, margin_equivalent)
        for name in raw:
            p = np.array(raw[name], dtype=float, ndmin=1)
            level = alpha / scale[name]
            todo = np.flatnonzero(p < level)  # the t test claims: does the exact test too?
            if todo.size:
                sides, how = tests[name]
                half = level / 2 if how == "two" else level
                hits = [_reaches_below(e[todo], half) for e in sides]
                claims = (hits[0] | hits[1]) if how == "two" else (hits[0] & hits[1])
                veto = todo[~claims]
                if veto.size:  # the exact p itself, for the few rows it turns down
                    p1, p2 = (_tail(e[veto]) for e in sides)
                    p[veto] = np.maximum(p[veto], np.minimum(1.0, 2 * np.minimum(p1, p2)) if how == "two"
                                         else np.maximum(p1, p2))
            raw[name] = p if d.ndim > 1 else p[0]
    return {name: _scalar(np.minimum(1.0, scale[name] * raw[name])) for name in raw}
