"""The butterfly plot of harness.diff: max |Δw| per kept step and |Δ train loss| per step, log scale."""

from __future__ import annotations

from pathlib import Path


def write_plot(report: dict, path: Path) -> bool:
    """Log-scale max |Δw| per kept step (top) and |Δ train loss| per step (bottom). False: nothing to draw."""
    curve = (report["step_weights"] or {}).get("max_abs_dw") or []
    dloss = report["abs_dloss"]
    if not any(d > 0 for d in curve) and not any(d > 0 for d in dloss):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(curve, "max |Δw| (kept steps)")] if any(d > 0 for d in curve) else []
    panels.append((dloss, "|Δ train loss| per step"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.8 * len(panels)), sharex=True, squeeze=False)
    for ax, (values, label) in zip(axes[:, 0], panels):
        # A log axis cannot show 0: steps where the runs still agree are left out of the line.
        points = [(i + 1, v) for i, v in enumerate(values) if v > 0]
        if points:
            ax.semilogy(*zip(*points), marker=".", linewidth=1)
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        for step, style in ((report["first_params_step"], "--"), (report["first_loss_step"], ":")):
            if step is not None:
                ax.axvline(step, color="gray", linestyle=style, linewidth=1)
    axes[0, 0].set_title(
        f"where the runs part ways: parameters from step {report['first_params_step']} (dashed), "
        f"loss from step {report['first_loss_step']} (dotted)",
        fontsize=9,
    )
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
