"""Everything a run needs, checked in the seconds before the first one.

Hydra's schema already refused unknown keys and wrong types at compose time. Here: ranges, the
statistics settings, every ``_target_`` (imports, takes its keys), the cheap components built for
real (a loss term checks its values, an optimizer its learning rate against a dummy parameter),
the training function's signature, and the data loaded once (cached for the runs). A problem is
one paragraph naming the key, the value and what is allowed; nothing has been written yet.
"""

from __future__ import annotations

import inspect
import math
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from harness import HarnessError
from harness.config.ledger_spec import ledger_problem
from harness.training.threads import is_auto, uses_gpu
from harness.training.components import ComponentError, check_node, instantiate, is_node, resolve_callable
from harness.integrations.command_spec import config_cmd_problem, is_command, problems as command_problems
from harness.integrations.ranks.nproc_spec import ranks_problem

BUILTIN_LOOP = "harness.builtin.loop.train"


class PreflightError(ValueError, HarnessError):
    """The config cannot run; the message lists every problem found."""


def _v(x):
    return getattr(x, "value", x)


def _int_at_least(problems, key, value, low, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        more = " or null" if allow_none else ""
        problems.append(f"{key}={value!r} must be an integer >= {low}{more}.")


def check_settings(cfg: DictConfig, arm_names) -> list[str]:
    """Ranges of the harness's own keys (the schema checked their types)."""
    p: list[str] = []
    t = cfg.train
    _int_at_least(p, "train.epochs", t.epochs, 1)
    _int_at_least(p, "train.max_steps", t.max_steps, 1, allow_none=True)
    if t.max_steps is not None and t.max_steps < 1:
        p[-1] += " (null means: train for train.epochs epochs)"
    _int_at_least(p, "train.batch_size", t.batch_size, 1)
    _int_at_least(p, "train.eval_batch_size", t.eval_batch_size, 1)
    _int_at_least(p, "train.log_every", t.log_every, 1)
    _int_at_least(p, "train.num_workers", t.num_workers, 0)
    d = cfg.determinism
    if not is_auto(d.threads):
        _int_at_least(p, "determinism.threads", d.threads, 1)
        if p and p[-1].startswith("determinism.threads="):
            p[-1] = p[-1][:-1] + " or auto (the cores free at start)."
    if d.cudnn_benchmark and _v(d.mode) != "off":
        p.append(f"determinism.cudnn_benchmark=true is not allowed with determinism.mode={_v(d.mode)}: it picks "
                 "convolution algorithms by timing, which changes the bits. Use determinism.mode=off.")
    _int_at_least(p, "repro.keep_step_weights", cfg.repro.keep_step_weights, 0)
    cmd_problem = config_cmd_problem(cfg.get("train"), OmegaConf.select(cfg, "ab.factor", default=None,
                                                                        throw_on_resolution_failure=False))
    if cmd_problem:  # an empty train.cmd: before the declaration or anything else is written
        p.append(cmd_problem)
    p += ranks_problem(cfg.get("train"), lambda: uses_gpu(cfg))
    p += seed_problems(cfg.get("seed"), cfg.get("seeds"))
    if lock_timeout_problem(cfg.get("lock_timeout")):
        p.append(lock_timeout_problem(cfg.get("lock_timeout")))
    if ledger_problem(cfg.get("ledger")):  # the CLI refused it before Hydra wrote .hydra/ (precheck.py)
        p.append(ledger_problem(cfg.get("ledger")))
    if _v(cfg.device) == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.append("device=cuda, but torch.cuda.is_available() is False here. Use device=cpu or device=auto.")

    from harness.config.declaration import Declaration
    from harness.config.metric_spec import DeclarationError

    try:  # stats and ab as declared: the same sentences every tool gives (harness/config/declaration.py)
        declaration = Declaration.from_config(cfg)
    except DeclarationError as e:
        p.append(str(e))
        declaration = None
    _int_at_least(p, "stats.bootstrap_resamples", cfg.stats.bootstrap_resamples, 100)
    if declaration is not None and declaration.sequential is not None:
        from harness.config.sequential_design import settings_problems

        p += settings_problems(declaration)
    return p


def check_train_fn(cfg: DictConfig) -> list[str]:
    if is_command(cfg.train):  # a command arm: its keys are checked per arm (check_components), not a signature
        return []
    try:
        fn = resolve_callable(cfg.train.fn, "train.fn")
    except ComponentError as e:
        return [str(e)]
    kwargs = OmegaConf.to_container(cfg.train.kwargs, resolve=True)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []  # no signature to check
    params = list(sig.parameters.values())
    given = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:2]  # (cfg, run)
    takes = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in given]
    unknown = [] if any(p.kind is p.VAR_KEYWORD for p in params) else [k for k in kwargs if k not in takes]
    if unknown:
        return [f"train.kwargs.{unknown[0]}: train.fn={cfg.train.fn} cannot be called as fn(cfg, run, "
                f"**train.kwargs): it takes no keyword argument {unknown[0]!r}"
                + (f" (nor {', '.join(repr(u) for u in unknown[1:])})" if len(unknown) > 1 else "")
                + ". Its keyword arguments: "
                + (f"{', '.join(takes)}." if takes else
                   f"none besides ({', '.join(given)}); remove train.kwargs, or point train.fn at a function "
                   "that takes them.")]
    try:
        sig.bind(None, None, **kwargs)
    except TypeError as e:
        return [f"train.fn={cfg.train.fn} cannot be called as fn(cfg, run, **train.kwargs) with train.kwargs="
                f"{kwargs}: {e}. A training function takes (cfg, run) and, as keyword arguments, the keys "
                "of train.kwargs."]
    return []


