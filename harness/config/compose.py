"""Composing a config as ``python -m harness`` does, without a CLI, and the overrides' own rules:
an override of ``ab.arms`` as a whole replaces the arms, the factor's own key is the arms', and job
folders are named by what they hold."""

from __future__ import annotations

import hashlib
import re
from typing import Optional

from harness.config.schema import Config
from harness.results import CHANGES_NO_BIT, REPRO_NOT_IN_IDENTITY


def compose_error(e: Exception) -> str:
    """Hydra's message says what; its cause (OmegaConf's) often says why, e.g. the allowed values."""
    text = str(e).split("Config search path")[0]
    if e.__cause__ is not None and str(e.__cause__) not in text:
        text += f" ({str(e.__cause__).splitlines()[0]})"
    return " ".join(text.split()).rstrip(".") + "."


_WHOLE = ("ab.arms", "ab.conditions")  # a mapping given for these is exactly their entries
_FLAT_LIST = re.compile(r"\[([^\[\]{}'\"]*)\]")


def _quote_items(m) -> str:
    items = [i.strip() for i in m.group(1).split(",")]
    return "[" + ", ".join(f'"{i}"' if "=" in i else i for i in items) + "]"


def typed_overrides(overrides) -> list:
    """The overrides as a user writes them, in the form Hydra's grammar takes.

    ``ab.arms={a: {lr: 0.01}, b: {...}}`` and ``ab.conditions={...}`` set them all, new names
    included: given as ``++`` (a struct node takes no new key: "Key 'a' is not in struct"), and
    replace_whole_arms keeps exactly these. One arm's key stays struct, so a misspelt
    ``ab.arms.b=0.2`` is still refused (``+ab.arms.C=0.3`` adds one). A condition is a list of
    overrides, written as in the yaml (``ab.conditions={a: [data=digits], b: [data=synthetic]}``,
    ``+ab.conditions.c=[model.width=32]``); Hydra's grammar takes no ``=`` in an unquoted list item
    ("no viable alternative at input"), so those items are quoted.
    """
    out = []
    for text in map(str, overrides):
        key, eq, value = text.partition("=")
        name = key.lstrip("+~")
        if eq and (name == "ab.conditions" or name.startswith("ab.conditions.")):
            value = _FLAT_LIST.sub(_quote_items, value)
        if eq and key in _WHOLE and value.lstrip().startswith("{"):
            key = "++" + key
        out.append(f"{key}{eq}{value}")
    return out


