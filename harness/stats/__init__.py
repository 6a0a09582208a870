"""Paired statistics for A/B experiments: pure functions over numpy arrays, scipy underneath.

Every comparison takes the per-seed values of a baseline arm ``a`` and another arm ``b``, paired
by position (one position = one seed), and studies the differences ``d = b - a``. Results are
small frozen dataclasses in the style of scipy's result objects (``.statistic``, ``.pvalue``,
``.confidence_interval()``). Nothing here prints, plots, touches files, or imports Hydra or wandb.

``decide`` gives one of the verdicts in VERDICTS (identical, better / worse, smaller_than_margin,
equivalent, differs, undecided, never read as "no effect"); identical when every difference is
exactly 0, else each claim by a decision p-value (``decision_pvalues``) whose error rate is at
most alpha and never below the exact sign-flip test's p of the same claim. What each verdict claims, the decision p-values and the simulated error rates:
docs/statistics.md.

Degenerate data is answered, never NaN'd: identical arms give p = 1 and no warnings; constant
nonzero differences (sd 0) give a zero-width t interval, but the verdict rests on the exact
sign-flip test there (3 such seeds: p = 0.25, undecided).

The package, bottom to top (each module imports only from those above it in this list):

    sign_flip.py the exact one-sided sign-flip test, vectorised (numpy only; imports nothing here)
    _core.py     constants (MIN_PAIRS, POWER, LARGE_N, SIGNIFICANT_DIGITS, ZERO_END), pair checks, differences,
                 seed spreads on the differences' rounding
    paired.py    paired t, Welch, Wilcoxon, sign-flip permutation, bootstrap interval, d_z
    noise.py     seed noise, what pairing removed, the test set's own noise
    margins.py   the margin, minimum-effect test, TOST, multiple comparisons
    t_power.py   the paired t test's power (the noncentral t tail by quadrature)
    exact_share.py  the exact test's share of the t test's power below 20 pairs (a shipped table)
    margin_power.py  a margin claim's power averaged over an estimated margin, and bounds on it
    power.py     power and seeds needed
    words.py     the verdict in words
    decision_p.py  the decision p-values: never below the exact sign-flip test's, Bonferroni
    verdict.py   decide, compare, compare_to_baseline
    diverged.py  pairs with a diverged run counted as worst: the signed-rank sign-flip test
    sources.py   the spread of each source of randomness against the full seed spread

The sequential design (docs/sequential.md) stands apart, imported only by the sequential runner:
sequential_bounds.py (spending, boundaries, Hall's skewness-corrected t), sequential_design.py (the
design declared before the data) and sequential.py (the looks and their decisions), on sign_flip.py;
race.py (Kim & Nelson's race of K configurations), imported only by the race sweeper.
Across conditions: meta.py (the random-effects model, REML / Hartung-Knapp), meta_claims.py (the
claims across conditions, decided with the conditions' estimated variances), meta_peers.py (rliable's
aggregates), trend.py (dose trends).
Across claims: online_fdr.py (LOND, LORD++, SAFFRON, ADDIS: each claim's level alpha_t from the
claims before it, as the R package onlineFDR computes it), online_fdr_async.py (Zrnic et al.'s
asynchronous rules for claims that overlap in time, the dependent variants' conservative one; the
ledger's next level), online_fdr_dep.py (LOND and LORD under arbitrary dependence), online_fdr_sim.py
(their simulated FDR and power, claims decided in turn or overlapping), imported by the ledger
(harness/ledger/).
"""

from ._core import (
    LARGE_N, MIN_PAIRS, POWER, SIGNIFICANT_DIGITS, ZERO_END, ConfidenceInterval, differences, exact_std,
    one_sample_t, seed_std,
)
# The rest is imported on first use (PEP 562): a process that only gathers results (python -m
# harness.analyze's first process, while a second computes the statistics) needs _core alone, and
# compiling the other modules from source costs it ~0.1 s on a busy 2-core host.
_LAZY = {
    "margins": ("Margin", "MinimumEffectResult", "TOSTResult", "holm", "margin_bound_factors", "minimum_effect_test",
                "pooled_seed_std", "resolve_margin", "tost"),
    "noise": ("NoiseFloor", "TestSetNoise", "noise_floor", "test_set_floor", "test_set_noise"),
    "paired": ("BOOTSTRAP_MIN_PAIRS", "BootstrapResult", "PermutationResult", "TTestResult", "WilcoxonResult", "bootstrap_ci", "effect_size_dz",
               "mean_interval", "paired_t", "sign_flip_permutation", "studentized_bootstrap", "welch_t",
               "wilcoxon_signed_rank"),
    "power": ("SeedsNeeded", "claim_floors", "decision_levels", "fewest_seeds", "paired_t_power", "sd_interval",
              "seeds_needed", "seeds_needed_for", "seeds_to_settle_margin"),
    "verdict": ("DIFFERS", "VERDICTS", "DecisionInterval", "PairedComparison", "Verdict", "compare",
                "compare_to_baseline", "decide", "decision_pvalues", "exact_sign_flip_pvalues", "sign_flip_floor"),
    "words": ("beyond_test_set_sentence", "verdict_sentence"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    """A name of the package's API, imported from its module on first use; a submodule by its name
    (``stats.power``), which callers reach as an attribute of the package."""
    import importlib

    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value  # looked up once
        return value
    if name in _LAZY or name in ("decision_p", "t_power", "exact_share", "margin_power", "sign_flip"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "BootstrapResult", "ConfidenceInterval", "DIFFERS", "DecisionInterval", "TestSetNoise", "beyond_test_set_sentence",
    "BOOTSTRAP_MIN_PAIRS", "claim_floors", "decision_levels", "decision_pvalues", "exact_sign_flip_pvalues", "fewest_seeds", "margin_bound_factors", "sd_interval", "mean_interval", "sign_flip_floor", "studentized_bootstrap", "test_set_noise", "LARGE_N", "MIN_PAIRS", "ZERO_END", "Margin", "MinimumEffectResult",
    "NoiseFloor", "POWER", "PairedComparison", "PermutationResult", "SIGNIFICANT_DIGITS", "SeedsNeeded",
    "TOSTResult", "TTestResult", "VERDICTS", "Verdict", "WilcoxonResult", "bootstrap_ci", "compare",
    "compare_to_baseline", "decide", "differences", "effect_size_dz", "exact_std", "holm", "minimum_effect_test",
    "noise_floor", "one_sample_t", "paired_t", "paired_t_power", "pooled_seed_std", "resolve_margin",
    "seed_std", "seeds_needed", "seeds_needed_for", "seeds_to_settle_margin", "sign_flip_permutation", "test_set_floor",
    "tost", "verdict_sentence", "welch_t", "wilcoxon_signed_rank",
]
