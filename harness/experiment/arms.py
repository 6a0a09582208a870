"""The arms of an experiment: each arm's config from the base and ``ab``, and the single-factor guard.

An experiment is the base config plus ``ab``: the ONE config path (``ab.factor``) where arms differ
and each arm's value there. ``arm_configs`` composes every arm and proves that the arms differ only
under the factor; ``pairing_expectation`` says which fingerprints arms of one seed must share.
"""

from __future__ import annotations

import copy
from typing import Optional

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from harness import HarnessError
from harness.experiment.identity import plain as _plain, under as _under
from harness.results import flatten as _flatten

_FACTOR_FORBIDDEN = ("seed", "arm", "resume", "progress", "logger", "stats", "ab", "experiment_name", "repro")


class ExperimentError(ValueError, HarnessError):
    """The experiment is misconfigured, or its runs cannot be trusted; the message says why."""


class PairingError(ExperimentError):
    pass


# -- arms ---------------------------------------------------------------------------------------


def check_ab(cfg: DictConfig) -> None:
    ab = cfg.ab
    factor = ab.factor
    if not factor or not isinstance(factor, str):
        raise ExperimentError("ab.factor is empty: name the ONE config path where arms differ, e.g. loss.label_smoothing.")
    head = factor.split(".")[0]
    if head in _FACTOR_FORBIDDEN:
        raise ExperimentError(
            f"ab.factor={factor!r} is not a training setting: a factor must be a path under "
            "data, model, optim, loss, determinism, train, device or precision."
        )
    if OmegaConf.select(cfg, factor, default=_Missing) is _Missing:
        top = ", ".join(k for k in cfg.keys() if k not in _FACTOR_FORBIDDEN)
        raise ExperimentError(
            f"ab.factor={factor!r} does not exist in the config. It must be an existing path such as "
            f"loss.label_smoothing or optim (top-level keys: {top})."
        )
    if len(ab.arms) < 2:
        raise ExperimentError(
            f"ab.arms has {len(ab.arms)} arm(s) ({', '.join(ab.arms) or 'none'}): an A/B experiment needs "
            "at least two. Choose an experiment that declares them (e.g. +experiment=loss_ab), or add "
            "arms on the command line: +ab.arms.A=0.0 +ab.arms.B=0.1."
        )
    for name in ab.arms:
        if not str(name) or any(c in str(name) for c in "/=\\ ,"):
            raise ExperimentError(f"ab.arms: arm name {name!r} must be non-empty with no '/', '=', ',' or spaces.")
    if len(ab.seeds) == 0:
        raise ExperimentError("ab.seeds is empty: give at least one seed, e.g. ab.seeds=[0,1,2,3,4,5,6,7,8,9].")
    seeds = list(ab.seeds)
    if any(not isinstance(s, int) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ExperimentError(f"ab.seeds={seeds} must be distinct non-negative integers.")
    if cfg.arm is not None and cfg.arm not in ab.arms:
        raise ExperimentError(f"arm={cfg.arm!r} is not an arm of this experiment; arms: {', '.join(ab.arms)}.")
    from harness.config.preflight import seed_problems

    problems = seed_problems(cfg.seed, cfg.get("seeds"))
    if problems:
        raise ExperimentError(problems[0])


class _Missing:
    pass


def arm_configs(cfg: DictConfig, *, sources: Optional[dict] = None) -> dict[str, DictConfig]:
    """Each arm's config: the base with the arm's value placed at ab.factor, resolved and guarded.

    A mapping placed on a subtree merges into it (keys it does not name keep the base values).
    Raises ExperimentError if any resolved key outside ab.factor differs between arms. ``sources``,
    when given, receives each arm's config before its interpolations resolve (resolve_arms).
    """
    check_ab(cfg)
    factor = cfg.ab.factor
    arms = {}
    for name, value in cfg.ab.arms.items():
        arm = copy.deepcopy(cfg)
        target = OmegaConf.select(arm, factor)
        is_tree = OmegaConf.is_config(target)
        if is_tree and not OmegaConf.is_dict(value):
            raise ExperimentError(
                f"ab.arms.{name}: ab.factor={factor!r} is a subtree, so the arm's value must be a mapping "
                f"of keys under it (got {value!r})."
            )
        if not is_tree and OmegaConf.is_config(value):
            raise ExperimentError(
                f"ab.arms.{name}: ab.factor={factor!r} is a single value, but the arm gives a mapping "
                f"({OmegaConf.to_container(value)}). Use a subtree as the factor, or one value per arm."
            )
        # A mapping merges into the subtree (keys it does not name keep the base values), except
        # when it names another _target_: then it replaces the node, since the base's kwargs
        # (SGD's momentum) mean nothing to the new target (AdamW).
        merge = not (is_tree and "_target_" in value and value["_target_"] != target.get("_target_"))
        try:
            OmegaConf.update(arm, factor, value, merge=merge)  # the schema checks keys and types
            arm.arm = str(name)
            if sources is not None:
                sources[str(name)] = (copy.deepcopy(arm), _show(value))
            OmegaConf.resolve(arm)
        except OmegaConfBaseException as e:
            raise ExperimentError(f"ab.arms.{name}: the value {_show(value)} cannot be placed at {factor}: {e}") from None
        arms[str(name)] = arm
    _guard(arms, factor)
    return arms


def resolve_arms(sources: dict, factor: str, seed: int) -> dict[str, DictConfig]:
    """arm_configs of the config narrowed to ``seed``, from arm_configs' ``sources``: resolved now,
    as a sweep job resolves its config when it starts (an ``oc.env`` read then, say), and guarded."""
    arms = {}
    for name, (source, shown) in sources.items():
        arm = copy.deepcopy(source)
        try:
            with open_dict(arm):
                arm.seed = int(seed)
            OmegaConf.resolve(arm)
        except OmegaConfBaseException as e:
            raise ExperimentError(f"ab.arms.{name}: the value {shown} cannot be placed at {factor}: {e}") from None
        arms[name] = arm
    _guard(arms, factor)
    return arms


def _guard(arms: dict, factor: str) -> None:
    """Arms may differ only under the factor (an interpolation can couple another key)."""
    flat = {name: _flatten(_drop(_plain(a), ("ab", "arm", "seed"))) for name, a in arms.items()}
    first = next(iter(flat))
    for name, f in flat.items():
        changed = sorted(k for k in set(f) | set(flat[first]) if f.get(k, _Missing) != flat[first].get(k, _Missing))
        outside = [k for k in changed if not _under(k, factor)]
        if outside:
            raise ExperimentError(
                f"arms {first} and {name} differ outside ab.factor={factor!r}, at: {', '.join(outside)}. "
                "An A/B comparison must change exactly one thing; check interpolations such as "
                f"${{{factor}}} elsewhere in the config, or make the factor the common parent."
            )


def _show(value) -> str:
    return repr(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value)


def _drop(d: dict, keys) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def pairing_expectation(factor: str) -> dict:
    """Which fingerprints arms of one seed must share, given what the factor may change."""
    head = factor.split(".")[0]
    return {
        "init": head not in ("model", "code"),  # a different model has different initial weights
        # batch size, epochs, data change the order; another revision of the code may change both
        "data_order": head not in ("data", "train", "code"),
    }


def factor_value(cfg: DictConfig, factor: str):
    v = OmegaConf.select(cfg, factor)
    return OmegaConf.to_container(v, resolve=True, enum_to_str=True) if OmegaConf.is_config(v) else getattr(v, "value", v)
