"""What ``python -m harness.diff`` says: the report of where two runs part (diff.py compares them),
and the note shared with harness.golden when the two sides were hashed in different digest versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

SHOW_LAYERS = 12  # per-layer lines printed; the JSON report has them all


def digests_note(a: int, b: int) -> str:
    """Why per-step parameter digests and a content data-order digest were not compared."""
    return (f"note: digest version {a} against {b} (training/host_digest.py): the per-step parameter digests and a "
            "data order fingerprinted by batch content are computed differently, so they were not compared; "
            "the loss bits of every step and the initial and final weights were. Rerun the older side (or "
            "re-save its golden) with this harness to compare them too.")


def _g(x: float) -> str:
    return f"{x:.3g}"


def _show_value(v) -> str:
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def format_report(report: dict, a, b, plot: Optional[Path]) -> str:
    """diff.compare's report as the terminal shows it; ``a`` and ``b`` are the two diff.RunFiles (path, label)."""
    n_a, n_b = report["steps"]
    mixed = report["digests"][0] != report["digests"][1]  # per-step parameter digests and a content data order not compared
    lines = [f"A: {a.path}  ({a.label})", f"B: {b.path}  ({b.label})", ""]
    cfg = [d for d in report["config_differences"] if d[0] not in ("seed", "arm")]
    seeds = [d for d in report["config_differences"] if d[0] in ("seed", "arm")]
    shown = ", ".join(f"{k} ({_show_value(x)} vs {_show_value(y)})" for k, x, y in (seeds + cfg)[:8])
    shown += f", and {len(seeds + cfg) - 8} more" if len(seeds + cfg) > 8 else ""
    if report["identical"]:
        what = ("loss bits of every step, initial and final weights" if mixed
                else "loss bits and parameter digests of every step, final weights")
        if report["weights"] is not None:
            what += ", weights.pt"
        lines.append(f"The runs are bit-identical: {n_a} steps ({what}).")
        if mixed:
            lines.append("  " + digests_note(*report["digests"]))
        if shown:  # identical bits are only news together with what was changed
            lines.append(f"  although the config differs at: {shown}: that change did not move a bit")
        return "\n".join(lines)

    lines.append("The runs differ.")
    lines.append(f"  config differs at:      {shown}" if shown else "  config:                 identical")
    env = [d for d in report["env_differences"] if d[0] not in ("device_name", "processor", "platform")] or report["env_differences"]
    if env:
        lines.append("  environment differs at: " + ", ".join(f"{k} ({x} vs {y})" for k, x, y in env[:8]))
    if report["code_version"][0] != report["code_version"][1]:
        lines.append(f"  code version:           {report['code_version'][0]} vs {report['code_version'][1]}")
    order = {True: "identical", False: "DIFFERS", None: "not compared (digest versions differ)"}[report["data_order_equal"]]
    lines.append(f"  initial weights:        {'identical' if report['init_equal'] else 'DIFFER (step 0)'}; data order: {order}")
    if mixed:
        lines.append("  " + digests_note(*report["digests"]))
    if n_a != n_b:
        lines.append(f"  steps:                  {n_a} vs {n_b}")

    ls, first = report["first_loss_step"], report["loss_at_first_difference"]
    if ls is None:
        lines.append(f"  loss bits:              identical at all {n_a} steps")
    elif first is None:
        lines.append(f"  loss bits:              identical until one run stops (step {ls})")
    else:
        (xa, va), (xb, vb) = first["a"], first["b"]
        peak = max(range(len(report["abs_dloss"])), key=report["abs_dloss"].__getitem__)
        lines.append(
            f"  loss bits:              first differ at step {ls} of {min(n_a, n_b)}: {va:.9g} [{xa}] vs {vb:.9g} [{xb}]; "
            f"max |Δloss| {_g(report['abs_dloss'][peak])} at step {peak + 1}"
        )
    ps = report["first_params_step"]
    if mixed:
        lines.append("  parameters:             per-step digests not compared (digest versions differ)")
    else:
        lines.append(
            f"  parameters:             {'identical at every step' if ps is None else f'first differ at step {ps} (after its optimizer update)'}"
        )
    lines.append(f"  final weights:          {'identical fingerprint' if report['final_equal'] else 'different fingerprint'}")

    w = report["weights"]
    if w is None:
        lines.append(f"  max |Δw|:               not available ({report['weights_note']})")
    else:
        lines.append(f"  max |Δw| (final):       {_g(w['overall'])} overall")
        width = max((len(k) for k in w["per_layer"]), default=0)
        ranked = sorted(w["per_layer"].items(), key=lambda kv: -kv[1])  # the largest first
        for name, d in ranked[:SHOW_LAYERS]:
            lines.append(f"      {name:<{width}}  {_g(d)}")
        if len(ranked) > SHOW_LAYERS:
            lines.append(f"      ... {len(ranked) - SHOW_LAYERS} more entries (--json has them all)")
        for m in w["mismatched"]:
            lines.append(f"      not comparable: {m}")

    sw = report["step_weights"]
    if sw is None:
        lines.append(f"  butterfly curve:        not available ({report['step_weights_note']})")
    else:
        curve, k = sw["max_abs_dw"], sw["first_nonzero_step"]
        if k is None:
            lines.append(f"  butterfly curve:        max |Δw| is 0 for all {len(curve)} kept steps")
        else:
            growth = curve[-1] / curve[k - 1]
            lines.append(
                f"  butterfly curve:        max |Δw| {_g(curve[k - 1])} at step {k} -> {_g(curve[-1])} at step "
                f"{len(curve)} (x{growth:.3g} over {len(curve) - k} steps)"
            )
    if plot is not None:
        lines.append(f"  plot:                   {plot}")
    return "\n".join(lines)
