"""Sequential decisions as seeds are added: a group-sequential design with alpha-spending.

Pure numpy/scipy (no Hydra, wandb or torch).
See ``docs/sequential.md`` for the method, its references and the measured error rates.

The data are the per-seed paired differences ``d = arm - baseline`` in the metric's units. The
design is declared before the data: the maximum number of seeds, the looks (a first look at
``min_seeds``, then every ``seeds_per_look`` seeds, and always one at ``max_seeds``), alpha, the
margin and the metric's direction. At look k with n_k seeds the repeated confidence interval
(Jennison & Turnbull 1989) is the set of means that Hall's (1992) skewness-corrected t statistic
(``bounds.hall_statistic``) does not reject at the critical value c_k, in either
direction: ``mean +- c_k * sd / sqrt(n_k)`` for symmetric data, stretched towards the long tail
of skewed ones. The looks spend a one-sided level a1 by an alpha-spending function (Lan & DeMets
1983); each look's nominal level comes from the normal sequence (recursive numerical integration,
Armitage, McPherson & Rowe 1969) carried to the t scale (Jennison & Turnbull 2000, section 3.8),
and c_k is calibrated on simulated paths of differences of every shape the design declares:
normal, and gamma-shaped with skewness up to ``skewness`` (default 2) in either direction
(``skewness=0``: the t statistic, for normal differences alone). For those
shapes every interval covers the true effect at all looks at once, with probability >= 1 - 2*a1
(a1 below), so any claim read off any look is error-controlled, whatever made the run stop there.

Claims, read from the interval [lo, hi] (m the declared margin, for a "max" metric):

    better       lo > m              worse        hi < -m
    equivalent   -m < lo and hi < m  (needs m > 0, declared before the data)
    futile       for every effect inside the interval, the chance that the last look settles a
                 claim is below ``futility`` (non-binding: it never raises an error rate);
                 with ``futility_rule="better"`` (for keep/discard decisions, where only
                 "better" is acted on): the predictive chance that the last look shows
                 "better" is below ``futility`` (``_predictive_better``; non-binding too)
    undecided    the last look came and nothing settled       continue     otherwise

Each claim is one-sided at its boundary, so a1 = alpha / arms when m > 0 (TOST convention,
Schuirmann 1987); with m = 0 "better" and "worse" share the boundary 0 and a1 = alpha / (2 arms),
a two-sided test. Several arms against one baseline split alpha evenly (Bonferroni): valid under
any dependence between arms and any data-dependent dropping of arms.

With ``futility_from`` the design also looks before its first claim look, at futility_from and every
``seeds_per_look`` seeds below ``min_seeds``, with ``futility_rule="better"`` only: such a look spends no
alpha (nominal level 0, critical value infinite, so its interval is the whole line) and can only stop
for futility. The claim boundaries are those of the design without them, so they never raise an error
rate; they cost a little power (docs/sequential.md, tests/test_futility_rule.py) and spare most of the
seeds of a run heading nowhere, such as a candidate that changes no number.

The interval assumes a continuous distribution of the differences; a quantised metric (accuracy
moves in steps of one test example) breaks that at small n: six differences of exactly +1 example have
sd 0 and a zero-width interval, while the exact sign-flip test of those six signs gives p = 2^-6.
So a look claims only when, besides the interval, the exact one-sided sign-flip test on the same
n pairs (``harness.stats.sign_flip``), against the margin the claim is about, reaches that look's
nominal level (each of its two tests, for "equivalent"). Otherwise the look continues (futility
and the last look's "undecided" apply as usual). With n pairs that test cannot go below 2^-n, so
a look can claim only when 2^-n is at most its nominal level (``claim_looks``); the default first
look of the harness is the first such n (``first_claim_seeds``), and no design may look before
the exact test could reach a1 at all (``min_seeds >= log2(1 / a1)``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as sps

from harness.stats.sequential.bounds import hall_interval, sample_skewness
from harness.stats.sequential.design import (
    BETTER, CONTINUE, DECISIONS, EQUIVALENT, FUTILE, UNDECIDED, WORSE, _FUTILITY_POINTS, SequentialDesign)
from harness.stats.sign_flip import _TIE, sign_flip_reaches, sign_flip_tail


def _constant(d, axis=-1):
    """Rows whose differences are all equal up to float noise (their sd is taken as exactly 0)."""
    d = np.asarray(d, dtype=float)
    return np.ptp(d, axis=axis) <= _TIE * np.max(np.abs(d), axis=axis)


def _gate(mask, x, shift: float, flip: bool, level: float):
    """``mask`` where the exact sign-flip test of x - shift ("greater"; "less" with ``flip``) on
    the rows of x (..., n) reaches ``level``; computed only where ``mask`` is set."""
    out = np.zeros(mask.size, dtype=bool)
    idx = np.flatnonzero(mask.ravel())
    if idx.size:
        e = x.reshape(-1, x.shape[-1])[idx] - shift
        out[idx] = sign_flip_reaches(-e if flip else e, level)
    return out.reshape(mask.shape)


def evaluate(design: SequentialDesign, n: int, mean, sd, differences):
    """Vectorised decision at one look with n seeds.

    ``mean`` and ``sd``: of the differences at this look (sd 0 for rows that do not vary);
    ``differences``: the n differences themselves, shape ``mean.shape + (n,)``, for the exact
    sign-flip test every claim must also pass at this look's nominal level. Returns (lo, hi,
    decision codes, chance to settle); shapes follow ``mean``. Used both by ``replay`` and by the
    simulations in scripts/bench_sequential.py, so they cannot drift apart.
    """
    mean, sd = np.broadcast_arrays(np.asarray(mean, float), np.asarray(sd, float))
    sign = 1.0 if design.direction == "max" else -1.0
    x = sign * np.asarray(differences, dtype=float)  # oriented: positive = better
    if x.shape != mean.shape + (n,):
        raise ValueError(f"evaluate needs the {n} differences of each row, shape {mean.shape + (n,)}; "
                         f"got {x.shape}.")
    g = sign * mean
    if n in design.futility_looks:  # spends no alpha: no claim, an interval as wide as everything
        settle = _predictive_better(design, n, g, sd, float(design.margin or 0.0))
        code = np.where(settle < design.futility, FUTILE, CONTINUE).astype(np.int8)
        return np.full(g.shape, -np.inf), np.full(g.shape, np.inf), code, settle
    crit = design.critical(n)
    if design.skewness > 0:
        # Hall's statistic inverted: an interval stretched towards the long tail of the differences
        live = sd > 0
        skew = np.where(live, sample_skewness(x), 0.0)
        glo, ghi = hall_interval(g, np.where(live, sd, 1.0), skew, n, crit)
        glo, ghi = np.where(live, glo, g), np.where(live, ghi, g)
    else:
        half = crit * sd / math.sqrt(n)
        glo, ghi = g - half, g + half
    m = float(design.margin or 0.0)
    level = design.nominal(n)
    # the interval claims; then the exact sign-flip test on the same pairs, against the margin of
    # the claim, must reach the look's level too (module docstring)
    better = _gate(glo > m, x, m, False, level)
    worse = _gate(ghi < -m, x, -m, True, level)
    code = np.full(g.shape, CONTINUE, dtype=np.int8)
    code[better] = BETTER
    code[worse] = WORSE
    if design.equivalence:
        equivalent = _gate((glo > -m) & (ghi < m), x, -m, False, level)
        code[_gate(equivalent, x, m, True, level)] = EQUIVALENT
    settle = np.ones(g.shape)
    N = design.max_seeds
    if n >= N:
        code[code == CONTINUE] = UNDECIDED
    elif design.futility > 0 and design.futility_rule == "better":
        settle = _predictive_better(design, n, g, sd, m)
        code[(code == CONTINUE) & (settle < design.futility)] = FUTILE
    elif design.futility > 0:
        # chance that the last look settles a claim if the rest of the seeds had mean mu, for mu
        # spread over the current interval; sd is taken as known (its estimate at this look). With
        # sd 0 there is no noise to plan with: the chance is left at 1 (futility never stops it)
        frac = np.linspace(0.0, 1.0, _FUTILITY_POINTS)
        mu = glo[..., None] + (ghi - glo)[..., None] * frac
        s = sd[..., None]
        center = (n * g[..., None] + (N - n) * mu) / N
        spread = np.where(s > 0, s, 1.0) * math.sqrt(N - n) / N
        hN = design.critical(N) * s / math.sqrt(N)
        p = sps.norm.sf((m + hN - center) / spread) + sps.norm.cdf((-m - hN - center) / spread)
        if design.equivalence:
            p = p + np.clip(sps.norm.cdf((m - hN - center) / spread)
                            - sps.norm.cdf((-m + hN - center) / spread), 0.0, None)
        settle = np.where(sd > 0, p.max(axis=-1), 1.0)
        code[(code == CONTINUE) & (settle < design.futility)] = FUTILE
    lo, hi = (glo, ghi) if sign > 0 else (-ghi, -glo)
    return lo, hi, code, settle


def _predictive_better(design: SequentialDesign, n: int, g, sd, m: float):
    """The predictive chance that the last look shows "better" (Spiegelhalter, Freedman & Blackburn
    1986): the chance that the mean of all N seeds clears m + c_N sd / sqrt(N), averaged over the
    effects the n seeds so far make plausible (flat prior: effect ~ Normal(g, sd^2 / n)), sd taken
    as known. The mean of N seeds is then Normal(g, sd^2 (N - n) / (N n)). Where sd is 0 (every
    difference so far the same, 0 for a candidate that changes no number) that is its limit: 1 when
    the difference is beyond the margin, else 0."""
    N = design.max_seeds
    live = sd > 0
    s = np.where(live, sd, 1.0)
    bar = m + design.critical(N) * s / math.sqrt(N)
    chance = sps.norm.sf((bar - g) / (s * math.sqrt((N - n) / (N * n))))
    return np.where(live, chance, np.where(g > m, 1.0, 0.0))


@dataclass(frozen=True)
class Look:
    """One look: what was known, the boundaries in force, and the decision."""

    look: int  # 1-based index among the design's looks (its schedule: futility-only looks first)
    n: int  # seeds (pairs) used
    estimate: float  # mean difference, arm - baseline, metric units
    sd: float  # sd of the differences
    interval: tuple  # repeated confidence interval, simultaneous over all looks
    level: float  # its simultaneous coverage, 1 - 2 * one-sided alpha
    critical: float  # c_k on the scale of the look's statistic (Hall's skewness-corrected t; the t
    # statistic when design.skewness is 0, and then interval = estimate +- critical * sd / sqrt(n))
    nominal_alpha: float  # one-sided nominal level of this look
    margin: float | None
    chance_to_settle: float  # the futility statistic (1.0 at the last look or with futility off); with
    # futility_rule "better", the predictive chance that the last look shows "better"
    skewness: float  # sample skewness G1 of the differences, the one Hall's statistic corrects with;
    # the boundaries hold for gamma-shaped differences up to design.skewness, not for a few outlying seeds
    decision: str
    arm: str | None = None
    # the exact one-sided sign-flip p of the claim the interval points to, against its margin (the
    # larger of the two for "equivalent"); None when the interval points to no claim
    sign_flip_p: float | None = None
    note: str = ""  # why the interval's claim was not made, or that sd 0 left it to the exact test

    @property
    def settled(self) -> bool:
        return self.decision != "continue"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval)
        return d


def _in_view(design, lo: float, hi: float):
    """The claim the repeated interval alone points to, and its sign-flip p-value's arguments."""
    sign = 1.0 if design.direction == "max" else -1.0
    glo, ghi = (lo, hi) if sign > 0 else (-hi, -lo)
    m = float(design.margin or 0.0)
    if glo > m:
        return "better", [(m, False)]
    if ghi < -m:
        return "worse", [(-m, True)]
    if design.equivalence and -m < glo and ghi < m:
        return "equivalent", [(-m, False), (m, True)]
    return None, []


