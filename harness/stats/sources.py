"""Where the noise floor comes from: the spread of each source of randomness on its own, against the
spread of all of them together (the ordinary seeds), and what that says (pure numpy + scipy).

A source is one random stream moved while every other is held at the reference seed (init, data
order, the model stream for dropout, augmentation), or a numerical change with every stream held
(one ULP of one initial weight, another thread count, CUDA mode off); each source's interval comes
from its own run count, so a source with few runs (a thread count per run) only widens what fits.
Two readings are possible, and the data decide:

- *the sources add up*: each source contributes its own variance and together they make the seed
  variance (independent contributions, as a linear model of small effects would give);
- *unstable*: each source alone already reaches (nearly) the full seed spread, as Summers & Dinneen
  (ICML 2021) found on CIFAR-10: training amplifies any change to the same noise, so the source
  hardly matters and more seeds, not fewer sources, narrow the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._core import Result

UNSTABLE_SHARE = 0.9  # a source alone within 90% of the full spread (over the intervals) reaches it


@dataclass(frozen=True)
class Spread(Result):
    """The standard deviation of K values with its chi-square interval (normal values assumed)."""

    n: int
    std: float
    low: float
    high: float
    confidence_level: float


def spread(values, *, confidence_level: float = 0.95) -> Spread:
    """The sample std (ddof 1) of ``values`` and its chi-square interval. Exactly equal values have
    std 0 (not a rounding residue: a spread over identical numbers is zero)."""
    from scipy.stats import chi2

    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n < 2:
        raise ValueError(f"a spread needs at least 2 values, got {n}.")
    std = 0.0 if np.all(x == x[0]) else float(x.std(ddof=1))
    a = 1 - confidence_level
    df = n - 1
    low = math.sqrt(df * std**2 / chi2.ppf(1 - a / 2, df))
    high = math.sqrt(df * std**2 / chi2.ppf(a / 2, df))
    return Spread(n, std, low, high, confidence_level)


@dataclass(frozen=True)
class SourcesReading(Result):
    """What the spreads of the single sources say against the full (all-streams) spread."""

    kind: str  # unstable | adds_up | undetermined | dominant | none
    shares: dict  # source -> its std / the full std
    variance_sum_share: float | None  # the sources' variances summed / the full variance
    sentence: str


def read_sources(spreads: dict, full: Spread) -> SourcesReading:
    """``spreads``: source -> Spread of that source alone (sources the training does not use left
    out); ``full``: the Spread over ordinary seeds (every stream moved). Each reading is taken only
    when the intervals exclude the other: with few runs both fit, and the reading says so."""
    if not spreads or full.std == 0:
        said = ("no seed moves this metric: the full seed spread is 0" if full.std == 0
                else "no source was measured")
        return SourcesReading("none", {}, None, said + ".")
    shares = {s: sp.std / full.std for s, sp in spreads.items()}
    total = sum(sp.std**2 for sp in spreads.values()) / full.std**2
    low, high = min(shares.values()), max(shares.values())
    parts = ", ".join(f"{s} {100 * sp.std**2 / full.std**2:.0f}%" for s, sp in spreads.items())
    # unstable: every source alone can be as large as the full spread; adds up: the sources'
    # variances can sum to the full variance (each judged over the 95% intervals)
    unstable = all(sp.high >= UNSTABLE_SHARE * full.low and sp.low <= full.high for sp in spreads.values())
    adds = (sum(sp.low**2 for sp in spreads.values()) <= full.high**2
            and sum(sp.high**2 for sp in spreads.values()) >= full.low**2)
    if unstable and not adds:
        return SourcesReading("unstable", shares, total, (
            f"every single source reaches {100 * low:.0f}-{100 * high:.0f}% of the full seed spread: training is "
            f"unstable here; more seeds, not fewer sources, narrow the noise."))
    if adds and not unstable:
        low_sum = sum(sp.low**2 for sp in spreads.values()) / full.high**2
        high_sum = sum(sp.high**2 for sp in spreads.values()) / full.low**2
        short = [s for s, sp in spreads.items() if not (sp.high >= UNSTABLE_SHARE * full.low and sp.low <= full.high)]
        return SourcesReading("adds_up", shares, total, (
            f"the sources add up: their variances make {100 * total:.0f}% of the seed variance ({parts}); "
            f"{100 * low_sum:.0f}-{100 * high_sum:.0f}% over the 95% intervals, which includes 100%; and not "
            f"every source alone reaches the full spread ({', '.join(short)} {'falls' if len(short) == 1 else 'fall'} short)."))
    if adds and unstable and len(spreads) > 1:
        factor = full.high / full.std if full.std else float("inf")
        fewer = ", ".join(f"{s} {sp.n}" for s, sp in spreads.items() if sp.n != full.n)  # e.g. thread counts
        return SourcesReading("undetermined", shares, total, (
            f"too few runs to tell: with {full.n} runs per source{f' ({fewer})' if fewer else ''} each spread is "
            f"known within x{factor:.1f}{' (wider with fewer)' if fewer else ''}, and "
            f"both readings fit (the sources adding up, {100 * total:.0f}% of the seed variance: {parts}; or each "
            f"alone reaching the full spread, {100 * low:.0f}-{100 * high:.0f}%). Run more (--repeats {max(20, 4 * full.n)})."))
    top = max(shares, key=shares.get)
    return SourcesReading("dominant", shares, total, (
        f"the largest source is {top} ({100 * shares[top]:.0f}% of the full spread); the sources' variances "
        f"sum to {100 * total:.0f}% of the seed variance ({parts})."))


__all__ = ["Spread", "SourcesReading", "read_sources", "spread"]
