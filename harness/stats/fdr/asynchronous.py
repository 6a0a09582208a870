"""Asynchronous online FDR: claims that overlap in time (Zrnic, Ramdas & Jordan 2021, JMLR 22(33),
"Asynchronous Online Testing of Multiple Hypotheses"), as onlineFDR 2.19 implements them
(LONDstar / LORDstar / SAFFRONstar with version = "async", and ADDIS with async = TRUE).

Test t (1-based) starts at time t; its decision time E_t (an integer, E_t >= t) is when its
p-value is known: the tests that start after E_t (t' > E_t) see it, those that start before do
not. With E_t = t every decision is known to the next test and each rule is its synchronous
form (LORD++, SAFFRON, ADDIS in online.py; LOND in its modified form, max(D, 1)). Each rule
counts only the known decisions, and a rejection earns wealth from the time it became known
(max(t + 1, E_t + 1) in onlineFDR's indexing), so a test still running can neither earn nor cost
what has not been seen. A p-value not known yet may be given as NaN: it is never read.

LOND-dep and LORD-dep (dependent.py, any dependence) have no published asynchronous form
(Zrnic et al.'s conflict sets are for local dependence; onlineFDR has none). Theirs here is the
conservative rule: a test still running counts as not rejected. It keeps their guarantee by the
argument of their own proof (Javanmard & Montanari 2018, with Blanchard & Roquain's reshaping):
FDR <= sum_t E[1{p_t <= alpha_t} / (D_t + 1)] for D_t any count of rejections other than t's (at
most t - 1 of them), and alpha_t <= level c_t (D_t + 1) with sum_t c_t H_t <= 1 bounds each term by
level c_t H_t (c_t = gamma_t / H_t for LOND-dep, xi_t for LORD-dep: sum about 0.94). Counting only the
known rejections keeps both conditions, whatever the overlap does to the p-values' dependence.

Functions take p-values as a stream (or replicates x stream) and decision times of the same
shape (or one stream's, shared), and return online.py's OnlineFDRResult. ``decisions`` replays
recorded rejections (the ledger), as in online.py.
"""

from __future__ import annotations

import numpy as np

from harness.stats.fdr.online import ALL_METHODS, OnlineFDRResult, gamma_lord, gamma_saffron
from harness.stats.fdr.dependent import beta_dep, xi_dep


def _check(pvalues, times, level, decisions):
    p = np.atleast_2d(np.asarray(pvalues, dtype=float))
    single = np.asarray(pvalues).ndim == 1
    if p.ndim != 2 or (p[~np.isnan(p)] < 0).any() or (p[~np.isnan(p)] > 1).any():
        raise ValueError("p-values must be a 1-D stream (or replicates x stream) of numbers in [0, 1] (NaN: not known yet)")
    if not 0 < level < 1:
        raise ValueError(f"the FDR level must be in (0, 1), not {level}")
    E = np.broadcast_to(np.atleast_2d(np.asarray(times, dtype=float)), p.shape)
    if (E < np.arange(1, p.shape[1] + 1)).any():
        raise ValueError("each decision time must be at least its test's own start (E_t >= t, 1-based)")
    d = None if decisions is None else np.broadcast_to(np.atleast_2d(np.asarray(decisions, dtype=bool)), p.shape)
    return p, E, single, d


def _done(p, alpha, R, d, i):
    R[:, i] = (p[:, i] <= alpha[:, i]) if d is None else d[:, i]


def _out(method, level, alpha, R, single):
    return OnlineFDRResult(method=method, level=level, alpha=alpha[0] if single else alpha,
                           rejected=R[0] if single else R)


def _known_steps(E, R, i):
    """For test i (0-based): which earlier tests' decisions are known (E_j <= i), and the 0-based
    step from which each known rejection counts, s_j = max(j + 1, E_j) (inf where none)."""
    known = E[:, :i] <= i
    s = np.maximum(np.arange(1, i + 1), E[:, :i])
    return known, np.where(known & R[:, :i], s, np.inf)


def _first(idx, order, none):
    """Each replicate's gamma index of its first known rejection (smallest ``order``); ``none`` if none."""
    if idx.shape[1] == 0:
        return np.full(idx.shape[0], none)
    j = np.argmin(order, axis=1)
    return np.where(np.isfinite(order).any(axis=1), idx[np.arange(idx.shape[0]), j], none)


