"""What a golden check says: the message of a check that passed or failed (the first step that
parts, the configuration and stack differences, the declared metrics then and now) and the declared
primary metric of a run, read from its recorded declaration (names and units are never guessed)."""

from __future__ import annotations

from harness.results import load_steps
from harness.tools.diff.diff import loss_value
from harness.tools.diff.diff_words import digests_note


def check_message(path: str, golden: dict, result: dict, cmp: dict) -> str:
    n_g, n_r = cmp["steps"]
    where = f"seed {golden['seed']}, arm {golden['arm']}"
    stack = cmp["stack_differences"]
    stack_line = (
        "the environment differs from the golden's: "
        + ", ".join(f"{k} {a} -> {b}" for k, a, b in stack)
        + ". Bits are only promised on the same stack (torch version, device type, thread count): "
        "if this change is intended, save a new golden on this stack."
    )
    mixed = cmp["digests"][0] != cmp["digests"][1]  # per-step parameter digests and a content data order not compared
    if cmp["identical"]:
        what = "initial and final weights" if mixed else "parameter digests, initial and final weights, data order"
        lines = [f"golden check passed: {path}: all {n_g} steps bit-identical ({where}; loss bits, {what})."]
        if mixed:
            lines.append("  " + digests_note(*cmp["digests"]))
        if stack:
            lines.append("  note: " + stack_line)
        return "\n".join(lines)

    step = cmp["first_divergent_step"]
    lines = [f"golden check FAILED: {path}: the run parts ways with the golden at step {step} of {n_g} ({where})."]
    detail = []
    if not cmp["init_equal"]:
        detail.append("the initial weights differ (step 0)")
    if cmp["data_order_equal"] is False:
        detail.append("the data order differs")
    ls, ps = cmp["first_loss_step"], cmp["first_params_step"]
    if ls is not None:
        if ls <= min(n_g, n_r):
            a, b = golden["fingerprints"]["steps"]["loss"][ls - 1], load_steps(result)["loss"][ls - 1]
            detail.append(f"loss bits from step {ls} ({loss_value(a):.9g} [{a}] in the golden, {loss_value(b):.9g} [{b}] now)")
        else:
            detail.append(f"the run has {n_r} steps, the golden {n_g}")
    if ps is not None:
        detail.append(f"parameter digests from step {ps}")
    if not detail:
        detail.append("every step matches but the final weights differ")
    lines.append("  " + "; ".join(detail) + ".")
    if mixed:
        lines.append("  " + digests_note(*cmp["digests"]))
    cfg = cmp["config_differences"]
    if cfg:
        lines.append("  the configuration differs from the golden's at: "
                     + ", ".join(f"{k} ({a} -> {b})" for k, a, b in cfg[:8]) + ("" if len(cfg) <= 8 else ", ..."))
    else:
        lines.append("  the configuration is the same as the golden's: the code (or the stack) changed the numerics.")
    if stack:
        lines.append("  " + stack_line)
    before, now = golden.get("metrics") or {}, result.get("metrics") or {}
    shown = [(m, spec) for m, spec in _declared_metrics(result) if m in before and m in now]
    if shown:
        lines.append("  " + "; ".join(f"{m}: {_number(now[m])}{spec.suffix} now, {_number(before[m])}{spec.suffix} in "
                                      f"the golden" for m, spec in shown) + ".")
    return "\n".join(lines)


def _declaration(result: dict):
    """The declaration of the run's recorded config (its metrics and units), or None when it
    declares nothing readable: names and units are never guessed."""
    from harness.config.declaration import Declaration
    from harness.config.metric_spec import DeclarationError

    try:
        return Declaration.from_config(result.get("config") or {}, strict=False)
    except DeclarationError:
        return None


def _declared_metrics(result: dict) -> list:
    """[(name, MetricSpec)] of the declared metrics, the primary one first."""
    declaration = _declaration(result)
    if declaration is None:
        return []
    names = [declaration.metric] + [m for m in declaration.metrics if m != declaration.metric]
    return [(m, declaration.metrics[m]) for m in names if m in declaration.metrics]


def _number(x) -> str:
    return f"{x:.6g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else repr(x)


def _primary_line(result: dict) -> str:
    """The declared primary metric of a run with its unit, e.g. "val_score 82.2 pts"."""
    declaration = _declaration(result)
    if declaration is None:
        return "no declared metric"
    metric, spec = declaration.metric, declaration.metrics.get(declaration.metric)
    value = (result.get("metrics") or {}).get(metric)
    return f"{metric} {_number(value)}{spec.suffix if spec else ''}" if value is not None else f"{metric} not returned"
