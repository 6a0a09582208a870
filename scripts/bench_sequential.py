"""Operating characteristics of the sequential design (harness.stats.sequential), by simulation.

Prints, in one run: the false-positive rate under the null; the error rate of each margin claim
at its boundary; power against the fixed-N design with the same maximum; the expected seeds to a
decision as a ratio to the fixed-N design of the same power; the spending functions compared; the
contrast of peeking a fixed-N t test at every look and of an anytime-valid confidence sequence;
non-normal differences; several arms; quantised differences (exactly +-1 test example per
seed), where the exact sign-flip test each claim must also pass at its look's level is
what keeps the false-positive rate; and skewed differences: the chosen design
(``skewness=2``: Hall's skewness-corrected t, boundaries calibrated on normal and gamma shapes up
to skewness 2) against the design before it (``skewness=0``: the t statistic, boundaries for
normal differences), with the alternatives weighed and shapes outside the calibrated family.
Effects are in units of sigma, the sd of the paired differences. Every cell is a vectorised simulation of EXPERIMENTS experiments through the same
``evaluate`` the harness uses. The designs are the harness's defaults: looks every 2 seeds from
the first look at which a claim is possible (``first_claim_seeds``) to 50. A few minutes on one
core at the default sizes.

    python scripts/bench_sequential.py [--experiments 20000] [--boundary-experiments 50000]
                                       [--sections 1,2,3,4,5,6,7]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:  # this checkout's harness, not another installed one
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402
from scipy.optimize import minimize_scalar  # noqa: E402

from harness.stats.sequential.design import (BETTER, EQUIVALENT, FUTILE, UNDECIDED, WORSE,  # noqa: E402
                                             SequentialDesign, first_claim_seeds)
from harness.stats.sequential.looks import simulate  # noqa: E402
from harness.stats.sequential.bounds import _robust_bounds, spend  # noqa: E402

EXPERIMENTS = 20_000
BOUNDARY_EXPERIMENTS = 50_000  # cells that check an error rate against alpha: SE 0.001
MAX = 50
ALPHA = 0.05
EFFECTS = (0.0, 0.5, 1.0, 2.0)
LOOK = dict(max_seeds=MAX, seeds_per_look=2, alpha=ALPHA)


def design(**kw):
    """The harness's default design for these settings: the first look where a claim is possible."""
    kw = {**LOOK, **kw}
    kw.setdefault("min_seeds", first_claim_seeds(**kw))
    return SequentialDesign(**kw)


def steps(rng, center, experiments):
    """Quantised differences: center +- 1 step (one test example), each sign with chance 1/2."""
    return center + rng.choice(np.array([-1.0, 1.0]), (experiments, MAX))


def se(p, n=None):
    return math.sqrt(max(p * (1 - p), 1e-12) / (EXPERIMENTS if n is None else n))


def fixed_n_power(d, alpha=ALPHA):
    """Power of the two-sided paired t test (the 'better' side) at every n = 2..MAX, same data."""
    n = np.arange(2, MAX + 1)
    s1, s2 = np.cumsum(d, 1)[:, 1:], np.cumsum(d * d, 1)[:, 1:]
    m = s1 / n
    t = m * np.sqrt(n) / np.sqrt(np.maximum((s2 - n * m * m) / (n - 1), 1e-300))
    return n, t, (t > sps.t.isf(alpha / 2, n - 1)).mean(0)


def ratio_to_fixed(power, seeds, d):
    """E[seeds] / the smallest fixed n whose power reaches the sequential power (capped at the
    simulation's resolution, 1 - 1/EXPERIMENTS)."""
    n, _, fp = fixed_n_power(d)
    target = min(power, 1 - 1 / EXPERIMENTS)
    ok = np.flatnonzero(fp >= target)
    nfix = int(n[ok[0]]) if ok.size else None
    return fp[-1], nfix, (seeds.mean() / nfix if nfix else float("nan"))


