"""Online FDR under arbitrary dependence between claims, as onlineFDR 2.19 implements it:

    LOND, dep = TRUE   Javanmard & Montanari (2018): beta_t discounted by the harmonic number
                       H_t = 1 + 1/2 + ... + 1/t (Benjamini & Yekutieli's factor, taken online);
    LORD, version dep  Javanmard & Montanari (2018, sec. 4.2): alpha_t = xi_t W(tau_t), the wealth
                       just after the last rejection tau_t, xi_t = 0.139307 / (t log(max(t, 2))^3),
                       wealth W(0) = w0 = level / 10, each test spends alpha_t, each rejection earns
                       b0 = level - w0.

Both give up power for a guarantee that needs no assumption on how the claims' p-values depend
on each other (ablations of one model on the same seeds do depend). Same shapes and result as
online.py; ``decisions`` replays recorded rejections. Their forms for claims that overlap in
time (the ledger's) are in asynchronous.py, on the sequences below. stats.fdr names them
lond_dep and lord_dep.
"""

from __future__ import annotations

import numpy as np

from harness.stats.fdr.online import _check, _decide, _result, gamma_lord


def beta_dep(n: int, level: float) -> np.ndarray:
    """LOND-dep's beta_t = level gamma_t / H_t, t = 1..n (gamma: online.gamma_lord)."""
    return level * gamma_lord(n) / np.cumsum(1.0 / np.arange(1, n + 1))


def xi_dep(n: int) -> np.ndarray:
    """LORD-dep's xi_t = 0.139307 / (t log(max(t, 2))^3), t = 1..n: sum_t xi_t (1 + log t) <= 1
    (Javanmard & Montanari 2018, example 3.7; onlineFDR's default)."""
    j = np.arange(1, n + 1, dtype=float)
    return 0.139307 / (j * np.log(np.maximum(j, 2)) ** 3)


def lond_dep(pvalues, level: float = 0.05, decisions=None):
    """LOND (original, beta_t (D + 1)) with beta_t / H_t: onlineFDR's LOND(d, dep = TRUE)."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    beta = beta_dep(n, level)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for t in range(n):
        alpha[:, t] = beta[t] * (R[:, :t].sum(axis=1) + 1)
        _decide(p, alpha, d, t, R)
    return _result("lond_dep", level, alpha, R, single)


def lord_dep(pvalues, level: float = 0.05, w0: float | None = None, decisions=None):
    """LORD under dependence: onlineFDR's LORD(d, version = "dep") with its defaults."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    w0 = level / 10 if w0 is None else w0
    b0 = level - w0
    xi = xi_dep(n)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    wealth = np.full(reps, w0)  # W before test t
    at_last = np.full(reps, w0)  # W just after the last rejection (w0 before any)
    for t in range(n):
        alpha[:, t] = xi[t] * at_last
        _decide(p, alpha, d, t, R)
        wealth = wealth - alpha[:, t] + R[:, t] * b0
        at_last = np.where(R[:, t], wealth, at_last)
    return _result("lord_dep", level, alpha, R, single)


DEPENDENT = {"lond_dep": lond_dep, "lord_dep": lord_dep}