def check_components(arm_cfg: DictConfig, seen: dict) -> list[str]:
    """Each _target_ node of one arm (a node already checked for another arm gives the same answer)."""
    p: list[str] = ranks_problem(arm_cfg.get("train"), lambda: uses_gpu(arm_cfg))
    if is_command(arm_cfg):  # the script builds its own data and model: its keys, not the config's nodes
        return p + command_problems(arm_cfg)
    builtin = arm_cfg.train.fn == BUILTIN_LOOP
    for key, call_site, required in (("data", (), builtin), ("model", (), builtin), ("loss", (), builtin),
                                      ("optim", ("params",), builtin), ("scheduler", ("optimizer",), False)):
        node = arm_cfg.get(key)
        if node is None:
            if required:
                p.append(f"{key} is null, but the built-in loop needs a {key} node (a mapping with a _target_).")
            continue
        if not is_node(node):
            if required or OmegaConf.is_dict(node):
                p.append(f"{key} must be a mapping with a _target_ (a dotted path) and its keyword arguments.")
            continue
        ident = (key, str(OmegaConf.to_container(node, resolve=True)))
        if ident in seen:
            p += seen[ident]
            continue
        before = len(p)
        try:
            check_node(node, key, call_site)
            _build_cheap(key, node, arm_cfg, builtin)
        except ComponentError as e:
            p.append(str(e))
        except ValueError as e:
            if key == "data" or type(e).__name__ in ("DataError", "LossError"):
                p.append(str(e))  # our own components' messages already name the key and the value
            else:
                p.append(f"{key}: {node['_target_']} refused its arguments {_kwargs(node)}: {e}")
        except Exception as e:  # noqa: BLE001 - the component's own refusal, named
            cause = e.__cause__ if type(e).__name__ == "InstantiationException" and e.__cause__ else e
            if type(cause).__name__ in ("DataError", "LossError"):
                p.append(str(cause))
            else:
                p.append(f"{key}: {node['_target_']} refused its arguments {_kwargs(node)}: "
                         f"{type(cause).__name__}: {cause}")
        seen[ident] = p[before:]
    return p