def draws(rng, effect, kind="normal", experiments=None):
    experiments = EXPERIMENTS if experiments is None else experiments
    if kind == "normal":
        z = rng.standard_normal((experiments, MAX))
    elif kind == "t3":  # heavy tails, scaled to sd 1
        z = rng.standard_t(3, (experiments, MAX)) / math.sqrt(3.0)
    elif kind == "gamma4":  # skewness 1: centred gamma(4), scaled to sd 1
        z = (rng.gamma(4.0, 1.0, (experiments, MAX)) - 4.0) / 2.0
    elif kind == "exp":  # skewness 2: centred exponential
        z = rng.exponential(1.0, (experiments, MAX)) - 1.0
    elif kind.startswith("gamma_skew"):  # "gamma_skew-1.5": gamma with that skewness (negative: mirrored)
        g = float(kind[len("gamma_skew"):])
        k = 4.0 / g**2
        z = math.copysign(1.0, g) * (rng.gamma(k, 1.0, (experiments, MAX)) - k) / math.sqrt(k)
    elif kind == "lognormal":  # skewness 2 with a heavier tail than the gamma's: log-sd 0.5514
        s = 0.5514
        z = (rng.lognormal(0.0, s, (experiments, MAX)) - math.exp(s * s / 2)) / math.sqrt(
            (math.exp(s * s) - 1) * math.exp(s * s))
    elif kind.startswith("diverged"):  # "diverged:0.05:-5": a seed of the arm diverges now and then,
        # with chance p, and lands v sd low; centred, scaled to sd 1
        p, v = (float(x) for x in kind.split(":")[1:])
        bad = rng.random((experiments, MAX)) < p
        z = np.where(bad, v, rng.standard_normal((experiments, MAX))) - p * v
        z /= math.sqrt(1 - p + p * v * v - (p * v) ** 2)
    else:
        raise ValueError(kind)
    return z + effect


NORMAL_DRAWS = {}  # effect -> section 1's normal differences, reused by section 7


def superiority(rng):
    des = design(margin=None, equivalence=False)
    print(f"\n1. Better/worse than 0 (no margin), alpha {ALPHA}, looks at {des.looks[0]}, "
          f"{des.looks[1]}, ... {MAX} (Pocock-type spending), {EXPERIMENTS} experiments per row")
    print(f"{'effect':>7} {'better':>7} {'worse':>7} {'futile':>7} {'undec':>7} {'E[seeds]':>9}"
          f" {'fixed-50 power':>15} {'fixed n, same power':>20} {'ratio':>6} {'(vs n at power .99)':>20}")
    for eff in EFFECTS:
        d = draws(rng, eff, experiments=BOUNDARY_EXPERIMENTS if eff == 0 else EXPERIMENTS)
        NORMAL_DRAWS[eff] = d  # section 7 reads the chosen design on these: one run, one figure
        code, used = simulate(des, d)
        b, w = (code == BETTER).mean(), (code == WORSE).mean()
        line = (f"{eff:>6}σ {b:7.4f} {w:7.4f} {(code == FUTILE).mean():7.3f} "
                f"{(code == UNDECIDED).mean():7.3f} {used.mean():9.1f}")
        if eff == 0:
            fpr = b + w
            line += (f"   false-positive rate {fpr:.4f} ± {se(fpr, len(d)):.4f} (target <= {ALPHA}; "
                     f"{len(d)} experiments)")
        else:
            fp50, nfix, r = ratio_to_fixed(b, used, d)
            _, n99, r99 = ratio_to_fixed(min(b, 0.99), used, d)
            line += f" {fp50:15.3f} {str(nfix):>20} {r:6.2f} {f'{r99:.2f} (n {n99})':>20}"
        print(line)
    code, used = simulate(des, steps(rng, 0.0, BOUNDARY_EXPERIMENTS))
    fpr = np.isin(code, [BETTER, WORSE]).mean()
    print(f"  +-1 test example per seed (quantised; sd 0 where the signs agree), effect 0: false-positive rate "
          f"{fpr:.4f} ± {se(fpr, BOUNDARY_EXPERIMENTS):.4f} (target <= {ALPHA}; {BOUNDARY_EXPERIMENTS} experiments; "
          f"E[seeds] {used.mean():.1f})")


