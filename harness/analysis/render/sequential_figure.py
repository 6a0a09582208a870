"""sequential.png: per arm, the repeated confidence interval at each look against 0 and ±margin."""

from __future__ import annotations

import math


def write_figure(block: dict, path) -> None:
    """PNG: per arm, the repeated confidence interval at each look against 0 and ±margin."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from harness.results import atomic_write

    arms = block["arms"]
    unit = f" ({block['unit']})" if block.get("unit") else ""
    margin = block["design"].get("margin")
    fig = Figure(figsize=(4.5 * max(1, len(arms)), 3.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(arms)), squeeze=False)[0]
    for ax, (arm, a) in zip(axes, arms.items()):
        looks = a["looks"]
        if margin:
            ax.axhspan(-margin, margin, color="0.9", label=f"±margin {margin:g}{block.get('unit') and ' ' + block['unit'] or ''}")
            for m in (-margin, margin):
                ax.axhline(m, color="0.5", linewidth=0.8, linestyle="--")
        ax.axhline(0, color="0.3", linewidth=0.8)
        # a futility-only look (or a look with diverged runs) has no finite interval: its estimate alone
        bounded = [x for x in looks if all(v is not None and math.isfinite(v) for v in x["interval"])]
        alone = [x for x in looks if x not in bounded and x["estimate"] is not None and math.isfinite(x["estimate"])]
        if bounded:
            n = [x["n"] for x in bounded]
            est = [x["estimate"] for x in bounded]
            lo = [x["interval"][0] for x in bounded]
            hi = [x["interval"][1] for x in bounded]
            ax.fill_between(n, lo, hi, color="tab:blue", alpha=0.15, step=None)
            ax.errorbar(n, est, yerr=[[e - l for e, l in zip(est, lo)], [h - e for e, h in zip(est, hi)]],
                        fmt="o", color="tab:blue", capsize=3, label=f"estimate, {bounded[-1]['level']:.0%} repeated CI")
        if alone:
            ax.plot([x["n"] for x in alone], [x["estimate"] for x in alone], "o", color="tab:gray",
                    label="estimate at a look with no interval (futility-only, or diverged runs)")
        if looks:
            ax.set_xticks([x["n"] for x in looks])
        ax.set_xlabel("seeds (pairs) at the look")
        ax.set_ylabel(f"{arm} - {block['baseline']}{unit}")
        ax.set_title(f"{arm} vs {block['baseline']}: {a['decision']}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8)
    atomic_write(path, lambda out: fig.savefig(out, format="png"))
