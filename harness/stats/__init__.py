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
    power/       power and seeds needed (the t test's power, the exact test's share of it, a margin claim's)
    verdict_words.py  the verdict in words
    decision_p.py  the decision p-values: never below the exact sign-flip test's, Bonferroni
    verdict.py   decide, compare, compare_to_baseline
    diverged.py  pairs with a diverged run counted as worst: the signed-rank sign-flip test
    sources.py   the spread of each source of randomness against the full seed spread

Rooms that stand apart from the verdict, each imported only by its own user:

    sequential/  the sequential design (docs/sequential.md), imported by the sequential runner, and
                 the race of K configurations, imported by the race
    meta/        across conditions: the random-effects model, the claims across conditions, rliable's
                 aggregates, dose trends
    fdr/         across claims: online FDR (LOND, LORD++, SAFFRON, ADDIS, their asynchronous and
                 dependent forms, their simulated FDR and power), imported by the ledger (harness/ledger/)
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
    "power.t_test": ("paired_t_power",),
    "power.seeds_needed": ("SeedsNeeded", "claim_floors", "decision_levels", "fewest_seeds", "sd_interval",
                           "seeds_needed", "seeds_needed_for", "seeds_to_settle_margin"),
    "decision_p": ("decision_pvalues", "exact_sign_flip_pvalues", "sign_flip_floor"),
    "verdict": ("DIFFERS", "VERDICTS", "DecisionInterval", "PairedComparison", "Verdict", "compare",
                "compare_to_baseline", "decide"),
    "verdict_words": ("beyond_test_set_sentence", "verdict_sentence"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}
_SUBMODULES = ("decision_p", "diverged", "margins", "noise", "paired", "sign_flip", "sources", "verdict", "verdict_words",
               "power", "sequential", "meta", "fdr")


def __getattr__(name: str):
    """A name of the package's API, imported from its module on first use; a submodule or room by its
    name (``stats.power``), which callers reach as an attribute of the package."""
    import importlib

    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value  # looked up once
        return value
    if name in _SUBMODULES:
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