def margins(rng):
    for m in (0.5, 1.0):
        des = design(margin=m)
        print(f"\n2. Margin claims, margin {m}σ declared before the data (each claim one-sided at "
              f"alpha {ALPHA}; interval level {1 - 2 * des.one_sided_alpha:.2f}; "
              f"{BOUNDARY_EXPERIMENTS} experiments at +-margin)")
        print(f"{'true effect':>12} {'better':>7} {'worse':>7} {'equiv':>7} {'futile':>7} "
              f"{'undec':>7} {'E[seeds]':>9}   wrong claims at this truth")
        for eff in (m, -m, 0.0, 2 * m):
            nexp = BOUNDARY_EXPERIMENTS if abs(eff) == m else EXPERIMENTS
            code, used = simulate(des, draws(rng, eff, experiments=nexp))
            r = {k: (code == v).mean() for k, v in
                 dict(b=BETTER, w=WORSE, e=EQUIVALENT, f=FUTILE, u=UNDECIDED).items()}
            wrong = {m: "better, equivalent", -m: "worse, equivalent", 0.0: "better, worse",
                     2 * m: "worse, equivalent"}[eff]
            errs = {"better": r["b"], "worse": r["w"], "equivalent": r["e"]}
            shown = ", ".join(f"{k} {errs[k]:.4f} ± {se(errs[k], nexp):.4f}" for k in wrong.split(", "))
            print(f"{eff:>11}σ {r['b']:7.4f} {r['w']:7.4f} {r['e']:7.4f} {r['f']:7.3f} "
                  f"{r['u']:7.3f} {used.mean():9.1f}   {shown}")
        code, used = simulate(des, steps(rng, m, BOUNDARY_EXPERIMENTS))
        errs = {"better": (code == BETTER).mean(), "equivalent": (code == EQUIVALENT).mean()}
        print(f"  margin +-1 step per seed (quantised, truth at the margin): "
              + ", ".join(f"wrong {k} {v:.4f} ± {se(v, BOUNDARY_EXPERIMENTS):.4f}" for k, v in errs.items())
              + f" ({BOUNDARY_EXPERIMENTS} experiments; E[seeds] {used.mean():.1f})")


def spendings(rng):
    print("\n3. Spending functions (no margin; the same draws for every design): FPR, power, "
          "E[seeds]/fixed n of the same power")
    ds = {eff: draws(rng, eff) for eff in EFFECTS}
    first = design(margin=None, equivalence=False).min_seeds  # the same first look for every design
    for label, kw in (("Pocock-type (chosen)", dict(spending="pocock")),
                      ("Hwang-Shih-DeCani γ=-2", dict(spending="hsd", gamma=-2.0)),
                      ("O'Brien-Fleming-type", dict(spending="obrien-fleming")),
                      ("Pocock-type, a look every 5 seeds", dict(spending="pocock", seeds_per_look=5))):
        des = design(margin=None, equivalence=False, min_seeds=first, **kw)
        cells = []
        for eff in EFFECTS:
            code, used = simulate(des, ds[eff])
            if eff == 0:
                cells.append(f"FPR {np.isin(code, [BETTER, WORSE]).mean():.4f}")
            else:
                p = (code == BETTER).mean()
                cells.append(f"{eff}σ: power {p:.3f} ratio {ratio_to_fixed(p, used, ds[eff])[2]:.2f}")
        print(f"  {label:<34} " + " | ".join(cells))