def _look(design, k, n, d, arm):
    mean = float(np.mean(d))
    flat = n < 2 or bool(_constant(d))
    sd = 0.0 if flat else float(np.std(d, ddof=1))
    lo, hi, code, settle = evaluate(design, n, mean, sd, d)
    early = n in design.futility_looks
    # a futility-only look spends no alpha: its nominal level is 0 and its critical value infinite
    nominal, crit = (0.0, math.inf) if early else (design.nominal(n), design.critical(n))
    skew = float(sps.skew(d, bias=False)) if sd > 0 and n > 2 else 0.0
    decision = DECISIONS[int(code)]
    claim, tests = _in_view(design, float(lo), float(hi))
    x = d if design.direction == "max" else -d
    p = max((sign_flip_tail(-(x - s) if flip else x - s) for s, flip in tests), default=None)
    notes = []
    if early:
        notes.append(f"a futility-only look: it spends no alpha, so no claim is possible before the first claim "
                     f"look at {design.min_seeds} seeds")
    if flat and early:
        notes.append(f"every difference is {mean:+.4g} (sd 0): with no noise to plan with, the predictive chance "
                     f"of 'better' is its limit, {settle:g}")
    elif flat:
        notes.append(f"every difference is {mean:+.4g} (sd 0): the interval has no width, so the decision "
                     f"rests on the exact sign-flip test alone")
    if claim is not None and decision != claim:
        against = f" against the margin {design.margin:g}" if design.margin else ""
        notes.append(f"the repeated interval points to '{claim}', but the exact sign-flip test on these {n} pairs"
                     f"{against} gives p = {p:.2g}, above this look's nominal level {nominal:.2g}"
                     + (f" (with {n} pairs it cannot go below 2^-{n} = {2.0**-n:.2g})" if 2.0**-n > nominal else "")
                     + ": no claim at this look")
    return Look(look=k + 1, n=n, estimate=mean, sd=sd, interval=(float(lo), float(hi)),
                level=1.0 - 2.0 * design.one_sided_alpha, critical=crit, nominal_alpha=nominal,
                margin=design.margin, chance_to_settle=float(settle), skewness=skew, decision=decision,
                arm=arm, sign_flip_p=None if p is None else float(p), note="; ".join(notes))


