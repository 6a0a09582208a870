"""The rules for ``ab.conditions`` (an A/B under several declared conditions), checked when the
declaration is made: what a condition may set (data, model, optimiser, ... around the A/B) and what
it may not (the arms, seeds and analysis, the same under every condition). Pure: no config reading.
"""

from __future__ import annotations

from collections.abc import Mapping


# What a condition may not set: the experiment's own design (the same arms, seeds and analysis under
# every condition), and what only names or narrows a run.
_CONDITION_FORBIDDEN = ("ab", "seed", "arm", "experiment_name", "hydra", "logger", "resume", "progress", "tables",
                        "repro", "lock_timeout")


def condition_problems(conditions, *, factor: str, sequential: bool, metric) -> list:
    """Sentences for ab.conditions values that cannot run: refused before any run."""
    if not conditions:
        return []
    if not isinstance(conditions, Mapping):
        return [f"ab.conditions={conditions!r} must map a condition's name to its list of config overrides, "
                "e.g. {digits: [data=digits], synthetic: [data=synthetic]}."]
    problems = []
    if len(conditions) < 2:
        problems.append(f"ab.conditions has {len(conditions)} condition ({', '.join(map(str, conditions))}): an effect "
                        "across conditions needs at least two. For one, put its overrides on the command line.")
    if sequential:
        problems.append("ab.conditions cannot be combined with ab.sequential.enabled=true: the sequential design "
                        "decides when ONE comparison has enough seeds, and a stopping rule for the average across "
                        "conditions is not built. Supported: fixed seeds (ab.seeds) across conditions, or a "
                        "sequential run of each condition on its own (its overrides on the command line).")
    for name, overrides in conditions.items():
        where = f"ab.conditions.{name}"
        if not str(name) or any(c in str(name) for c in "/=\\ ,"):
            problems.append(f"{where}: a condition's name must be non-empty with no '/', '=', ',' or spaces.")
        if isinstance(overrides, str) or not isinstance(overrides, (list, tuple)) or not overrides:
            problems.append(f"{where}={overrides!r} must be a non-empty list of config overrides, e.g. "
                            "[data=synthetic] or [model.width=32].")
            continue
        for text in overrides:
            key = str(text).split("=", 1)[0].lstrip("+~")
            if not isinstance(text, str) or "=" not in text or not key:
                problems.append(f"{where}: {text!r} is not a config override KEY=VALUE (e.g. data=synthetic).")
            elif key == "stats" or key.startswith("stats."):
                problems.append(
                    f"{where}: {text!r} changes what is measured. Every condition's effect is read in the declared "
                    f"units of stats.metric ({metric}), so that the effects can be averaged on one scale; a condition "
                    f"measured on another metric or unit cannot be put on that scale. Declare the metric once, outside "
                    f"ab.conditions, or run that condition as an experiment of its own.")
            elif factor and (key == factor or key.startswith(factor + ".")):
                problems.append(f"{where}: {text!r} sets the experiment's factor ({factor}), where each arm places its "
                                f"own value; a condition changes the setting around the A/B, never the arms. Change "
                                f"the arms with ab.arms.NAME=VALUE.")
            elif key.split(".")[0] in _CONDITION_FORBIDDEN:
                problems.append(f"{where}: {text!r} is not a training setting; a condition may set data, model, "
                                f"optim, scheduler, loss, train, determinism, device or precision (the arms, seeds "
                                f"and analysis are the same under every condition).")
    return problems
