"""Learning curves per arm: the mean and band over seeds of what each run logged (``curves``),
and the checks at C speed that a list holds only finite numbers (``all_finite_numbers``).

Pure functions of usable runs (selection._usable_runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from harness import results as results_io
from harness import stats

_NUMBERS = {int, float}  # exactly: a bool is no number here


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def all_finite_numbers(values) -> bool:
    """_finite_number of every item, checked at C speed (a curve, a list of pairs: the usual case)."""
    if not set(map(type, values)) <= _NUMBERS:
        return False
    try:
        return all(map(math.isfinite, values))
    except OverflowError:  # an int too large for a float
        return False



def curves(usable, arms) -> dict:
    """arm -> curve name -> {step, mean, std, count, n, source}: learning curves over the seeds.

    ``run.log`` may log its keys at different steps (train_loss every 10, val_bpc every 50), some
    keys sparsely or only in some runs: each run gives, per name, the steps where it logged a finite
    value, and at each step ``mean`` and ``std`` (ddof=1; 0 from one run) are over the runs that
    have a value there (``count``); ``n`` is the number of runs with that curve. A run that logged
    no curve at all gives its train_loss from the per-step losses result.json always holds
    (fingerprints.steps.loss, float32 bits), at steps 1..N, thinned to at most 1000 points.
    ``source`` says which of the two a curve comes from.
    """
    logged_source, losses_source = "run.log", "per-step losses (result.json fingerprints)"
    max_points = 1000

    def logged(r) -> dict:
        curve = r.get("curve")
        if not (type(curve) is dict or isinstance(curve, Mapping)) or not isinstance(curve.get("step"), list):
            return {}
        found, steps = {}, curve["step"]
        plain_steps = all_finite_numbers(steps)
        for name, values in curve.items():
            if name == "step" or not isinstance(values, list):
                continue
            if plain_steps and len(values) == len(steps) and all_finite_numbers(values):  # the usual case
                points = _Points(steps, values)
            else:
                points = {step: float(v) for step, v in zip(steps, values)
                          if _finite_number(step) and _finite_number(v)}
            if points:
                found[str(name)] = points
        return found

    def from_losses(r) -> dict:
        try:
            bits = results_io.load_steps(r)["loss"]
            values = np.frombuffer(bytes.fromhex("".join(bits)), dtype=">f4").astype(float)
        except (KeyError, TypeError, ValueError, AttributeError):
            return {}
        n = len(values)
        every = max(1, math.ceil(n / max_points))
        points = {i + 1: float(v) for i, v in enumerate(values)
                  if ((i + 1) % every == 0 or i + 1 == n) and math.isfinite(v)}
        return {"train_loss": points} if points else {}

    by_arm: dict[str, list] = {}
    for (_, a), run in usable.items():  # one pass: the runs of each arm, in their order
        by_arm.setdefault(a, []).append(run)
    out: dict[str, dict] = {}
    for arm in arms:
        per_run = []  # (name -> {step: value} or _Points, source) per run of this arm
        for run in by_arm.get(arm, ()):
            points = logged(run["result"])
            if points:
                per_run.append((points, logged_source))
            else:
                points = from_losses(run["result"])
                if points:
                    per_run.append((points, losses_source))
        for name in sorted({name for points, _ in per_run for name in points}):
            runs = [points[name] for points, _ in per_run if name in points]
            sources = sorted({source for points, source in per_run if name in points})
            summary = _same_steps_summary(runs) or _summary(runs)
            if summary["step"]:
                out.setdefault(arm, {})[name] = {**summary, "n": len(runs), "source": " and ".join(sources)}
    return out


class _Points:
    """One run's finite values of a curve at its logged steps, kept as the two lists (the usual
    case: turned into a {step: value} dict only when runs logged at different steps)."""

    __slots__ = ("steps", "values")

    def __init__(self, steps, values):
        self.steps, self.values = steps, values

    def as_dict(self) -> dict:
        return {step: float(v) for step, v in zip(self.steps, self.values)}


def _same_steps_summary(runs) -> dict | None:
    """_summary at C speed when every run logged the same increasing steps (a sweep's runs do);
    None otherwise. Each step's values are one contiguous row, reduced as _summary reduces them."""
    first = runs[0]
    if not all(isinstance(p, _Points) for p in runs) or any(p.steps != first.steps for p in runs[1:]):
        return None
    steps = first.steps
    if any(b <= a for a, b in zip(steps, steps[1:])):
        return None
    values = np.ascontiguousarray(np.array([p.values for p in runs], dtype=float).T)  # steps x runs
    with np.errstate(all="ignore"):
        mean = values.mean(axis=1)
        std = stats.exact_std(values, axis=1) if len(runs) > 1 else np.zeros(len(steps))  # equal runs: 0
    keep = np.isfinite(mean) & np.isfinite(std)
    if not keep.all():
        return None
    return {"step": list(steps), "mean": mean.tolist(), "std": std.tolist(), "count": [len(runs)] * len(steps)}


def _summary(runs) -> dict:
    """step, mean, std (ddof=1; 0 from one run) and count at every step some run logged."""
    runs = [p.as_dict() if isinstance(p, _Points) else p for p in runs]
    steps, mean, std, count = [], [], [], []
    for step in sorted({step for points in runs for step in points}):
        values = np.array([points[step] for points in runs if step in points], dtype=float)
        with np.errstate(all="ignore"):
            m = float(values.mean())
            s = stats.exact_std(values) if len(values) > 1 else 0.0
        if not (math.isfinite(m) and math.isfinite(s)):
            continue
        steps.append(step)
        mean.append(m)
        std.append(s)
        count.append(len(values))
    return {"step": steps, "mean": mean, "std": std, "count": count}
