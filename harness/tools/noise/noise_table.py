"""The noise audit's words and pictures: the verdict lines, the table of one metric and the per-step
plot, from summarize()'s numbers (harness/tools/noise/noise_audit.py runs and measures)."""

from __future__ import annotations

import math
from pathlib import Path


from harness.tools.noise.noise_runs import SOURCES


def verdict(summary: dict, metric: str, k: int) -> list[str]:
    """Plain sentences: is deterministic mode exact, and is nondeterminism noise ≈ seed noise?"""
    lines = []
    rep = summary["repeat"]
    if rep["distinct_final_weights"] == 1:
        lines.append(f"(a) deterministic repeats: all {rep['runs']} bit-identical, as promised.")
    else:
        lines.append(
            f"(a) deterministic repeats: NOT reproducible: {rep['distinct_final_weights']} different final weights in "
            f"{rep['runs']} runs of one config. Find the op with python -m harness.audit, or the step with python -m harness.diff."
        )
    for source in ("ulp", "threads", "mode_off"):
        if source not in summary:
            continue
        s = summary[source]
        r = s["metrics"][metric]["ratio_to_seeds"]
        name = SOURCES[source]
        if s["identical_to_reference"] == s["compared_with_reference"]:
            lines.append(f"{name}: no effect at all: every run is bit-identical to the reference.")
        elif r["ratio"] is None:
            lines.append(_no_ratio(name, s["metrics"][metric], summary["seeds"]["metrics"][metric], metric))
        elif r["low"] is None:
            lines.append(f"{name}: the runs differ in their weights but not in {metric} (std 0).")
        else:
            ci = f"{metric} std {_ratio(r['ratio'])}x the seed std (95% CI {_ratio(r['low'])}-{_ratio(r['high'])})"
            if r["low"] <= 1 <= r["high"]:
                lines.append(f"{name}: {ci}: consistent with nondeterminism noise ≈ seed noise; {k} runs cannot tell them apart.")
            elif r["high"] < 1:
                lines.append(f"{name}: {ci}: smaller than seed noise.")
            else:
                lines.append(f"{name}: {ci}: larger than seed noise.")
    return lines


def _no_ratio(name: str, src: dict, seeds: dict, metric: str) -> str:
    """Why a source has no std ratio, saying what was compared: a source of one run has no spread
    of its own (the seeds may well have one); seeds that agree exactly leave nothing to compare with."""
    if src["n"] < 2:
        reference = seeds["values"][0]  # the reference run is the seeds' first
        seeds_std = "unknown" if seeds["std"] is None else format(seeds["std"], ".3g")
        return (f"{name}: {src['n']} run only, so it has no spread of its own to set against the seeds' "
                f"(std {seeds_std} over {seeds['n']} runs): its {metric} {src['mean']:.4g} against the reference "
                f"run's {reference:.4g} ({src['mean'] - reference:+.3g}).")
    return (f"{name}: the {seeds['n']} seeds show no spread in {metric} (std {_num(seeds['std'])}), so there is "
            "nothing to compare its spread with.")


# -- showing ------------------------------------------------------------------------------------


def _num(x, spec=".3g") -> str:
    return "-" if x is None else format(x, spec)


def _steps(r: dict | None) -> str:
    if r is None:
        return "never"
    return str(r["min"]) if r["min"] == r["max"] else f"{r['min']}-{r['max']}"


def _ratio(x: float) -> str:
    return format(x, ".2f" if x == 0 or x >= 0.1 else ".2g")


def format_table(summary: dict, metric: str, header: dict, spec=None, n_examples: int | None = None) -> str:
    """The table of one metric; ``spec`` (its MetricSpec) gives its unit, ``n_examples`` the size of
    its per-example record when it is the mean of per-example outcomes (one example's step)."""
    rows = [("source", "runs", "distinct", "mean", "std", "range", "std/seed (95% CI)", "params part", "loss parts",
             "max|Δw| end")]
    step = spec.example_scale / n_examples if spec is not None and spec.examples and n_examples else None
    mean_spec = f".{max(2, 1 - math.floor(math.log10(step)))}f" if step else ".6g"  # one example's step shows
    for source, name in SOURCES.items():
        if source == "threads":
            name = f"(c) threads {','.join(str(t) for t in header['thread_counts'])} (vs {header['threads']})"
        if source == "seeds":
            name = f"seeds {header['seed']}..{header['seed'] + header['k'] - 1}"
        if source not in summary:
            if source == "mode_off":
                rows.append((name, "not applicable: no CUDA", "", "", "", "", "", "", "", ""))
            continue
        s = summary[source]
        m = s["metrics"][metric]
        r = m["ratio_to_seeds"]
        if source == "seeds":
            ratio = "1 (reference)"
        elif r["ratio"] is None:
            ratio = "-"
        elif r["low"] is None:
            ratio = _ratio(r["ratio"])
        else:
            ratio = f"{_ratio(r['ratio'])} ({_ratio(r['low'])}-{_ratio(r['high'])})"
        rows.append((name, str(s["runs"]), str(s["distinct_final_weights"]), _num(m["mean"], mean_spec), _num(m["std"]),
                     _num(m["range"]), ratio, _steps(s["params_part_at_step"]), _steps(s["loss_parts_at_step"]),
                     _num(s["max_abs_dw_final_median"], ".2g")))
    widths = [max(len(row[i]) for row in rows if row[1] != "not applicable: no CUDA" or i == 0) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        if row[1] == "not applicable: no CUDA":
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
            continue
        cells = [f"{row[0]:<{widths[0]}}"] + [f"{c:>{w}}" for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    about = [spec.unit] if spec is not None and spec.unit else []
    if step:
        about.append(f"{n_examples} test examples, one = {step:.3g}{spec.suffix}")
    label = f" ({'; '.join(about)})" if about else ""
    return f"final {metric}{label}:\n" + "\n".join(lines)


def write_plot(summary: dict, path: Path, title: str, kept: int, steps: int) -> None:
    """Per step, against the reference run: max |Δw| (median over runs) and |Δ train loss| (mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for source, name in SOURCES.items():
        s = summary.get(source)
        if s is None or s["identical_to_reference"] == s["compared_with_reference"]:
            continue  # identical runs have no divergence to draw (and a log axis cannot show 0)
        for ax, key in ((top, "median_max_abs_dw"), (bottom, "mean_abs_dloss")):
            points = [(i + 1, v) for i, v in enumerate(s["curves"][key]) if v > 0]
            if points:
                ax.semilogy(*zip(*points), linewidth=1, label=name)
    top.set_ylabel("max |Δw| vs the reference\n(median over runs)")
    top.set_title(title + ("" if kept >= steps else f"\n(weights kept for the first {kept} of {steps} steps)"), fontsize=9)
    bottom.set_ylabel("|Δ train loss| vs the reference\n(mean over runs)")
    bottom.set_xlabel("step")
    for ax in (top, bottom):
        ax.grid(True, which="both", alpha=0.3)
    top.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- command line -------------------------------------------------------------------------------
