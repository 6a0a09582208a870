"""Measure, don't assert: the error rates of the verdict's claims, by vectorised simulation.

One run prints, each cell with its simulated rate, its standard error and PASS/FAIL:

  1. the false-positive rate under the null (true difference 0), at n = 3, 5, 10, 30;
  2. every margin-based claim at its boundary (true difference = the margin), for arm correlation
     rho in {0, 0.5, 0.9}, auto (estimated) and declared margins, and three arms (family-wise);
  3. the studentized bootstrap interval's coverage at n = 5 to 30 (normal, exponential, t 3 df and
     lognormal differences): >= 93% where the analysis shows it, information elsewhere;
  4. power of the paired t test against the noncentral t prediction, and seeds needed on a dense
     grid against an independent integral;
  5. the coverage of the test-set-aware interval for the data distribution;
  6. the exact sign-flip test in every claim: false positives of +-1-test-example
     differences under the null at n = 6 to 12, with the test and with only its floor (the rule
     before), and what the test costs in power on normal differences.
  7. across conditions: the average-effect claim's false-positive rate at 2-10 conditions
     and tau from 0 to 2 sigma (REML + Hartung-Knapp beside it), the prediction interval's coverage,
     the common-effect (heterogeneity) test's size when the effect is constant, the dose-trend test's
     size under a flat dose and the departure-from-a-line test's size under a line.
  8. a diverged run counts (scripts/bench_diverged.py): the worst rule's false-positive
     rate when both arms diverge alike, and how often each rule calls the arm that diverges more
     (and is better on its survivors) better or worse.
  9. (only with --sections 9) the statistics' own cost (scripts/bench_stats_cost.py): one
     stats.compare on 10 seeds, first call and median of 10 new effect sizes, against 30 ms.

A rate cell passes when rate <= alpha + 3 SE (coverage >= 93% - 3 SE; power within 3 SE of the
prediction). The verdict's own functions (harness.stats.decision_pvalues, decide, ...) run on all
simulated experiments at once. Exit status 1 if any cell fails.

    python scripts/bench_stats.py [--experiments 20000] [--seed 0] [--sections 1,2,3,4,5,6,7,8]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402
from scipy import integrate  # noqa: E402
from scipy import stats as sps  # noqa: E402

from harness import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_diverged  # noqa: E402 - section 8, in a file of its own
import bench_stats_cost  # noqa: E402 - section 9, in a file of its own
from harness.stats.power.exact_share import _EXACT_BELOW  # noqa: E402
from harness.stats.power.seeds_needed import _exact_share  # noqa: E402

ALPHA = 0.05
FAILED = []


def se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / n)


def row(label: str, rate: float, n: int, *, limit: float, kind: str = "max", extra: str = "") -> str:
    """One table row; kind 'max': rate <= limit + 3 SE, 'min': >= limit - 3 SE, 'near': within 3 SE."""
    s = se(limit if kind != "near" else rate, n)
    if kind == "max":
        ok = rate <= limit + 3 * s
        bound = f"<= {limit:.3f}"
    elif kind == "min":
        ok = rate >= limit - 3 * s
        bound = f">= {limit:.3f}"
    else:
        ok = abs(rate - limit) <= 3 * s
        bound = f"~ {limit:.3f}"
    if not ok:
        FAILED.append(label)
    return f"| {label} | {rate:.4f} | {se(rate, n):.4f} | {bound} | {n} | {'PASS' if ok else 'FAIL'} |{extra}"


def header(*extra: str) -> list[str]:
    cols = ["cell", "rate", "SE", "required", "experiments", "result", *extra]
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def paired_arms(rng, experiments, n, rho, shift, arms=2):
    """Arms with seed std 1 that correlate rho across seeds; every arm after the first is shifted."""
    level = rng.normal(0, math.sqrt(rho), (experiments, n))
    out = [level + rng.normal(0, math.sqrt(1 - rho), (experiments, n))]
    for _ in range(arms - 1):
        out.append(level + shift + rng.normal(0, math.sqrt(1 - rho), (experiments, n)))
    return out


def codes_for(a, b, *, margin=None, k=1, groups=None):
    """Verdict codes as compare_to_baseline would give them, for every row at once."""
    d = b - a
    if margin is None:  # auto: the pooled seed std of the arms, with its chi-square bounds
        groups = groups or [a, b]
        pooled = np.sqrt(np.mean([g.var(axis=1, ddof=1) for g in groups], axis=0))
        f_low, f_high = stats.margin_bound_factors(a.shape[1] - 1, ALPHA / 2)
        p = stats.decision_pvalues(d, margin_beyond=pooled * f_high, margin_equivalent=pooled * f_low,
                                   margin_share=0.5, n_comparisons=k, alpha=ALPHA)
    else:
        p = stats.decision_pvalues(d, margin_beyond=margin, margin_equivalent=margin, n_comparisons=k, alpha=ALPHA)
    return stats.decide(p["zero"], p["beyond"], p["equivalent"], d.mean(axis=1), ALPHA)


def null_rates(rng, experiments):
    lines = ["### 1. False positives under the null (true difference 0, declared margin 0.5 sd)", "",
             *header("'better' or 'worse'")]
    for n in (3, 5, 10, 30):
        a, b = paired_arms(rng, experiments, n, 0.5, 0.0)
        codes = codes_for(a, b, margin=0.5)
        differs = np.isin(codes, stats.DIFFERS).mean()
        beyond = np.isin(codes, ["better", "worse"]).mean()
        lines.append(row(f"n = {n}: any difference claimed", differs, experiments, limit=ALPHA,
                         extra=f" {beyond:.4f} |"))
    return lines


def margin_rates(rng, experiments, n=10):
    lines = [f"### 2. Margin claims at the boundary (true difference = the margin, n = {n} seeds)", "",
             "auto: the margin is the arms' seed std (1), estimated by the verdict from the same runs; "
             "declared: 0.5, given before the data. 'beyond' counts 'better' (the truth is not beyond "
             "it); 'within' counts 'equivalent' and 'smaller_than_margin' (the truth is not inside it).", "",
             *header()]
    for rho in (0.0, 0.5, 0.9):
        for auto in (True, False):
            margin = 1.0 if auto else 0.5
            a, b = paired_arms(rng, experiments, n, rho, margin)
            codes = codes_for(a, b, margin=None if auto else margin)
            name = "auto" if auto else "declared"
            lines.append(row(f"rho {rho}, {name}: wrong 'beyond'", float(np.mean(codes == "better")),
                             experiments, limit=ALPHA))
            wrong_within = float(np.mean(np.isin(codes, ["equivalent", "smaller_than_margin"])))
            lines.append(row(f"rho {rho}, {name}: wrong 'within'", wrong_within, experiments, limit=ALPHA))
    # three arms, all at the boundary: the family-wise rate of any wrong claim
    for auto in (True, False):
        margin = 1.0 if auto else 0.5
        base, *arms = paired_arms(rng, experiments, n, 0.5, margin, arms=4)
        groups = [base, *arms]
        codes = [codes_for(base, arm, margin=None if auto else margin, k=3, groups=groups) for arm in arms]
        any_beyond = np.any([c == "better" for c in codes], axis=0).mean()
        any_within = np.any([np.isin(c, ["equivalent", "smaller_than_margin"]) for c in codes], axis=0).mean()
        name = "auto" if auto else "declared"
        lines.append(row(f"3 arms, rho 0.5, {name}: any wrong 'beyond'", float(any_beyond), experiments, limit=ALPHA))
        lines.append(row(f"3 arms, rho 0.5, {name}: any wrong 'within'", float(any_within), experiments, limit=ALPHA))
    return lines


def bootstrap_coverage(rng, experiments, seed, resamples=999):
    """Where the analysis shows the interval (from stats.BOOTSTRAP_MIN_PAIRS pairs): coverage >= 93% on
    normal, skewed (exponential) and heavy-tailed (t, 3 df) differences. Below that size, and for
    differences as skewed as a lognormal, the rows are information: why it is not shown there, and that
    the t interval does no better on such differences. The normal cells at 5, 10 and 30 pairs draw from
    the shared generator as they always did (the later sections' draws stay the same); the other shapes
    and sizes from a generator of their own."""
    own = np.random.default_rng([seed, 3])
    shapes = {"normal": (lambda g, size: g.normal(0.3, 1.0, size), 0.3),
              "exponential": (lambda g, size: g.exponential(1.0, size), 1.0),
              "t 3 df": (lambda g, size: g.standard_t(3, size), 0.0),
              "lognormal sigma 1": (lambda g, size: g.lognormal(0.0, 1.0, size), math.exp(0.5))}
    lines = [f"### 3. Studentized bootstrap 95% interval: coverage ({resamples} resamples), shown from "
             f"{stats.BOOTSTRAP_MIN_PAIRS} pairs", "", *header("median width / t width", "t interval's coverage")]
    cells = [(n, "normal", rng) for n in (5, 10, 30)]
    cells += [(n, name, own) for n in (6, 10, 20, 30) for name in shapes if (n, name) not in {(10, "normal"), (30, "normal")}]
    for n, name, g in sorted(cells, key=lambda c: (c[0], list(shapes).index(c[1]))):
        draw, mean = shapes[name]
        d = draw(g, (experiments, n))
        low, high = stats.studentized_bootstrap(d, confidence_level=0.95, n_resamples=resamples, rng=g)
        covered = float(np.mean((low <= mean) & (mean <= high)))
        half = sps.t.ppf(0.975, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
        t_covered = float(np.mean(np.abs(d.mean(axis=1) - mean) <= half))
        extra = f" {float(np.median((high - low) / (2 * half))):.2f} | {t_covered:.3f} |"
        label = f"n = {n}, {name}"
        if n >= stats.BOOTSTRAP_MIN_PAIRS and not name.startswith("lognormal"):
            lines.append(row(label, covered, experiments, limit=0.93, kind="min", extra=extra))
        else:  # not a claim the analysis makes: measured to say why
            lines.append(f"| {label} (information) | {covered:.4f} | {se(covered, experiments):.4f} | - | "
                         f"{experiments} | - |{extra}")
    return lines


def _reference_power(n, es, alpha):
    df = n - 1
    delta = es * math.sqrt(n)
    c = float(sps.t.ppf(1 - alpha / 2, df))
    log_norm = -(df / 2) * math.log(2) - math.lgamma(df / 2)

    def phi(x):
        return 0.5 * math.erfc(-x / math.sqrt(2))

    def f(v):
        if v <= 0:
            return 0.0
        s = math.sqrt(v / df)
        return (phi(delta - c * s) + phi(-c * s - delta)) * math.exp(log_norm + (df / 2 - 1) * math.log(v) - v / 2)

    return integrate.quad(f, max(0.0, df - 12 * math.sqrt(2 * df)), df + 12 * math.sqrt(2 * df) + 20, limit=400, epsabs=1e-12)[0]


def power_rows(rng, experiments):
    lines = ["### 4. Power of the paired t test against the noncentral t (declared margin 0.25 sd)", "",
             *header("predicted", "verdict: difference claimed")]
    for n, es in ((5, 1.5), (10, 0.5), (10, 1.0), (20, 0.5), (30, 0.3)):
        d = rng.normal(es, 1.0, (experiments, n))
        _, p = stats.one_sample_t(d)
        simulated = float(np.mean(p < ALPHA))
        predicted = float(stats.paired_t_power(n, es, 1.0, ALPHA))
        a = np.zeros_like(d)
        claimed = float(np.isin(codes_for(a, d, margin=0.25), stats.DIFFERS).mean())
        lines.append(row(f"n = {n}, effect/sd = {es}", simulated, experiments, limit=predicted, kind="near",
                         extra=f" {predicted:.4f} | {claimed:.4f} |"))
    grid = [(es, alpha, power) for es in np.linspace(0.1, 6.0, 60) for alpha in (0.05, 0.01) for power in (0.8, 0.9, 0.95)]
    wrong = 0
    for es, alpha, power in grid:
        n = stats.seeds_needed(es, 1.0, alpha=alpha, power=power)
        ok = n is not None and _reference_power(n, es, alpha) >= power - 1e-6
        # minimal: one fewer falls short for the t test, or (below _EXACT_BELOW seeds) once the exact
        # sign-flip test every claim must also pass is counted in
        ok = ok and (n == stats.fewest_seeds(alpha) or _reference_power(n - 1, es, alpha) < power + 1e-6
                     or (n - 1 < _EXACT_BELOW
                         and _reference_power(n - 1, es, alpha)
                         * _exact_share(n - 1, math.floor(es * 20) / 20, alpha / 2) < power))
        wrong += not ok
    if wrong:
        FAILED.append("seeds needed grid")
    lines += ["", f"seeds needed on a grid of {len(grid)} points (effect/sd 0.1..6, alpha 0.05/0.01, power "
                  f"0.8/0.9/0.95) against an integral over the chi-square: {wrong} wrong "
                  f"({'PASS' if not wrong else 'FAIL'})"]
    return lines


def test_set_coverage(rng, experiments=1000, seeds=5, examples=400):
    from scipy.special import ndtr

    pop = np.random.default_rng(12345)
    u, tau = pop.normal(0, 1, 400_000), pop.normal(0, 1.5, 400_000)
    truth = 100 * np.mean(ndtr(4 * (0.5 + u) + tau) - ndtr(4 * (0.5 + u)))
    distribution = seed_only = 0
    for _ in range(experiments):
        j = rng.integers(0, len(u), examples)
        shift = rng.normal(0, 0.15, (seeds, 1))
        a = rng.random((seeds, examples)) < ndtr(4 * (0.5 + u[j]) + shift)
        b = rng.random((seeds, examples)) < ndtr(4 * (0.5 + u[j]) + tau[j] + shift)
        ts = stats.test_set_noise(a, b)
        low, high = ts.confidence_interval()
        distribution += low <= truth <= high
        low, high = stats.paired_t(100 * a.mean(axis=1), 100 * b.mean(axis=1)).confidence_interval()
        seed_only += low <= truth <= high
    return [f"### 5. Interval for the data distribution (seeds x test examples; {seeds} seeds, {examples} "
            f"examples drawn per experiment)", "", *header(),
            row("seeds x examples interval (95%)", distribution / experiments, experiments, limit=0.93, kind="min"),
            f"| seed-only t interval, for comparison (not a requirement) | {seed_only / experiments:.4f} | "
            f"{se(seed_only / experiments, experiments):.4f} | — | {experiments} | info |"]


def _floor_only_codes(d, margin):
    """The verdict's codes as they were before every claim also passed the exact test: t-based p
    raised only to the sign-flip floor."""
    n = d.shape[-1]
    moved = np.sum(d != 0, axis=-1)
    p = {"zero": np.maximum(stats.minimum_effect_test(d, 0.0).pvalue, stats.sign_flip_floor(moved)),
         "beyond": np.maximum(stats.minimum_effect_test(d, margin).pvalue, stats.sign_flip_floor(n)),
         "equivalent": np.maximum(stats.tost(d, margin).pvalue, stats.sign_flip_floor(n, False))}
    return stats.decide(np.minimum(p["zero"], 1), np.minimum(p["beyond"], 1), np.minimum(p["equivalent"], 1),
                        d.mean(axis=1), ALPHA)


def exact_rows(rng, experiments):
    step = 100 / 450  # one test example of a 450-example test set
    lines = ["### 6. The exact sign-flip test in every claim", "",
             f"Differences of exactly +-1 test example (100/450 points) per seed, each sign with chance 1/2 "
             f"(the null), declared margin 2 examples: the rate of any difference claimed. 'floor only' is "
             f"the rule before (t-based p raised to the smallest p the exact test can reach).", "",
             *header("floor only (before)")]
    for n in (6, 7, 8, 10, 12):
        d = rng.choice([-step, step], (experiments, n))
        now = float(np.isin(codes_for(np.zeros_like(d), d, margin=2 * step), stats.DIFFERS).mean())
        before = float(np.isin(_floor_only_codes(d, 2 * step), stats.DIFFERS).mean())
        lines.append(row(f"n = {n}: any difference claimed", now, experiments, limit=ALPHA, extra=f" {before:.4f} |"))
    lines += ["", "What the exact test costs in power: normal differences with the effect at which the t test "
                  "has power 0.8 (two-sided, alpha 0.05), declared margin 0.25 sd; 'difference claimed' with "
                  "the exact test (now) and with the floor only (before).", "",
              "| n | effect/sd | t test alone | difference claimed, now | floor only (before) | cost |",
              "|---|---|---|---|---|---|"]
    for n in (6, 7, 8, 10, 12, 15, 20, 30):
        es = float(_effect_for_power(n, 0.8))
        d = rng.normal(es, 1.0, (experiments, n))
        _, p = stats.one_sample_t(d)
        t_alone = float(np.mean(p < ALPHA))
        now = float(np.isin(codes_for(np.zeros_like(d), d, margin=0.25), stats.DIFFERS).mean())
        before = float(np.isin(_floor_only_codes(d, 0.25), stats.DIFFERS).mean())
        lines.append(f"| {n} | {es:.3f} | {t_alone:.4f} | {now:.4f} | {before:.4f} | {before - now:+.4f} |")
    return lines


def _effect_for_power(n, power, alpha=ALPHA):
    from scipy.optimize import brentq
    return brentq(lambda es: float(stats.paired_t_power(n, es, 1.0, alpha)) - power, 0.01, 10.0)




def _conditions(rng, experiments, k, n, tau, mu=0.0):
    """Per-seed paired differences (experiments, k, n): condition effects N(mu, tau^2), each condition's
    seed sd drawn from 0.5..2 (sigma = 1 on average: conditions differ in noise, as datasets do)."""
    theta = mu + rng.normal(0, tau, (experiments, k, 1)) if tau else np.full((experiments, k, 1), mu)
    return theta + rng.normal(0, 1, (experiments, k, n)) * rng.uniform(0.5, 2.0, (experiments, k, 1)), theta[:, :, 0]


def conditions_rows(rng, experiments):
    from harness.stats.meta import claims as meta_claims, random_effects as meta, trend

    lines = ["### 7. Across conditions: K conditions of n seeds, per-condition seed sd 0.5..2", "",
             "The claims: the average effect is a t over the K per-condition effects; a common effect is tested by "
             "Alexander-Govern on the paired differences. REML + Hartung-Knapp and Cochran's Q (which take each "
             "condition's estimated variance as known) are shown beside them, not required.", "",
             *header("REML+HK rate (info)", "prediction interval covers a new condition's true effect (>= 0.93)")]
    for n in (3, 5):
        for k in (2, 3, 5, 10):
            for tau in ((0.0, 0.5, 1.0, 2.0) if n == 5 else (0.0, 2.0)):
                d, _ = _conditions(rng, experiments, k, n, tau)
                y, v = d.mean(axis=2), d.var(axis=2, ddof=1) / n
                claim = meta_claims.average_rows(y)
                rate = float(np.mean(claim["pvalue"] < ALPHA))
                hk = meta.pooled_rows(y, v)
                hk_rate = float(np.mean(hk["pvalue"] < ALPHA))
                new = rng.normal(0, tau, experiments) if tau else np.zeros(experiments)
                low, high = claim["prediction"]
                covered = float(np.mean((low <= new) & (new <= high)))
                cover = f"{covered:.4f} {'PASS' if covered >= 0.93 - 3 * se(0.93, experiments) else 'FAIL'}"
                if covered < 0.93 - 3 * se(0.93, experiments):
                    FAILED.append(f"prediction interval, n = {n}, K = {k}, tau = {tau:g}")
                lines.append(row(f"average claim, n = {n}, K = {k}, tau = {tau:g} sigma", rate, experiments,
                                 limit=ALPHA, extra=f" {hk_rate:.4f} | {cover} |"))
    lines += ["", "Coverage of the average claim's 95% interval for the mean effect mu = 0.5 (n = 5 seeds):", "", *header()]
    for k in (2, 3, 5, 10):
        for tau in (0.0, 1.0, 2.0):
            d, _ = _conditions(rng, experiments, k, 5, tau, mu=0.5)
            claim = meta_claims.average_rows(d.mean(axis=2))
            covered = float(np.mean((claim["low"] <= 0.5) & (0.5 <= claim["high"])))
            lines.append(row(f"interval coverage, K = {k}, tau = {tau:g} sigma", covered, experiments, limit=0.93, kind="min"))
    lines += ["", "Common-effect test when every condition has the same effect (tau = 0):", "",
              *header("Cochran's Q rate (info)")]
    for n in (3, 5, 10):
        for k in (2, 3, 5, 10):
            d, _ = _conditions(rng, experiments, k, n, 0.0, mu=0.5)
            p = meta_claims.common_effect_pvalue(d)
            q = meta.pooled_rows(d.mean(axis=2), d.var(axis=2, ddof=1) / n)["q_pvalue"]
            rate = float(np.mean(p < ALPHA))
            label = f"common effect, n = {n}, K = {k}"
            if not meta_claims.common_effect_decided(n, k):  # measured, not claimed (meta_claims.COMMON_EFFECT_SEEDS)
                lines.append(f"| {label} (info: not decided at this size) | {rate:.4f} | {se(rate, experiments):.4f} | — | "
                             f"{experiments} | info | {float(np.mean(q < ALPHA)):.4f} |")
            else:
                lines.append(row(label, rate, experiments, limit=ALPHA, extra=f" {float(np.mean(q < ALPHA)):.4f} |"))
    lines += ["", "Dose trends: seed level sd 1, run noise sd 0.5; flat dose (trend test) and a line (departure test):", "",
              *header("departure from a line under a line")]
    for doses in ((0.0, 0.1, 0.2), (0.0, 1.0, 2.0, 3.0, 4.0), (1.0, 10.0, 100.0, 1000.0)):
        for n in (3, 5, 10):
            x = np.array(doses)
            level = rng.normal(0, 1, (experiments, n, 1))
            flat = level + rng.normal(0, 0.5, (experiments, n, len(x)))
            _, p = stats.one_sample_t(trend.per_seed_slopes(flat, x))
            line = level + 0.3 * x / np.ptp(x) + rng.normal(0, 0.5, (experiments, n, len(x)))
            _, _, _, p_lin = trend.linearity_rows(line, x)
            lin = f"{np.mean(p_lin < ALPHA):.4f}" if np.isfinite(p_lin).all() else "— (n <= doses - 2)"
            if np.isfinite(p_lin).all() and np.mean(p_lin < ALPHA) > ALPHA + 3 * se(ALPHA, experiments):
                FAILED.append(f"departure from a line, doses {doses}, n = {n}")
            lines.append(row(f"trend, doses {doses}, n = {n}", float(np.mean(p < ALPHA)), experiments, limit=ALPHA,
                             extra=f" {lin} |"))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiments", type=int, default=20_000, help="simulated experiments per cell (default 20000)")
    p.add_argument("--bootstrap-experiments", type=int, default=5_000,
                   help="per bootstrap cell: each needs 999 resamples, so fewer (default 5000)")
    p.add_argument("--test-set-experiments", type=int, default=1_000,
                   help="for the test-set interval: each draws its own test set (default 1000)")
    p.add_argument("--conditions-experiments", type=int, default=10_000,
                   help="per cell of section 7 (across conditions): each fits REML per experiment (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sections", default="1,2,3,4,5,6,7,8",
                   help="which sections, e.g. 9 (default 1-8, the error rates; 9, the cost of compare, times "
                        "this host, so it runs only when asked). The sections draw from one generator in turn: "
                        "a section run without the ones before it draws other experiments")
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"# bench_stats: alpha {ALPHA}, {args.experiments} experiments per cell, seed {args.seed}\n")
    sections = {"1": lambda: null_rates(rng, args.experiments), "2": lambda: margin_rates(rng, args.experiments),
                "3": lambda: bootstrap_coverage(rng, args.bootstrap_experiments, args.seed),
                "4": lambda: power_rows(rng, args.experiments),
                "5": lambda: test_set_coverage(rng, args.test_set_experiments),
                "6": lambda: exact_rows(rng, args.experiments),
                "7": lambda: conditions_rows(rng, args.conditions_experiments),
                "8": lambda: bench_diverged.rows(rng, args.experiments, row=row, header=header),
                "9": lambda: bench_stats_cost.rows(FAILED)}
    chosen = [key.strip() for key in args.sections.split(",")]
    unknown = [key for key in chosen if key not in sections]
    if unknown:
        p.error(f"--sections: no section {', '.join(unknown)}; the sections are {', '.join(sections)}")
    for key in chosen:
        print("\n".join(sections[key]()) + "\n", flush=True)
    print(f"{'all cells pass' if not FAILED else 'FAILED: ' + ', '.join(FAILED)} "
          f"({time.perf_counter() - started:.0f} s)")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