def contrasts(rng):
    des = design(margin=None, equivalence=False)
    d = draws(rng, 0.0)
    n, t, _ = fixed_n_power(d)
    crit = sps.t.isf(ALPHA / 2, n - 1)
    rej = np.abs(t) > crit
    looks = np.isin(n, des.looks)
    print(f"\n4. Contrast under the null (effect 0), {EXPERIMENTS} experiments")
    print(f"  fixed-N t test (alpha {ALPHA}) peeked at each of the {looks.sum()} looks: "
          f"false-positive rate {rej[:, looks].any(1).mean():.4f}")
    every = n >= 3
    print(f"  fixed-N t test peeked after every seed from 3 to {MAX}: "
          f"false-positive rate {rej[:, every].any(1).mean():.4f}")
    print(f"  fixed-N t test once at n = {MAX}: false-positive rate {rej[:, -1].mean():.4f}")
    # anytime-valid: Robbins' two-sided normal-mixture boundary with a plug-in sd (the asymptotic
    # CS of Waudby-Smith et al. 2024, as in ville.AsymptoticCS), tuned to be narrowest at n = 25
    def width(rho, v=25.0):
        return math.sqrt((v + rho) * math.log((v + rho) / (rho * ALPHA**2)))
    rho = minimize_scalar(lambda r: width(math.exp(r)), bounds=(-10, 10), method="bounded").x
    rho = math.exp(rho)
    radius_sd = np.sqrt((n + rho) * np.log((n + rho) / (rho * ALPHA**2))) / n  # times sd
    s1, s2 = np.cumsum(d, 1)[:, 1:], np.cumsum(d * d, 1)[:, 1:]
    m = s1 / n
    sd = np.sqrt(np.maximum((s2 - n * m * m) / (n - 1), 0))
    use = n >= des.min_seeds
    cs_null = (np.abs(m) > radius_sd * sd)[:, use].any(1).mean()
    out = [f"false-positive rate {cs_null:.4f}"]
    for eff in (1.0, 2.0):
        de = NORMAL_DRAWS[eff] if eff in NORMAL_DRAWS else draws(rng, eff)  # "this design": section 1's figure
        s1, s2 = np.cumsum(de, 1)[:, 1:], np.cumsum(de * de, 1)[:, 1:]
        m = s1 / n
        sd = np.sqrt(np.maximum((s2 - n * m * m) / (n - 1), 0))
        hit = ((m - radius_sd * sd) > 0) & use
        stop = np.where(hit.any(1), n[np.argmax(hit, 1)], MAX)
        code, used = simulate(des, de)
        out.append(f"{eff}σ: E[seeds] {stop.mean():.1f} (this design {used.mean():.1f})")
    print(f"  anytime-valid CS (normal mixture, plug-in sd, from n = {des.min_seeds}, every seed): "
          + "; ".join(out))
    # anytime-valid and exact: the t test's Bayes factor with a N(0, g) prior on the effect size
    # and the right-Haar prior on sigma is an e-process under the null whatever sigma (Lai 1976;
    # Perez-Ortiz et al. 2024); reject when it reaches 1/alpha (Ville's inequality), every seed
    g = 1.0
    out = []
    for eff in (0.0, 0.5, 1.0, 2.0):
        de = NORMAL_DRAWS[eff] if eff in NORMAL_DRAWS and eff else draws(rng, eff)
        hit, m = _eprocess_hits(de, des.min_seeds, g)
        stop = np.where(hit.any(1), n[np.argmax(hit, 1)], MAX)
        if eff == 0:
            out.append(f"false-positive rate {hit.any(1).mean():.4f}")
        else:
            code, used = simulate(des, de)
            pw = (hit.any(1) & (m[np.arange(len(m)), np.argmax(hit, 1)] > 0)).mean()
            out.append(f"{eff}σ: power {pw:.3f} (this design {(code == BETTER).mean():.3f}), "
                       f"E[seeds] {stop.mean():.1f} (this design {used.mean():.1f})")
    print(f"  anytime-valid t e-process (Bayes factor, effect-size prior N(0, {g:g}), every seed): "
          + "; ".join(out))