def lond_async(pvalues, decision_times, level: float = 0.05, original: bool = False, decisions=None):
    """LOND*: alpha_t = beta_t max(D_t, 1), D_t the rejections known when test t starts (onlineFDR's
    LONDstar); ``original``: beta_t (D_t + 1), Javanmard & Montanari's form, as lond() in online.py."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    reps, n = p.shape
    beta = level * gamma_lord(n)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for i in range(n):
        known, _ = _known_steps(E, R, i)
        D = (known & R[:, :i]).sum(axis=1)
        alpha[:, i] = beta[i] * (D + 1 if original else np.maximum(D, 1))
        _done(p, alpha, R, d, i)
    return _out("lond", level, alpha, R, single)


def lord_async(pvalues, decision_times, level: float = 0.05, w0: float | None = None, decisions=None):
    """LORD*: alpha_t = w0 gamma_t + (level - w0) gamma_{t - s_1} + level sum_{j>=2} gamma_{t - s_j}, s_j the
    time the j-th known rejection became known (onlineFDR's LORDstar, version "async"); w0 = level / 10."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    reps, n = p.shape
    w0 = level / 10 if w0 is None else w0
    g = np.concatenate([gamma_lord(n), [0.0]])
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for i in range(n):
        _, s = _known_steps(E, R, i)
        has = np.isfinite(s)
        lag = np.where(has, i - np.where(has, s, 0), n).astype(int)  # g[n] = 0: no term
        earned = g[lag].sum(axis=1)
        first = g[np.where(has.any(axis=1), i - np.min(np.where(has, s, n), axis=1, initial=n), n).astype(int)]
        alpha[:, i] = w0 * g[i] + level * earned - w0 * first
        _done(p, alpha, R, d, i)
    return _out("lord++", level, alpha, R, single)


def saffron_async(pvalues, decision_times, level: float = 0.05, lam: float = 0.5, w0: float | None = None,
                  decisions=None):
    """SAFFRON*: SAFFRON counting only known candidates (p <= lambda, decided before t starts), each
    rejection's candidates C_j+ counted from the time it became known (onlineFDR's SAFFRONstar, "async");
    lambda = 0.5, w0 = level / 2."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    if not 0 < lam < 1:
        raise ValueError(f"lambda must be in (0, 1), not {lam}")
    reps, n = p.shape
    w0 = level / 2 if w0 is None else w0
    g = np.concatenate([gamma_saffron(n + 1), [0.0]])
    none = n + 1  # g[none] = 0
    cand = p <= lam  # NaN (not known): False
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for i in range(n):
        known, s = _known_steps(E, R, i)
        seen = (cand[:, :i] & known).astype(int)
        # after[:, k] = known candidates at positions k..i-1
        after = np.concatenate([np.cumsum(seen[:, ::-1], axis=1)[:, ::-1], np.zeros((reps, 1), int)], axis=1)
        has = np.isfinite(s)
        si = np.where(has, s, i).astype(int)
        idx = np.where(has, i - si - np.take_along_axis(after, si, axis=1), none)
        earned = g[idx].sum(axis=1)
        first = g[_first(idx, np.where(has, s, np.inf), none)]
        tilde = (1 - lam) * (w0 * g[i - seen.sum(axis=1)] + level * earned - w0 * first)
        alpha[:, i] = np.minimum(lam, tilde)
        _done(p, alpha, R, d, i)
    return _out("saffron", level, alpha, R, single)


def addis_async(pvalues, decision_times, level: float = 0.05, lam: float = 0.25, tau: float = 0.5,
                w0: float | None = None, decisions=None):
    """ADDIS with asynchronous tests (onlineFDR's ADDIS(async = TRUE)): a test still running counts as
    selected (p <= tau: it spends), known candidates only are free; each rejection j earns from its own
    position kappa_j, its index S - kappa*_j - C_j+ (kappa*_j: selected p-values up to it). A p-value not
    known yet counts as not selected in kappa*_j (the smaller level; onlineFDR reads it, a ledger cannot)."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    if not 0 < lam < tau <= 1:
        raise ValueError(f"ADDIS needs 0 < lambda < tau <= 1, not lambda={lam}, tau={tau}")
    reps, n = p.shape
    w0 = level / 2 if w0 is None else w0
    g = np.concatenate([gamma_saffron(n + 1), [0.0]])
    none = n + 1
    cand, selected = p <= lam, p <= tau  # NaN: neither
    upto = np.cumsum(selected, axis=1)  # kappa*: selected at positions 0..k
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for i in range(n):
        known = E[:, :i] <= i
        S = (selected[:, :i] & known).sum(axis=1) + (~known).sum(axis=1)
        seen = (cand[:, :i] & known).astype(int)
        after = np.concatenate([np.cumsum(seen[:, ::-1], axis=1)[:, ::-1], np.zeros((reps, 1), int)], axis=1)
        rej = known & R[:, :i]
        k = np.arange(i)
        idx = np.where(rej, S[:, None] - upto[:, :i] - after[:, np.minimum(k + 1, i)], none)
        earned = g[idx].sum(axis=1)
        first = g[_first(idx, np.where(rej, k, np.inf), none)]
        tilde = (tau - lam) * (w0 * g[S - seen.sum(axis=1)] + level * earned - w0 * first)
        alpha[:, i] = np.minimum(lam, tilde)
        _done(p, alpha, R, d, i)
    return _out("addis", level, alpha, R, single)


def lond_dep_async(pvalues, decision_times, level: float = 0.05, decisions=None):
    """LOND-dep with overlapping tests: alpha_t = beta_t (D_t + 1), beta_t = level gamma_t / H_t, D_t the
    rejections known when test t starts (a test still running counts as not rejected)."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    reps, n = p.shape
    beta = beta_dep(n, level)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for i in range(n):
        known, _ = _known_steps(E, R, i)
        alpha[:, i] = beta[i] * ((known & R[:, :i]).sum(axis=1) + 1)
        _done(p, alpha, R, d, i)
    return _out("lond_dep", level, alpha, R, single)


def lord_dep_async(pvalues, decision_times, level: float = 0.05, w0: float | None = None, decisions=None):
    """LORD-dep with overlapping tests: alpha_t = xi_t W_t, W_t = w0 - (what the tests up to the last known
    rejection spent) + b0 (known rejections), the wealth just after the last rejection known when test t
    starts (w0 before any); a test still running counts as not rejected. W_t <= w0 + b0 D_t <= level (D_t + 1),
    and it stays >= 0: every test before t spent xi_j W_j with W_j <= w0 + b0 D_t, and sum xi < 1."""
    p, E, single, d = _check(pvalues, decision_times, level, decisions)
    reps, n = p.shape
    w0 = level / 10 if w0 is None else w0
    xi, rows = xi_dep(n), np.arange(reps)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    spent = np.zeros((reps, n + 1))  # spent[:, k]: alpha spent by the tests before position k
    for i in range(n):
        rej = (E[:, :i] <= i) & R[:, :i]
        last = np.where(rej, np.arange(i), -1).max(axis=1, initial=-1)
        wealth = np.where(last >= 0, w0 - spent[rows, last + 1] + (level - w0) * rej.sum(axis=1), w0)
        alpha[:, i] = xi[i] * wealth
        _done(p, alpha, R, d, i)
        spent[:, i + 1] = spent[:, i] + alpha[:, i]
    return _out("lord_dep", level, alpha, R, single)


ASYNC = {"lond": lond_async, "lord++": lord_async, "saffron": saffron_async, "addis": addis_async,
         "lond_dep": lond_dep_async, "lord_dep": lord_dep_async}


def ledger_rule(method: str):
    """The asynchronous rule the ledger computes ``method``'s levels with: ASYNC's, LOND in Javanmard &
    Montanari's original form, beta_t (D_t + 1), as online.lond (the others are already theirs)."""
    if method not in ASYNC:
        raise ValueError(f"unknown online FDR method {method!r}; one of {', '.join(ALL_METHODS)}")
    if method == "lond":
        return lambda *args, **kwargs: lond_async(*args, original=True, **kwargs)
    return ASYNC[method]


def next_alpha(method: str, pvalues, decisions, level: float = 0.05, decision_times=None) -> float:
    """The level of the claim declared now, after a recorded stream in declaration order: p-values
    (None: still running), recorded decisions, and decision times (each the number of the stream's
    tests declared when it was decided; None: decided before the next one was declared, as a ledger
    made before decision times were recorded has it). The rule is the asynchronous one: a claim still
    running neither earns nor costs (ledger_rule)."""
    rule = ledger_rule(method)
    n = len(pvalues)
    times = list(decision_times) if decision_times is not None else [None] * n
    p = [np.nan if v is None else float(v) for v in pvalues] + [np.nan]
    E = [n + 1 if v is None else (t if t is not None else k + 1) for k, (v, t) in enumerate(zip(pvalues, times))]
    d = [bool(r) for r in decisions] + [False]
    return float(rule(p, E + [n + 1], level=level, decisions=d).alpha[-1])
