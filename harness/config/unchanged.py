"""Overrides that leave the composed config as it was: ``determinism.threads=1`` typed where the
experiment's yaml already says 1. Such an override names no output folder, so typing it again
resumes the experiment's folder instead of training every unit in a new one."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterable

_ABSENT = object()
_NAMING = [True]  # off while compose() builds a config without its hydra node: no folder to name


@contextmanager
def no_folder_name():
    """Skip the check (a second composition) where the config's folder name is thrown away."""
    _NAMING.append(False)
    try:
        yield
    finally:
        _NAMING.pop()


def _candidates(overrides: Iterable[str], groups, skip=()) -> dict:
    """key -> override for each plain ``key=value`` (no +, ++ or ~, no sweep, no config group, the
    key given once and no other override's key under it or above it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    keys = [p.key_or_group for p in parsed]
    out = {}
    for p in parsed:
        key = p.key_or_group
        if (p.is_add() or p.is_force_add() or p.is_delete() or p.is_sweep_override() or p.package is not None
                or p.is_hydra_override() or "/" in key or key in groups or key in skip or keys.count(key) > 1
                or any(k != key and (k.startswith(key + ".") or key.startswith(k + ".")) for k in keys)):
            continue
        out[key] = p.input_line
    return out


def _flat(cfg) -> dict:
    from omegaconf import OmegaConf

    from harness.results import flatten

    data = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    data.pop("hydra", None)
    return flatten(data)


def unchanged_keys(cfg, overrides, recompose: Callable, groups=(), skip=()) -> list:
    """The keys of those ``overrides`` whose value ``cfg`` (composed with them all) already had
    without them. ``recompose(overrides)`` composes the same config from other overrides; the config
    composed without the candidates must differ from ``cfg`` at no key but theirs (else it is not the
    same config and nothing is claimed unchanged). Any failure claims nothing: the folder is named.
    Keys in ``skip`` (left out of the name already) are not asked about."""
    candidates = _candidates(overrides, set(groups), set(skip))
    if not candidates or any(a.startswith(("--config-name", "-cn")) for a in sys.argv):
        return []  # another primary config than the one recompose builds: no claim
    kept = [str(o) for o in overrides if str(o) not in candidates.values()]
    try:
        full, base = _flat(cfg), _flat(recompose(kept))
    except Exception:  # noqa: BLE001 - a config that cannot be composed again is simply named in full
        return []
    differing = {k for k in full.keys() | base.keys() if full.get(k, _ABSENT) != base.get(k, _ABSENT)}
    if any(not any(k == c or k.startswith(c + ".") for c in candidates) for k in differing):
        return []
    return [key for key in candidates if not any(k == key or k.startswith(key + ".") for k in differing)]


def unchanged_in_hydra(root, task_overrides, named_already=()) -> list:
    """unchanged_keys while Hydra composes ``root`` (the exclude_keys resolver): the config composed
    again by Hydra's own loader, with the same hydra overrides (search path, launcher) and config."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    if not _NAMING[-1] or root is None or not GlobalHydra.instance().is_initialized() or OmegaConf.select(root, "hydra") is None:
        return []
    hydra_overrides = [str(o) for o in OmegaConf.select(root, "hydra.overrides.hydra", default=None) or ()]
    name = OmegaConf.select(root, "hydra.job.config_name", default=None, throw_on_missing=False) or "config"
    groups = set(OmegaConf.select(root, "hydra.runtime.choices", default=None) or {})
    task = [str(o) for o in task_overrides or ()]

    def recompose(overrides):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        sweep = any(p.is_sweep_override() for p in OverridesParser.create().parse_overrides(overrides))
        loader = GlobalHydra.instance().config_loader()
        return loader.load_configuration(config_name=name, overrides=[*hydra_overrides, *overrides],
                                         run_mode=RunMode.MULTIRUN if sweep else RunMode.RUN)

    return unchanged_keys(root, task, recompose, groups, skip=named_already)
