"""The ledger's figure: each online FDR stream's alpha_t over its tests, with their decision p-values
and rejections (matplotlib, Agg, no pyplot; computes nothing but the plot)."""

from __future__ import annotations

from pathlib import Path


def write_stream_figure(tests: list[dict], path) -> Path:
    """One panel: per (method, level) stream, alpha_t by the test's place (a step line), each decided
    test's p-value (a dot), rejections filled. ``tests``: the ledger's rows, in declaration order."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from harness.stats.fdr.online import NAMES

    fig = Figure(figsize=(8, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    streams: dict = {}
    for t in tests:
        streams.setdefault((t["method"], t["level"]), []).append(t)
    for (method, level), rows in streams.items():
        places = list(range(1, len(rows) + 1))
        line = ax.step(places, [r["alpha"] for r in rows], where="mid", label=f"{NAMES[method]} at FDR {level:g}: α_t")[0]
        decided = [(i, r) for i, r in zip(places, rows) if r["pvalue"] is not None]
        for rejected in (False, True):
            shown = [(i, r["pvalue"]) for i, r in decided if bool(r["rejected"]) == rejected]
            if shown:
                ax.scatter(*zip(*shown), color=line.get_color(), facecolors=line.get_color() if rejected else "none",
                           label=f"{NAMES[method]}: {'rejected' if rejected else 'not rejected'} (decision p)")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # tests are counted, not measured
    ax.set_yscale("log")
    ax.set_xlabel("test (experiment) in the order declared")
    ax.set_ylabel("level α_t and decision p")
    ax.set_title("online FDR over the ledger")
    if streams:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return Path(path)
