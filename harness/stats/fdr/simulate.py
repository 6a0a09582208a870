"""The simulation behind docs/statistics.md's online FDR table: streams of nulls and non-nulls.

Each replicate is a stream of ``n`` one-sided z-tests; each is a true effect (mean ``effect``)
with probability ``pi1``, else a null (mean 0). ``rho`` > 0 makes the z's equicorrelated (one
shared factor per replicate: positive dependence, under which LORD++, SAFFRON and ADDIS are not
guaranteed, and which the table reports beside the independent case). Seeded, vectorised over
replicates: every procedure sees the same streams. ``decision_times`` makes the claims overlap in
time (each decided a random number of claims after it started, as experiments and sweeps running at
once are): the asynchronous rules (asynchronous.ledger_rule, the ledger's) then decide.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .online import PROCEDURES
from .asynchronous import ledger_rule
from .dependent import DEPENDENT

SYNC = {**PROCEDURES, **DEPENDENT}  # every method, each claim decided before the next one starts


@dataclass(frozen=True)
class OnlineFDRSimulation:
    method: str
    level: float
    fdr: float  # mean over replicates of V / max(R, 1)
    fdr_se: float  # its standard error
    power: float  # mean share of the true effects rejected
    mean_rejections: float


def simulate_streams(n: int = 200, reps: int = 1000, pi1: float = 0.2, effect: float = 3.0, rho: float = 0.0,
                     seed: int = 0):
    """(p-values, is_null), each replicates x n."""
    rng = np.random.default_rng(seed)
    null = rng.random((reps, n)) >= pi1
    z = rng.standard_normal((reps, n))
    if rho:
        z = np.sqrt(rho) * rng.standard_normal((reps, 1)) + np.sqrt(1 - rho) * z
    z = z + np.where(null, 0.0, effect)
    return norm.sf(z), null


def decision_times(shape, max_lag: int, seed: int = 0) -> np.ndarray:
    """E_t = t + a lag uniform on 0..max_lag (1-based t, ``shape`` = replicates x n): claim t is known
    to the claims that start after E_t, so up to max_lag + 1 claims run at once, finishing out of order."""
    reps, n = shape
    return np.arange(1, n + 1) + np.random.default_rng(seed).integers(0, max_lag + 1, size=(reps, n))


def simulate_online_fdr(method: str, level: float = 0.1, p=None, null=None, times=None,
                        **stream) -> OnlineFDRSimulation:
    """The false discovery rate and power of ``method`` at ``level`` over simulated streams (``p`` and
    ``null`` from simulate_streams, or made here from ``stream``'s keywords); with ``times`` (from
    decision_times) the claims overlap and the ledger's asynchronous rule decides."""
    if p is None:
        p, null = simulate_streams(**stream)
    if method not in SYNC:
        raise ValueError(f"unknown online FDR method {method!r}; one of {', '.join(SYNC)}")
    if times is None:
        rejected = SYNC[method](p, level=level).rejected
    else:
        rejected = ledger_rule(method)(p, times, level=level).rejected
    false = (rejected & null).sum(axis=1)
    fdp = false / np.maximum(rejected.sum(axis=1), 1)
    effects = (~null).sum(axis=1)
    power = ((rejected & ~null).sum(axis=1) / np.maximum(effects, 1))[effects > 0]
    return OnlineFDRSimulation(method=method, level=level, fdr=float(fdp.mean()),
                               fdr_se=float(fdp.std(ddof=1) / np.sqrt(len(fdp))), power=float(power.mean()),
                               mean_rejections=float(rejected.sum(axis=1).mean()))