def _eprocess_hits(d, first, g=1.0):
    """The anytime-valid t e-process of section 4 (Bayes factor, N(0, g) prior on the effect size,
    right-Haar prior on sigma) on each row, every seed from ``first``: (crossed 1/alpha at n, mean)."""
    n = np.arange(2, MAX + 1)
    s1, s2 = np.cumsum(d, 1)[:, 1:], np.cumsum(d * d, 1)[:, 1:]
    m = s1 / n
    t2 = m * m * n / np.maximum((s2 - n * m * m) / (n - 1), 1e-300)
    nu = n - 1
    log_bf = (-0.5 * np.log1p(n * g) + (nu + 1) / 2 * (np.log1p(t2 / nu) - np.log1p(t2 / (nu * (1 + n * g)))))
    return (log_bf >= math.log(1 / ALPHA)) & (n >= first), m


def robustness(rng):
    print("\n5. Non-normal differences under the null (the boundaries hold for normal and gamma-shaped "
          "differences up to skewness 2): false-positive rate (better + worse)")
    first = design(margin=None, equivalence=False).min_seeds
    designs = (("Pocock-type (chosen)", {}), ("O'Brien-Fleming-type", dict(spending="obrien-fleming")))
    for kind, label in (("t3", "heavy tails (t, 3 df)"), ("gamma4", "skewness 1 (centred gamma 4)"),
                        ("exp", "skewness 2 (centred exponential)")):
        d = draws(rng, 0.0, kind, BOUNDARY_EXPERIMENTS)
        cells = []
        for name, kw in designs:
            des = design(margin=None, equivalence=False, min_seeds=first, **kw)
            fpr = np.isin(simulate(des, d)[0], [BETTER, WORSE]).mean()
            cells.append(f"{name} {fpr:.4f} ± {se(fpr, len(d)):.4f}")
        _, t, _ = fixed_n_power(d)
        once = (np.abs(t[:, -1]) > sps.t.isf(ALPHA / 2, MAX - 1)).mean()
        print(f"  {label:<34} " + " | ".join(cells) + f" | fixed-N t at {MAX} {once:.4f}")


def arms(rng):
    k = 3
    des = design(margin=None, equivalence=False, arms=k)
    print(f"\n6. {k} arms against one baseline (shared baseline: differences correlated 0.5), "
          f"alpha split by Bonferroni ({des.one_sided_alpha:.4f} per side and arm), min_seeds "
          f"{des.min_seeds}")
    for effects in ((0.0, 0.0, 0.0), (-1.0, 0.0, 0.0), (-2.0, 0.5, 0.0)):
        base = rng.standard_normal((EXPERIMENTS, MAX))
        codes, used = [], []
        for eff in effects:
            d = (rng.standard_normal((EXPERIMENTS, MAX)) - base) / math.sqrt(2) + eff
            c, u = simulate(des, d)
            codes.append(c)
            used.append(u)
        codes, used = np.array(codes), np.array(used)
        eff = np.array(effects)[:, None]
        wrong = ((codes == BETTER) & (eff <= 0)) | ((codes == WORSE) & (eff >= 0))
        fw = wrong.any(0).mean()
        per = ", ".join(f"arm {e:+g}σ: {(c == WORSE).mean():.3f} worse, {(c == BETTER).mean():.3f} "
                        f"better, E[seeds] {u.mean():.1f}" for e, c, u in zip(effects, codes, used))
        print(f"  effects {effects}: family-wise wrong claims {fw:.4f} ± {se(fw):.4f}; {per}")
    # quantised: each arm's difference to the shared baseline moves by whole test examples
    base = rng.integers(0, 2, (BOUNDARY_EXPERIMENTS, MAX))
    wrong = np.zeros(BOUNDARY_EXPERIMENTS, dtype=bool)
    for _ in range(k):
        code, _ = simulate(des, (rng.integers(0, 2, (BOUNDARY_EXPERIMENTS, MAX)) - base).astype(float))
        wrong |= np.isin(code, [BETTER, WORSE])
    fw = wrong.mean()
    print(f"  effects 0, quantised (each arm and the baseline right or wrong on one example per seed, "
          f"differences -1/0/+1): family-wise wrong claims {fw:.4f} ± {se(fw, BOUNDARY_EXPERIMENTS):.4f} "
          f"({BOUNDARY_EXPERIMENTS} experiments)")


