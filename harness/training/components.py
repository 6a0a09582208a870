"""One door for pluggable components: ``_target_`` nodes and the training function.

A model, dataset, loss term, optimizer or LR scheduler is a Hydra ``_target_`` node: a dotted path
to a class or function plus the keyword arguments it is called with. Ours and a researcher's go
through the same three calls:

- ``check_node(node, key)`` before any run: the target imports, and every key of the node is a
  parameter it takes (a typo such as ``+loss.label_smothing=0.1`` fails here, naming the key and
  what is allowed), recursively for nested nodes;
- ``instantiate(node, **call_site)``: ``hydra.utils.instantiate`` with ``_convert_="all"`` (plain
  lists and dicts reach the target; a flat node is called directly with the same arguments).
  Call-site kwargs that the target does not take are left out, so a loop can offer
  ``num_classes=...`` to any model and each model takes what it names;
- ``resolve_callable(path, key)``: the training function named by ``train.fn``.

Every ``instantiate`` of the harness goes through here, so a later Hydra that wants a whitelist of
targets is one change (Hydra 1.5 deprecates unrestricted target resolution).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

from omegaconf import DictConfig, ListConfig, OmegaConf

from harness import HarnessError

# Hydra's reserved keys in a node: never passed to the target.
RESERVED = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")


class ComponentError(ValueError, HarnessError):
    """A component cannot be imported or does not take the keys its node gives it."""


def is_node(value) -> bool:
    return (isinstance(value, dict) or OmegaConf.is_dict(value)) and "_target_" in value


def resolve_callable(path: str, key: str) -> Callable:
    """Import 'package.module.name' (a class or function); a clear ComponentError when it fails."""
    if not isinstance(path, str) or "." not in path.strip("."):
        raise ComponentError(
            f"{key}={path!r} is not a dotted path. Give 'package.module.Name' of a class or function "
            "that Python can import (your package installed, or its folder on PYTHONPATH)."
        )
    module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ComponentError(
            f"{key}={path!r}: the module {module_name!r} cannot be imported ({e}). Install your package "
            "(pip install -e .) or put its folder on PYTHONPATH, and check the spelling."
        ) from None
    except Exception as e:  # noqa: BLE001 - an error inside the user's module, reported as such
        raise ComponentError(f"{key}={path!r}: importing {module_name!r} raised {type(e).__name__}: {e}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None)))
        raise ComponentError(
            f"{key}={path!r}: {module_name} has no {attr!r}. Callables there: {', '.join(public[:20]) or 'none'}."
        ) from None
    if not callable(obj):
        raise ComponentError(f"{key}={path!r} is not callable (it is a {type(obj).__name__}).")
    return obj


def parameters(target: Callable) -> tuple[list[str], bool]:
    """(names of keyword-passable parameters, accepts **kwargs)."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return [], True  # a builtin without a signature: cannot check, let the call decide
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return names, any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def check_node(node, key: str, call_site: tuple[str, ...] = ()) -> Callable:
    """The node's target, after checking that it imports and takes every key the node gives.

    ``call_site``: names the caller passes itself (e.g. ``params`` for an optimizer); a node that
    also sets one of them is refused, since the caller's value would silently win.
    """
    if not is_node(node):
        raise ComponentError(f"{key} must be a mapping with a _target_ (a dotted path), got {_show(node)}.")
    target = resolve_callable(node["_target_"], f"{key}._target_")
    names, var_kw = parameters(target)
    given = [str(k) for k in node.keys() if str(k) not in RESERVED]
    if not var_kw:
        unknown = [k for k in given if k not in names]
        if unknown:
            allowed = [n for n in names if n not in call_site and n not in ("self", "cls")]
            raise ComponentError(
                f"{key}.{unknown[0]}: {node['_target_']} takes no parameter {unknown[0]!r}"
                + (f" (nor {', '.join(repr(u) for u in unknown[1:])})" if len(unknown) > 1 else "")
                + f". The keys under {key} are its keyword arguments; allowed: {', '.join(allowed) or 'none'}."
            )
    clash = [k for k in given if k in call_site]
    if clash:
        raise ComponentError(
            f"{key}.{clash[0]} is passed by the training loop itself ({', '.join(call_site)}); remove it from the config."
        )
    for k in given:
        value = node[k]
        if is_node(value):
            check_node(value, f"{key}.{k}")
    return target


def instantiate(node, /, **call_site) -> Any:
    """hydra.utils.instantiate with plain containers; call-site kwargs the target does not take are dropped."""
    if not is_node(node):
        raise ComponentError(f"instantiate needs a mapping with a _target_, got {_show(node)}.")
    target = None
    if call_site:
        target = resolve_callable(node["_target_"], "_target_")
        names, var_kw = parameters(target)
        if not var_kw:
            call_site = {k: v for k, v in call_site.items() if k in names}
    direct = _direct_call(node, call_site, target)
    if direct is not None:
        target, kwargs = direct
        return target(**kwargs)
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate as hydra_instantiate

    try:
        return hydra_instantiate(node, _convert_="all", **call_site)
    except InstantiationException as e:
        if e.__cause__ is not None:
            raise e.__cause__  # the target's own error (its type and message), not Hydra's wrapper
        raise


def _direct_call(node, call_site: dict, target: Callable | None = None) -> tuple[Callable, dict] | None:
    """(target, kwargs) when Hydra's instantiate would only call the target with the node's plain values
    and the call-site objects: no nested _target_ node, no reserved key but _target_, no container
    among the call-site values (Hydra would merge those into the config first). Else None: Hydra
    does it. Hydra deep-copies and merges the node for every call (~5 ms, a unit builds 3-4 nodes:
    1.3% of the default experiment's run); this is the same call without that. ``target``: the
    node's, when the caller resolved it already."""
    if OmegaConf.is_config(node):  # plain copies, as Hydra's _convert_="all" makes them; ??? raises as there
        plain = OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
    elif _holds_container(node.values()):
        return None  # a plain dict's containers: Hydra copies them
    else:
        plain = node
    if any(k in plain for k in RESERVED[1:]) or _has_node(list(plain.values())) or _holds_container(call_site.values()):
        return None
    if target is None:
        try:
            target = resolve_callable(plain["_target_"], "_target_")
        except ComponentError:  # a path only Hydra's locator finds (a class's attribute): Hydra does it
            return None
    kwargs = {str(k): v for k, v in plain.items() if k != "_target_"}
    kwargs.update(call_site)  # Hydra's merge: a call-site value wins
    return target, kwargs


def _holds_container(values) -> bool:
    return any(isinstance(v, (dict, list, tuple)) or OmegaConf.is_config(v) for v in values)


def _has_node(value) -> bool:
    if isinstance(value, dict):
        return "_target_" in value or any(_has_node(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_node(v) for v in value)
    return False


def targets(cfg) -> list[str]:
    """Every ``_target_`` in a config tree (and ``train.fn``): the code a run depends on."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, (DictConfig, dict)):
            for k, v in node.items():
                if k == "_target_" and isinstance(v, str):
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(node, (ListConfig, list, tuple)):
            for v in node:
                walk(v)

    walk(OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg)
    fn = OmegaConf.select(cfg, "train.fn") if OmegaConf.is_config(cfg) else (cfg.get("train") or {}).get("fn")
    if isinstance(fn, str):
        found.append(fn)
    return sorted(set(found))


def _show(value) -> str:
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."
