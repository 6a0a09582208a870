"""The records ``Run.finish`` returns for a run it did not watch itself: a black box (a command the
harness only started) and an adopted run (a script that recorded through ``harness.attach()`` in a
process of its own), and the curve's columns every record shares. Torch-free.
"""

from __future__ import annotations

from typing import Mapping

from harness.training.fingerprint_coverage import BLACK_BOX

ADOPTED_KEYS = ("init", "data_order", "final", "steps", "batches")


def curve_columns(rows: Mapping[int, Mapping[str, float]]) -> dict:
    """{step: {name: value}} -> result.json's curve: the steps, then one column per name."""
    steps = sorted(rows)
    names = sorted({n for r in rows.values() for n in r})
    return {"step": steps, **{n: [rows[s].get(n) for s in steps] for n in names}}


def curve_rows(columns: Mapping) -> dict[int, dict[str, float]]:
    """The inverse of curve_columns (None values left out)."""
    steps = list(columns.get("step") or [])
    rows: dict[int, dict[str, float]] = {int(s): {} for s in steps}
    for name, values in columns.items():
        if name == "step":
            continue
        for s, v in zip(steps, values or []):
            if v is not None:
                rows[int(s)][name] = v
    return rows


def black_box_record(metrics: Mapping, final: str, covers: str, rows: Mapping, seconds: float) -> dict:
    why = f"not seen: the training ran outside this process, so the pairing is {BLACK_BOX}"
    return {
        "metrics": dict(metrics),
        "fingerprints": {"init": None, "data_order": None, "final": final,
                         "steps": {"loss": [], "params": []}, "batches": 0,
                         "missing": {"init": why, "data_order": why}, "black_box": True,
                         "final_covers": covers},
        "curve": curve_columns(rows),
        "timing": {"train_seconds": seconds, "steps": 0, "steps_per_s": None, "ms_per_step": None},
    }


def adoption_problem(record) -> str | None:
    """Why ``record`` is not what an attached Run's finish wrote, or None when it is."""
    if not isinstance(record, Mapping):
        return f"it holds a {type(record).__name__}, not a record"
    fp = record.get("fingerprints")
    if not isinstance(fp, Mapping) or any(k not in fp for k in ADOPTED_KEYS):
        return f"its fingerprints lack some of {', '.join(ADOPTED_KEYS)}"
    steps = fp["steps"]
    if not isinstance(steps, Mapping) or not isinstance(steps.get("loss"), list) \
            or not isinstance(steps.get("params"), list) or len(steps["loss"]) != len(steps["params"]):
        return "its per-step fingerprints are not two lists of one length"
    if not steps["loss"]:
        return "it recorded no step"
    return None


def adopted_record(record: Mapping, metrics: Mapping, rows: Mapping, seconds: float) -> dict:
    """The run's record from what the attached Run wrote: its fingerprints, steps, per-example
    records and training time; the curve points of both sides; the metrics the harness read."""
    merged = curve_rows(record.get("curve") or {})
    for step, row in rows.items():
        merged.setdefault(step, {}).update(row)
    out = {
        "metrics": {**(record.get("metrics") or {}), **metrics},  # what the harness read wins
        "fingerprints": {k: v for k, v in record["fingerprints"].items() if k != "black_box"},
        "curve": curve_columns(merged),
        "timing": dict(record.get("timing") or {"train_seconds": seconds}),
    }
    out["fingerprints"]["attached"] = True
    if record.get("examples") is not None:
        out["examples"] = record["examples"]
    if isinstance(record.get("env"), Mapping):  # what the script's process said of itself (command_env.py)
        out["env"] = dict(record["env"])
    if record.get("examples_set_aside"):  # kept apart as the script's Run kept them
        out["examples_set_aside"] = record["examples_set_aside"]
    if record.get("notices"):  # what the script's trainer callbacks noted (wandb_hook.py)
        out["notices"] = list(record["notices"])
    return out