def _rate(code, claims):
    r = float(np.isin(code, claims).mean())
    return r, se(r, len(code))


def _verdict(rate, n, label=None):
    """PASS when rate <= alpha + 2 SE (the false-positive goal); ``label``: a cell of the chosen design,
    whose FAIL makes the exit status 1 (the design before is shown failing, and that is expected)."""
    ok = rate <= ALPHA + 2 * se(ALPHA, n)
    if not ok and label:
        FAILED.append(label)
    return "PASS" if ok else "FAIL"


def _hall_normal_only(**kw):
    """The chosen statistic with boundaries calibrated on normal differences alone: the skewness
    correction without the calibration over shapes (an alternative weighed in docs/sequential.md)."""
    des = design(**kw)
    looks = des.looks
    cum = spend(des.spending, des.gamma, des.one_sided_alpha, np.array(looks) / des.max_seeds)
    cum[-1] = des.one_sided_alpha
    inc = tuple(np.diff(np.concatenate([[0.0], cum])).tolist())
    crit = _robust_bounds(looks, inc, 0.0, not des.margin, tuple(b[3] for b in des.boundaries))
    object.__setattr__(des, "_bounds", tuple((n, z, a, c) for (n, z, a, _), c in zip(des.boundaries, crit)))
    return des


def skew(rng):
    """The chosen design against the design before it, on skewed differences."""
    nexp = BOUNDARY_EXPERIMENTS
    chosen = dict(margin=None, equivalence=False)
    designs = (("chosen (skewness=2)", design(**chosen)),
               ("before (skewness=0)", design(**chosen, skewness=0.0)),
               ("Hall, normal boundaries", _hall_normal_only(**chosen)))
    print(f"\n7. Skewed differences: no margin, alpha {ALPHA}, looks at {designs[0][1].looks[0]}, "
          f"{designs[0][1].looks[1]}, ... {MAX}; {nexp} experiments per cell; PASS: rate <= alpha + 2 SE")
    print("  false-positive rate under the null (better + worse; the worse share in brackets):")
    for kind, label in (("normal", "skewness 0 (normal)"), ("gamma_skew1", "skewness 1 (gamma 4)"),
                        ("gamma_skew2", "skewness 2 (exponential)"), ("gamma_skew-2", "skewness -2 (mirrored)")):
        d = draws(rng, 0.0, kind, nexp)
        cells = []
        for name, des in designs:
            code, _ = simulate(des, d)
            r, e = _rate(code, [BETTER, WORSE])
            w = float((code == WORSE).mean())
            verdict = (_verdict(r, nexp, name == designs[0][0] and f"{label}: {r:.4f}")
                       if name != designs[2][0] else "info")
            cells.append(f"{name} {r:.4f} ± {e:.4f} ({w:.4f}) {verdict}")
        print(f"    {label:<26} " + " | ".join(cells))
    print(f"  normal differences, {EXPERIMENTS} experiments per row: power ('better') and expected seeds")
    for eff in (0.5, 1.0, 2.0):
        d = NORMAL_DRAWS[eff] if eff in NORMAL_DRAWS else draws(rng, eff)  # section 1's, when it ran
        cells = []
        for name, des in designs[:2]:
            code, used = simulate(des, d)
            cells.append(f"{name}: power {(code == BETTER).mean():.3f}, E[seeds] {used.mean():.1f}")
        print(f"    {eff}σ  " + " | ".join(cells))
    m = 0.5
    print(f"  margin {m}σ declared (each claim one-sided at alpha {ALPHA}), truth at +margin: wrong 'better' / "
          f"wrong 'equivalent' ({nexp} experiments per row)")
    mdesigns = ((designs[0][0], design(margin=m)), (designs[1][0], design(margin=m, skewness=0.0)),
                (designs[2][0], _hall_normal_only(margin=m)))
    for g in (0.0, 1.0, -1.0, 2.0, -2.0):
        d = m + draws(rng, 0.0, "normal" if g == 0 else f"gamma_skew{g:g}", nexp)
        cells = []
        for name, des in mdesigns:
            code, _ = simulate(des, d)
            b, e = float((code == BETTER).mean()), float((code == EQUIVALENT).mean())
            worst = max(b, e)
            verdict = (_verdict(worst, nexp, name == mdesigns[0][0] and f"margin, skewness {g:+g}: {worst:.4f}")
                       if name != mdesigns[2][0] else "info")
            cells.append(f"{name} {b:.4f} / {e:.4f} {verdict}")
        print(f"    skewness {g:+g}".ljust(18) + " | ".join(cells))
    for eff, what in ((0.0, "equivalent"), (1.0, "better")):
        d = draws(rng, eff)
        cells = []
        for name, des in mdesigns[:2]:
            code, used = simulate(des, d)
            hit = (code == (EQUIVALENT if what == "equivalent" else BETTER)).mean()
            cells.append(f"{name}: {what} {hit:.3f}, E[seeds] {used.mean():.1f}")
        print(f"    normal, truth {eff}σ  " + " | ".join(cells))
    first = designs[0][1].min_seeds
    cells = []
    for kind, label in (("normal", "0"), ("gamma_skew1", "1"), ("gamma_skew2", "2")):
        r = float(_eprocess_hits(draws(rng, 0.0, kind, nexp), first)[0].any(1).mean())
        cells.append(f"skewness {label} {r:.4f} ± {se(r, nexp):.4f}")
    print(f"  the anytime-valid t e-process of section 4 (normal differences assumed too), false-positive rate: "
          + " | ".join(cells))
    print("  outside the calibrated family (no margin; information, not a requirement):")
    for kind, label in (("gamma_skew3", "gamma, skewness 3"), ("lognormal", "lognormal, skewness 2"),
                        ("diverged:0.05:-5", "1 seed in 20 lands 5 sd low (skewness -1.5)"),
                        ("diverged:0.02:-8", "1 seed in 50 lands 8 sd low (skewness -2.7)")):
        d = draws(rng, 0.0, kind, nexp)
        cells = []
        for name, des in designs[:2]:
            r, e = _rate(simulate(des, d)[0], [BETTER, WORSE])
            cells.append(f"{name} {r:.4f} ± {e:.4f}")
        print(f"    {label:<46} " + " | ".join(cells))


