"""The noise sources' words and pictures: the printed table, the wandb table's rows and the figure,
from the spreads harness/tools/noise/noise_sources.py measured (its json, or the block it writes there)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def render(header: dict, block: dict) -> str:
    base, other = header["arms"]
    u = f" {header['unit']}" if header["unit"] else ""
    metric = header["metric"] + (f" ({header['unit']})" if header["unit"] else "")
    lines = [f"noise sources: seed {header['seed']}, {base} and {other}, K={header['k']} runs per source, {metric}",
             "", f"{base}: {block['reading_a']['sentence']}",
             f"{other} - {base}: {block['reading_difference']['sentence']}", "",
             f"{'source':<12} {base + ': std (95% CI)':<30} {'share':>6}   {other + ' - ' + base + ': std (95% CI)':<30} {'share':>6}"]
    full = block["sources"]["all"]
    for source, v in block["sources"].items():
        cells = []
        for side in ("a", "difference"):
            s, f = v[side], full[side]["std"]
            share = "1" if source == "all" else (_share(s["std"] / f) if f > 0 else "-")
            cells += [f"{s['std']:.3g} ({s['low']:.3g}-{s['high']:.3g}){u}", share]
        name = "all streams" if source == "all" else source
        lines.append(f"{name:<12} {cells[0]:<30} {cells[1]:>6}   {cells[2]:<30} {cells[3]:>6}")
    for source in block["unused"]:
        lines.append(f"{source:<12} not used by this training (one run per arm with it moved changed no weight or metric)")
    lines += [f"{source:<12} {note}" for source, note in _numerical_notes(block)]
    t = block["test_set"]
    if t:
        lines.append(f"{'test set':<12} {t['a_std']:.3g}{u} (binomial, {t['n_examples']} examples){'':<5}"
                     f"{t['difference_std']:.3g}{u} (paired per-example differences)")
    s = full["a"]
    if s["std"] > 0:
        lines.append(f"(at K={header['k']}, each std's 95% interval spans {s['low'] / s['std']:.2f}-"
                     f"{s['high'] / s['std']:.2f} times it: more runs per source narrow it)")
    p = block["power"]
    lines += ["", f"seeds for 80% power at {p['effect']:.3g}{u} ({p['effect_is']}): {p['paired']} paired "
                  f"(the spread of {other} - {base}), {p['unpaired']} unpaired (arms on independent seeds)"]
    return "\n".join(lines)


def _share(x: float) -> str:
    return f"{x:.2f}" if x == 0 or x >= 0.01 else f"{x:.1g}"  # a one-ULP share shows, not as 0.00


def _numerical_notes(block: dict) -> list[tuple[str, str]]:
    """(source, note) for the numerical sources the table cannot give a spread for, and which thread
    counts ran and which the free cores ruled out."""
    num, out = block.get("numerical") or {}, []
    for source, v in (block.get("too_few") or {}).items():
        out.append((source, f"too few runs ({len(v['values_a'])}) for a spread"))
    t = num.get("threads")
    if t:
        ran = ", ".join(map(str, [t["reference"], *t["counts"]]))
        skipped = (f"; skipped {', '.join(map(str, t['skipped']))}: more threads than the {t['free_cores']} free "
                   f"core(s), where pinned threads wait at every barrier" if t["skipped"] else "")
        out.append(("", f"(threads: ran {ran}, the reference's first{skipped})"))
    if num.get("mode_off"):
        out.append(("mode_off", num["mode_off"]))
    return out


TABLE_COLUMNS = ["source", "a_std", "a_low", "a_high", "a_share",
                 "b_minus_a_std", "b_minus_a_low", "b_minus_a_high", "b_minus_a_share", "note"]


def table_rows(d: dict) -> list[list]:
    """The rows of the wandb table, from a noise_sources.json: each source's std, 95% interval and
    share of the full spread, for the arm (a_) and for B - A (b_minus_a_); then the streams not used
    and the test set's own noise (std only), as the printed table has them."""
    full, rows = d["sources"]["all"], []
    for source, v in d["sources"].items():
        cells = []
        for side in ("a", "difference"):
            s, f = v[side], full[side]["std"]
            cells += [s["std"], s["low"], s["high"], 1.0 if source == "all" else (s["std"] / f if f > 0 else None)]
        rows.append(["all streams" if source == "all" else source, *cells, ""])
    for source in d.get("unused") or []:
        rows.append([source, *[None] * 8, "not used by this training"])
    rows += [[source, *[None] * 8, note] for source, note in _numerical_notes(d) if source]
    t = d.get("test_set")
    if t:
        rows.append(["test set", t["a_std"], None, None, None, t["difference_std"], None, None, None,
                     f"binomial and paired per-example differences, {t['n_examples']} examples"])
    return rows


def figure(header: dict, block: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(block["sources"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, side, title in zip(axes, ("a", "difference"),
                               (header["arms"][0], f"{header['arms'][1]} - {header['arms'][0]}")):
        s = [block["sources"][n][side] for n in names]
        y = np.arange(len(names))
        ax.barh(y, [x["std"] for x in s], color=["#888" if n == "all" else "#4c72b0" for n in names])
        ax.errorbar([x["std"] for x in s], y, xerr=[[x["std"] - x["low"] for x in s], [x["high"] - x["std"] for x in s]],
                    fmt="none", color="k", lw=1)
        ax.set_yticks(y, [("all streams" if n == "all" else n) for n in names])
        ax.set_title(f"{title}: std of {header['metric']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