def _build_cheap(key, node, arm_cfg, builtin):
    """Build what is cheap to build, so its own checks run now. Data is loaded (and cached)."""
    import torch

    if key == "loss":
        return instantiate(node)
    if key == "optim":
        return _build_optimizer(node)
    if key == "scheduler":
        dummy = _checked_class(torch.optim.SGD)([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        return instantiate(node, optimizer=dummy)
    if key == "data":
        from harness.training.batches import cached_dataset

        return cached_dataset(node)
    if key == "model" and builtin:
        from harness.training.batches import cached_dataset

        try:
            ds = cached_dataset(arm_cfg.data)
        except Exception:  # noqa: BLE001 - the data's own problem is reported under data
            return None
        with torch.random.fork_rng(devices=[]):  # building draws from the global RNG: leave it as it was
            return instantiate(node, in_channels=ds.in_channels, num_classes=ds.num_classes, image_size=ds.image_size)
    return None


def _build_optimizer(node):
    """The optimizer against a dummy parameter, so that its own checks (a negative learning rate) run now:
    a torch optimizer as _checked_class makes it (a node with nested nodes or Hydra's own keys, or any
    other optimizer, as the training will build it)."""
    import torch

    params = [torch.nn.Parameter(torch.zeros(1))]
    cls = resolve_callable(node["_target_"], "optim._target_")
    given = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    kwargs = {k: v for k, v in given.items() if k != "_target_"}
    plain = all(not str(k).startswith("_") and not isinstance(v, dict) for k, v in kwargs.items())
    checked = _checked_class(cls) if plain else cls
    if checked is cls:
        return instantiate(node, params=params)
    return checked(params=params, **kwargs)


def _checked_class(cls):
    """A torch optimizer class whose construction runs the same checks without importing torch._dynamo.

    torch wraps Optimizer.add_param_group to keep torch.compile out, and the wrapper's first call imports
    torch._dynamo (1-2 s): paid for nothing by a process that never steps an optimizer (a sweep's
    launching process, a job whose training function builds none). A subclass with the unwrapped method
    checks the same; a class with its own add_param_group (or a torch without the wrapper) is left as is."""
    import torch

    base = torch.optim.Optimizer.add_param_group
    unwrapped = getattr(base, "__wrapped__", None)
    if unwrapped is None or not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)
                                 and cls.add_param_group is base):
        return cls
    return type(cls.__name__, (cls,), {"add_param_group": unwrapped})


def _kwargs(node) -> str:
    items = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if not str(k).startswith("_")}
    return ", ".join(f"{k}={v!r}" for k, v in items.items()) or "(none)"


def preflight(cfg: DictConfig, arms: dict) -> None:
    """Raise PreflightError listing every problem; return quietly when the experiment can start."""
    problems = check_settings(cfg, list(arms))
    problems += check_train_fn(cfg)
    seen: dict = {}
    per_arm = {name: check_components(arm_cfg, seen) for name, arm_cfg in arms.items()}
    for name, found in per_arm.items():
        for problem in found:
            # a problem in every arm is the config's; in some arms only, it comes from their values
            shared = all(problem in other for other in per_arm.values())
            text = problem if shared else f"ab.arms.{name}: {problem}"
            if text not in problems:
                problems.append(text)
    if cfg.repro.code_paths:
        from pathlib import Path

        for path in cfg.repro.code_paths:
            if not Path(path).expanduser().exists():
                problems.append(f"repro.code_paths: {path!r} does not exist (paths are relative to the folder "
                                "the command runs in).")
    _refuse(problems)
    _pin_auto_threads([cfg, *arms.values()])


def seed_problems(seed, seeds) -> list[str]:
    """One rule for every seed a run takes: ``seed`` and each stream's ``seeds.<name>`` (a mapping) are
    non-negative integers (ab.seeds' own sentence names the list; a negative seed would reach torch,
    which refuses it, or wrap around into another run's seed)."""
    given = [("seed", seed)] + [(f"seeds.{k}", v) for k, v in (seeds or {}).items()]
    return [f"{key}={value} must be a non-negative integer." for key, value in given
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0)]


def preflight_cheap(cfg: DictConfig) -> None:
    """The ranges of the harness's own keys, before torch is imported and the data loaded: a bad
    value is refused in well under a second (the full ``preflight`` repeats them with the rest)."""
    _refuse(check_settings(cfg, list(cfg.ab.arms)))


def _refuse(problems: list[str]) -> None:
    if problems:
        if len(problems) == 1:
            raise PreflightError(problems[0] + " Nothing was run.")
        raise PreflightError(f"{len(problems)} problems, found before any run (nothing was run):\n"
                             + "\n".join(f"  - {x}" for x in problems))


def _pin_auto_threads(configs) -> None:
    """A tool that composed its own config (noise audit, golden, audit) reaches here with
    determinism.threads=auto: resolve it once, the same for every arm (harness/training/threads.py).
    ``execute`` resolved it already, so an experiment never measures twice."""
    todo = [c for c in configs if is_auto(c.determinism.threads)]
    if todo:
        from harness.training.threads import measure_load, resolve_threads

        load = measure_load()
        for c in todo:
            resolve_threads(c, say=lambda m: None, measure=lambda: load)


def lock_timeout_problem(value) -> Optional[str]:
    """Why a lock_timeout value is refused (None: it is fine). A non-number is refused by the schema
    when the config is composed; a negative or non-finite number here, before any run."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return (f"lock_timeout={value!r} is not allowed: it is the number of seconds a run waits for another "
                "process's lock on its (seed, arm) folder before giving up, so a number >= 0 (0: do not wait), "
                "or null to wait as long as the holder runs.")
    return None