FAILED = []
SECTIONS = {"1": superiority, "2": margins, "3": spendings, "4": contrasts, "5": robustness, "6": arms, "7": skew}


def main(argv=None):
    global EXPERIMENTS, BOUNDARY_EXPERIMENTS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiments", type=int, default=EXPERIMENTS, help="per cell (default 20000)")
    p.add_argument("--boundary-experiments", type=int, default=BOUNDARY_EXPERIMENTS,
                   help="per cell that checks an error rate against alpha (default 50000)")
    p.add_argument("--sections", default=",".join(SECTIONS), help="which sections, e.g. 1,7 (default all)")
    args = p.parse_args(argv)
    EXPERIMENTS, BOUNDARY_EXPERIMENTS = args.experiments, args.boundary_experiments
    t0 = time.time()
    print(f"bench_sequential: {EXPERIMENTS} experiments per cell, {BOUNDARY_EXPERIMENTS} where a cell checks an "
          f"error rate against alpha")
    rng = np.random.default_rng(2026)
    for key in args.sections.split(","):
        SECTIONS[key.strip()](rng)
    print(f"\n{'every PASS/FAIL cell passes' if not FAILED else 'FAILED cells: ' + ', '.join(FAILED)} "
          f"({time.time() - t0:.0f} s)")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
