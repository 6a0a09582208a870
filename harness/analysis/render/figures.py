"""The analysis figure (matplotlib, Agg, no pyplot): reads the analysis dict, computes nothing.

Panels, left to right, top to bottom:
  1. each arm against the baseline: per seed a line from the baseline's value to the arm's, one
     pair of columns per arm, so no line passes through another arm;
  2. the differences per seed, the interval that decides the verdict, ±margin (its bounds when it
     is estimated), and the interval for the data distribution when examples were recorded;
  3. dose-response when every arm's factor value is a number: the metric's mean and t interval
     against the factor value; otherwise the arms' means with intervals side by side;
  4. learning curves per arm: mean and ±1 sd band over seeds, from the stored curves (curves.curves:
     sparse, logged at any steps, or from the per-step losses); points without a value are left out.
The suptitle carries the verdict(s). write_figure writes the PNG and turns a figure that fails into a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.analysis.render.summary import Fmt, title
from harness.results import atomic_write

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def figure(analysis: dict, *, title: str, fmt):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    title = _wrap(title)
    # fixed margins, not constrained layout: the layout measured every label once more before the
    # drawing (about half of the figure's time); only the title's height varies, by its line count
    fig = Figure(figsize=(12, 8), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2, gridspec_kw=dict(left=0.065, right=0.985, bottom=0.065, wspace=0.18, hspace=0.25,
                                               top=0.925 - 0.024 * title.count("\n")))
    unit = f" ({fmt.unit.strip()})" if fmt.unit else ""
    _arms_vs_baseline(axes[0, 0], analysis, unit)
    _differences(axes[0, 1], analysis, fmt, unit)
    _dose_response(axes[1, 0], analysis, unit)
    _curves(axes[1, 1], analysis)
    fig.suptitle(title, fontsize=10)
    return fig


def _wrap(text: str, width: int = 130) -> str:
    lines, line = [], ""
    for part in text.split("; "):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = part
        else:
            line = f"{line}; {part}" if line else part
    return "\n".join([*lines, line])


def _arms_vs_baseline(ax, analysis, unit):
    comparisons = analysis["comparisons"]
    baseline = analysis["baseline"]
    ticks, labels = [], []
    for j, (arm, c) in enumerate(comparisons.items()):
        left, right = j - 0.18, j + 0.18
        for _, a, b in c["pairs"]:
            color = "tab:green" if b > a else "tab:red" if b < a else "0.5"
            if analysis.get("direction") == "min" and b != a:
                color = "tab:green" if b < a else "tab:red"
            ax.plot([left, right], [a, b], color=color, alpha=0.6, linewidth=1, marker="o", markersize=3)
        ticks += [left, right]
        labels += [baseline, arm]
    ax.set_xticks(ticks, labels)
    ax.set_xlim(-0.5, len(comparisons) - 0.5)
    ax.set_ylabel(analysis["metric"] + unit)
    ax.set_title("each seed, baseline → arm (green: better in the declared direction)", fontsize=9)


def _differences(ax, analysis, fmt, unit):
    comparisons = analysis["comparisons"]
    margin = analysis["margin"]
    if margin["source"] != "none":  # no margin: no band to draw
        ax.axhspan(-margin["value"], margin["value"], color="0.9", label=f"±margin {fmt.value(margin['value'])}{fmt.unit}")
    if margin["source"] == "auto":
        for bound, style in ((margin["low"], ":"), (margin["high"], "--")):
            for sign in (-1, 1):
                ax.axhline(sign * bound, color="0.55", linewidth=0.8, linestyle=style)
    ax.axhline(0, color="0.3", linewidth=0.8)
    for j, (arm, c) in enumerate(comparisons.items()):
        diffs = [b - a for _, a, b in c["pairs"]]
        spread = [j - 0.2 + 0.25 * i / max(1, len(diffs) - 1) for i in range(len(diffs))]
        ax.scatter(spread, diffs, s=14, color="tab:blue", alpha=0.7, zorder=3)
        zero = c["intervals"]["zero"]
        mean = c["mean_diff"]
        if zero["low"] is not None and zero["high"] is not None:
            ax.errorbar([j + 0.15], [mean], yerr=[[mean - zero["low"]], [zero["high"] - mean]], fmt="s", color="black",
                        capsize=4, zorder=4, label=f"mean, deciding t CI ({_pct(zero['level'])})" if j == 0 else None)
        ts = c.get("test_set")
        if ts and ts["distribution_ci"][0] is not None:
            low, high = ts["distribution_ci"]
            ax.errorbar([j + 0.3], [ts["mean_diff"]], yerr=[[ts["mean_diff"] - low], [high - ts["mean_diff"]]],
                        fmt="D", color="tab:purple", capsize=4, zorder=4,
                        label="CI for the data distribution" if j == 0 else None)
    ax.set_xticks(range(len(comparisons)), [f"{arm} - {analysis['baseline']}" for arm in comparisons])
    ax.set_xlim(-0.5, len(comparisons) - 0.5)
    ax.set_ylabel("difference" + unit)
    ax.set_title("differences per seed" + (" (dashed/dotted: the estimated margin's bounds)"
                                           if margin["source"] == "auto" else ""), fontsize=9)
    if ax.get_legend_handles_labels()[0]:  # constant differences and no margin: nothing labelled to list
        ax.legend(loc="best", fontsize=7)


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _dose_response(ax, analysis, unit):
    arms = analysis["arms"]
    numeric = all(_numeric(a.get("factor_value")) for a in arms.values()) and len(
        {a.get("factor_value") for a in arms.values()}) == len(arms)
    xs = [a["factor_value"] if numeric else i for i, a in enumerate(arms.values())]
    for x, (name, a) in zip(xs, arms.items()):
        if a.get("mean") is None:
            continue
        ci = a.get("ci") or [a["mean"], a["mean"]]
        ax.errorbar([x], [a["mean"]], yerr=[[a["mean"] - ci[0]], [ci[1] - a["mean"]]], fmt="o", capsize=4,
                    color="tab:blue" if name != analysis["baseline"] else "black")
        ax.annotate(name, (x, a["mean"]), textcoords="offset points", xytext=(6, 4), fontsize=8)
    if numeric:
        order = sorted(zip(xs, [a.get("mean") for a in arms.values()]))
        ax.plot([x for x, _ in order], [m for _, m in order], color="0.6", linewidth=0.8, zorder=0)
        ax.set_xlabel(f"{analysis.get('factor')} (factor value)")
        ax.set_title("dose-response: mean and 95% t interval over seeds", fontsize=9)
        _trend_line(ax, analysis)
    else:
        ax.set_xticks(xs, list(arms))
        ax.set_title("each arm: mean and 95% t interval over seeds", fontsize=9)
    ax.set_ylabel(analysis["metric"] + unit)


def _trend_line(ax, analysis):
    """The paired trend (dose_trend.dose_trend): the fitted line, its slope, p and the linearity test."""
    t = analysis.get("dose_trend")
    if not t:
        return
    lo, hi = min(t["doses"]), max(t["doses"])
    lin = t["linearity"]["pvalue"]
    label = (f"paired trend {t['slope_per_unit']:+.3g}/unit, p {t['pvalue']:.2g}"
             + ("" if lin is None else f"; departs from line p {lin:.2g}"))
    ax.plot([lo, hi], [t["intercept"] + t["slope_per_unit"] * lo, t["intercept"] + t["slope_per_unit"] * hi],
            linestyle="--", color="tab:red", linewidth=1, label=label)
    ax.legend(loc="best", fontsize=7)


def _finite(value) -> bool:
    return _numeric(value) and math.isfinite(value)


def _curve_points(curve) -> list[tuple]:
    """(step, mean, sd) where step and mean are numbers: curves may be sparse, and an analysis.json
    written by an earlier version may hold nulls in mean and std."""
    if not isinstance(curve, Mapping):
        return []
    step, mean, std = (list(curve[k]) if isinstance(curve.get(k), list) else [] for k in ("step", "mean", "std"))
    std += [None] * (len(step) - len(std))
    return [(x, m, s if _finite(s) else 0.0) for x, m, s in zip(step, mean, std) if _finite(x) and _finite(m)]


def _curves(ax, analysis):
    curves = analysis.get("curves")
    curves = {arm: per_arm for arm, per_arm in (curves.items() if isinstance(curves, Mapping) else ())
              if isinstance(per_arm, Mapping)}
    names = sorted({name for per_arm in curves.values() for name, curve in per_arm.items() if _curve_points(curve)})
    if not names:
        ax.text(0.5, 0.5, "no stored learning curves", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    name = "train_loss" if "train_loss" in names else names[0]
    for i, (arm, per_arm) in enumerate(curves.items()):
        points = _curve_points(per_arm.get(name))
        if not points:
            continue
        curve = per_arm[name]
        source = str(curve.get("source") or "")
        color = COLORS[i % len(COLORS)]
        step, mean, std = zip(*points)
        ax.plot(step, mean, color=color, linewidth=1.2, marker="o" if len(points) == 1 else None,
                label=f"{arm} (n={curve.get('n', '?')}" + (", per-step losses" if "per-step" in source else "") + ")")
        ax.fill_between(step, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                        color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("step")
    ax.set_ylabel(name)
    ax.set_title(f"learning curves: mean ± 1 sd over seeds ({name})", fontsize=9)
    ax.legend(loc="best", fontsize=7)


def _pct(level: float) -> str:
    return f"{100 * level:.2f}".rstrip("0").rstrip(".") + "%"


def forest(ax, rows, block, *, title: str, unit: str = "", margin: float | None = None) -> None:
    """A forest plot: per condition its effect and interval (rows: (label, effect, low, high)), the
    average's diamond with its interval, the prediction interval for a new condition, 0, and the
    declared margin (dashed, at +-margin) when it is a number."""
    n = len(rows)
    for i, (label, effect, low, high) in enumerate(rows):
        ax.errorbar([effect], [n - i], xerr=[[effect - low], [high - effect]], fmt="s", color="tab:blue", capsize=3)
    ticks, labels = [n - i for i in range(n)], [r[0] if len(r[0]) <= 40 else r[0][:39] + "…" for r in rows]
    pooled = (block or {}).get("pooled")
    if pooled:
        m, (low, high) = pooled["estimate"], pooled["ci"]
        ax.fill([low, m, high, m], [0, 0.25, 0, -0.25], color="black", zorder=3)
        ticks.append(0)
        labels.append("average (t over conditions)")
        re = pooled.get("random_effects") or {}
        if re.get("ci") and None not in re["ci"]:  # the weighted estimate beside it, in grey
            m, (low, high) = re["estimate"], re["ci"]
            ax.fill([low, m, high, m], [-0.45, -0.3, -0.45, -0.6], color="grey", zorder=3)
            ticks.append(-0.45)
            labels.append("random effects (REML, HK)")
        if pooled.get("prediction_interval"):
            lo, hi = pooled["prediction_interval"]
            ax.plot([lo, hi], [-0.9, -0.9], color="tab:red", linewidth=2)
            ticks.append(-0.9)
            labels.append("new condition (prediction)")
        h = block["heterogeneity"]
        title += f"\ncommon effect p = {h['pvalue']:.2g}, tau = {h['tau']:.2g}, I^2 = {100 * h['i2']:.0f}%"
    ax.axvline(0.0, color="grey", linewidth=0.8)
    if margin:
        for x in (-margin, margin):
            ax.axvline(x, color="tab:green", linestyle="--", linewidth=0.8)
        title += f"; margin ±{margin:g} (dashed)"
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_xlabel("effect (arm - baseline)" + (f" ({unit})" if unit else ""))
    ax.set_title(title, fontsize=8)


def write_figure(analysis: dict, path, named=None) -> None:
    """PNG of the analysis (see harness/analysis/render/figures.py): verdict in the title, arms vs baseline,
    differences with their deciding intervals, dose-response, learning curves.

    A figure that fails, for any reason, is a warning naming the file, never the end of an analysis
    (its verdict, analysis.json and report.md stand); an older figure there is removed, so that it
    does not look current. ``named``: the file's name in messages when ``path`` is a temporary one."""
    import logging
    from pathlib import Path

    try:
        fig = figure(analysis, title=title(analysis), fmt=Fmt(analysis))
        atomic_write(path, lambda out: fig.savefig(out, format="png"))
    except Exception as e:  # noqa: BLE001 - the figure is an extra; the analysis is written already
        try:
            Path(path).unlink(missing_ok=True)
        except OSError:
            pass
        logging.getLogger("harness").warning(
            "could not draw the figure %s (%s: %s); the analysis and its report are written without it.",
            named or path, type(e).__name__, e)