def replace_whole_arms(cfg, overrides) -> None:
    """``ab.arms={A: 0.0}`` on the command line means exactly these arms (and ``ab.conditions={...}``
    exactly these conditions).

    Hydra merges a mapping given for a mapping key, so the experiment's own arms would silently
    stay; an override that assigns ab.arms as a whole (not ab.arms.B=..., +ab.arms.C=...) replaces them.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf, open_dict

    for text in typed_overrides(overrides):
        key = str(text).split("=", 1)[0].lstrip("+")
        if key not in _WHOLE:
            continue
        value = OverridesParser.create().parse_override(str(text)).value()
        if isinstance(value, dict):
            with open_dict(cfg):
                OmegaConf.update(cfg, key, OmegaConf.create(value), merge=False)


def factor_override_problem(cfg, overrides) -> Optional[str]:
    """A sentence when an override sets the factor's own key (or a key under it), else None.

    The arms place their values at ab.factor, so such a value would be silently replaced by each
    arm's: ``loss.label_smoothing=1.5`` with factor loss.label_smoothing is refused, pointing to
    ab.arms. Choosing a config group above the factor (``loss=focal``) is the base and is allowed,
    and so is ``+path=value``: Hydra only appends a key that does not exist yet, which creates the
    factor's path for the arms.
    """
    factor = str(cfg.ab.factor or "")
    if not factor:
        return None
    for text in map(str, overrides):
        if text.startswith("+") and not text.startswith("++"):
            continue
        key = text.split("=", 1)[0].lstrip("+~")
        if key == factor or key.startswith(factor + "."):
            arms = ", ".join(f"{a}={v}" for a, v in cfg.ab.arms.items())
            return (f"{text!r} sets the experiment's factor ({factor}), where each arm places its own value "
                    f"({arms or 'no arms yet'}); the value would be silently replaced. Change an arm's value "
                    f"with ab.arms.NAME=VALUE (ab.arms.B=0.2), add one with +ab.arms.NAME=VALUE, or choose "
                    f"another factor with ab.factor=PATH.")
    return None


def _dirname(override_dirname: str, *job) -> str:
    """Hydra folder name from the overrides that define the experiment; 'default' when none.

    Booleans are written in lower case (``repro.certificate=False`` and ``=false`` are one folder).
    With ``seed`` and ``arm`` (a sweep's job folder): ``<grid point>/seed=S,arm=A``, naming what the
    job holds (either left out when the job runs all of them) instead of Hydra's job number.
    """
    name = re.sub(r"(?<=[=,])(True|False)(?=,|$)", lambda m: m.group(1).lower(), override_dirname).replace("/", "_")
    name = short_name(re.sub(r"(^|,)\+\+(ab\.(arms|conditions)=)", r"\1\2", name))  # as typed (typed_overrides adds ++)
    if not job:
        return name or "default"
    held = ",".join(f"{key}={value}" for key, value in zip(("seed", "arm"), job) if value is not None)
    return "/".join(part for part in (name, held or "all") if part)


# A folder name is one path component: at most 255 bytes on the usual filesystems. A longer list of
# overrides is named by its start and a digest of all of it (Hydra keeps the full list in .hydra/).
MAX_NAME_BYTES = 160


def short_name(name: str) -> str:
    """``name`` as one path component: itself, or when too long its start and a digest of all of it."""
    data = name.encode()
    if len(data) <= MAX_NAME_BYTES:
        return name
    head = data[:MAX_NAME_BYTES - 24].decode(errors="ignore")
    head = head[:head.rfind(",")] if "," in head else head
    return f"{head},...-{hashlib.sha256(data).hexdigest()[:16]}"


# The keys that change no result (results.CHANGES_NO_BIT, the list the identity leaves out too) never
# name the output folder, so adding workers=1 or ledger.enabled=false to a command resumes its folder
# instead of training every unit again in a new one. seed/arm name a sweep's job folder instead; an
# experiment's own name is the folder's parent.
NOT_IN_NAME = ("seed", "arm", *CHANGES_NO_BIT, "experiment", "+experiment")


def not_in_name(task_overrides, sequential=False, sweeper="", _root_=None) -> list:
    """hydra.job.config.override_dirname.exclude_keys for these overrides: NOT_IN_NAME and every key
    under one of them (``logger.*``, ``ledger.*``), the ``repro.*`` keys that say how runs are checked
    (``repro.certificate=true`` on a finished folder certifies it, not a new one), the analysis-only ``stats.*`` keys where the runs
    are the same whatever they say (not under a sequential or racing design, which decides from them
    which runs to make), and an override that leaves the composed config ``_root_`` as it was.
    A changed ``stats.*`` key on a finished folder is a changed declaration: re-analysed, not retrained."""
    from harness.config.unchanged import unchanged_in_hydra

    design = bool(sequential) or any(n in str(sweeper) for n in ("Sequential", "Race"))
    keys = list(NOT_IN_NAME)
    for text in task_overrides or ():
        key = str(text).split("=", 1)[0].lstrip("+~")
        root = key.split(".", 1)[0]
        checked = key.startswith("repro.") and key.split(".", 1)[1] in REPRO_NOT_IN_IDENTITY  # how a run is checked
        if (root in CHANGES_NO_BIT or checked or (root == "stats" and not design)) and key not in keys:
            keys.append(key)
    return keys + unchanged_in_hydra(_root_, task_overrides, named_already=keys)


CONFIG_MODULE = "harness.conf"  # the configs shipped inside the package (pkg://harness.conf)


def compose(overrides=(), config_dirs=(), return_hydra_config: bool = False):
    """The config ``python -m harness [--config-dir D] OVERRIDES`` would build, without a CLI.

    ``config_dirs``: a researcher's own config folders, searched before the shipped ones (the same
    as ``--config-dir`` on the command line), so their ``experiment/``, ``model/`` ... files are found.
    """
    import os

    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_configs()
    overrides = typed_overrides(overrides)
    dirs = [os.path.abspath(os.fspath(d)) for d in config_dirs]
    if dirs:
        overrides = ["hydra.searchpath=[" + ",".join(f"file://{d}" for d in dirs) + "]"] + overrides
    from contextlib import nullcontext

    from harness.config.unchanged import no_folder_name

    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        with nullcontext() if return_hydra_config else no_folder_name():
            return hydra_compose("config", overrides=overrides, return_hydra_config=return_hydra_config)


def register_configs() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("harness_dirname"):
        OmegaConf.register_new_resolver("harness_dirname", _dirname)
    if not OmegaConf.has_resolver("harness_not_in_name"):
        OmegaConf.register_new_resolver("harness_not_in_name", not_in_name)
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    # Group files merge onto this schema, so they can only set keys it has.
    cs.store(name="harness_schema", node=Config)