def _as_differences(differences) -> np.ndarray:
    d = np.asarray(differences, dtype=float).ravel()
    if not np.isfinite(d).all():
        raise ValueError("the paired differences must be finite numbers (arm - baseline per seed).")
    return d


def replay(design: SequentialDesign, differences, *, arm: str | None = None) -> tuple:
    """Every look the differences reach, in order, stopping at the first settled decision.

    ``differences[i]`` is arm - baseline for the i-th seed, in seed order. Seeds beyond the look
    that settled (a resumed run that ran a batch too many) are ignored, so the same seeds always
    give the same history. An empty tuple means the first look is not reached yet.
    """
    d = _as_differences(differences)
    history = []
    for k, n in enumerate(design.schedule):
        if n > len(d):
            break
        history.append(_look(design, k, n, d[:n], arm))
        if history[-1].settled:
            break
    return tuple(history)


def simulate(design: SequentialDesign, differences: np.ndarray) -> tuple:
    """Run the design on many simulated experiments at once (operating characteristics).

    ``differences`` has shape (experiments, max_seeds): the paired differences each experiment
    would see, in seed order. Returns (decision code, seeds used) per experiment, both arrays,
    through the same ``evaluate`` as ``replay``.
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or d.shape[1] < design.max_seeds:
        raise ValueError(f"simulate needs an array (experiments, >= {design.max_seeds} seeds).")
    looks = np.array(design.schedule)
    d = d[:, : design.max_seeds]
    s1 = np.cumsum(d, axis=1)[:, looks - 1]
    s2 = np.cumsum(d**2, axis=1)[:, looks - 1]
    mean = s1 / looks
    var = np.clip((s2 - looks * mean**2) / np.maximum(looks - 1, 1), 0.0, None)
    # rows that do not vary have sd exactly 0 (as in replay), not the float noise of s2 - n mean^2
    spread = (np.maximum.accumulate(d, axis=1) - np.minimum.accumulate(d, axis=1))[:, looks - 1]
    var[spread <= _TIE * np.maximum.accumulate(np.abs(d), axis=1)[:, looks - 1]] = 0.0
    code = np.zeros(len(d), dtype=np.int8)
    used = np.zeros(len(d), dtype=np.int64)
    open_ = np.ones(len(d), dtype=bool)
    for k, n in enumerate(looks):
        idx = np.flatnonzero(open_)
        if idx.size == 0:
            break
        _, _, c, _ = evaluate(design, int(n), mean[idx, k], np.sqrt(var[idx, k]), d[idx, :n])
        stop = c != CONTINUE
        code[idx[stop]], used[idx[stop]] = c[stop], n
        open_[idx[stop]] = False
    return code, used
