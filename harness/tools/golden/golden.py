"""Golden fingerprints: did my refactor change the numerics?

    python -m harness.golden save FILE [OVERRIDE ...]     run one (seed, arm), write FILE
    python -m harness.golden check FILE [OVERRIDE ...]    rerun what FILE describes, compare

``save`` composes the config from the Hydra overrides (as ``python -m harness`` would), runs ONE
(seed, arm) -- ``seed=``/``arm=`` from the overrides, else the first of ``ab.seeds``/``ab.arms`` --
and writes a small JSON file meant to be committed: the overrides, the resolved config and its
hash, a summary of the environment, the metrics, and the loss bits and parameter digest of every
step. ``check`` composes the same overrides again (plus any given after FILE, which win), reruns,
and compares every step: exit 0 when all are bit-identical, 1 naming the first divergent step (and
what changed in the config or environment), 2 on bad input.

``save --seeds N`` also records the declared metrics of N seeds; ``check`` where the bits differ
then reruns them and says whether the results are equivalent within the declared margin, changed,
or undecided (tools/golden/golden_stats.py; exit 0 identical, 3 equivalent, 1 changed, 4 undecided, 2 bad
input). ``check --ops`` replays both sides to the first divergent step and names the first aten op
whose bits differ (tools/diff/ops.py, as ``python -m harness.diff --ops``).

Bits are only promised on the same stack: the same torch version, device type and thread count.
A check on another stack says so, so a red CI job reads "new stack, re-save the golden" rather than
"the refactor changed the numerics". Keep goldens short (e.g. train.max_steps=50 data.train_limit=512).

``compose_config`` and ``select_run`` are shared with harness.audit and harness.noise_audit.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported
from omegaconf import OmegaConf

from harness import HarnessError
from harness.tools.args import add_config_dir, parse_args
from harness.tools.diff.diff import digest_parts, first_difference
from harness.results import NOT_IN_IDENTITY, differences, digests_version, load_steps, read_json, write_json
from harness.tools.golden import golden_ops, golden_stats
from harness.tools.golden.golden_words import _declaration, _primary_line, check_message

GOLDEN_SCHEMA = "harness.golden/1"
EXIT_OK, EXIT_DIFFERENT, EXIT_BAD_INPUT = 0, 1, 2  # and golden_stats: 3 equivalent, 4 undecided
# What the bits are promised on; a difference here is named in the check's message.
STACK_KEYS = ("torch", "device_type", "threads", "cuda", "cudnn", "device_name")
# Keys that change no bit (workers, logger, stats, ...: results.NOT_IN_IDENTITY) are no configuration
# difference; nor is repro (how a run is checked) nor the seed and arm, which the golden names itself.
NOT_NUMERICS = (*(k for k in NOT_IN_IDENTITY if k not in ("seed", "arm")), "repro")


class BadInput(ValueError, HarnessError):
    """A mistake the user can fix; the message names the thing and what is allowed."""


# -- composing one run (shared by the repro tools) ----------------------------------------------


def compose_config(overrides: list[str], config_dirs=()):
    """The composed config for these Hydra overrides, exactly as ``python -m harness`` builds it."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from harness.config import compose

    try:
        return compose(overrides, config_dirs=config_dirs)
    except (HydraException, OmegaConfBaseException) as e:
        from harness.config import compose_error

        text = compose_error(e)
        raise BadInput(
            f"the overrides {' '.join(overrides) or '(none)'} do not compose a config: {text} "
            "Overrides are the same as for python -m harness, e.g. train.max_steps=50 optim.lr=0.1 +experiment=loss_ab."
        ) from None


def select_run(cfg, overrides: list[str] = ()) -> tuple:
    """(arm config, seed, arm): the arm's resolved config, seed=/arm= when given, else the first.

    The arm's value wins at ab.factor, so an override there changes nothing: say so on stderr.
    """
    from harness.experiment.arms import factor_value
    from harness.experiment.arms import ExperimentError, arm_configs

    if len(cfg.ab.arms) == 0 and cfg.arm in (None, "base"):
        # No experiment chosen: the base config is the one run (named "base").
        base = copy.deepcopy(cfg)
        base.arm = "base"
        OmegaConf.resolve(base)
        seed = cfg.seed if cfg.seed is not None else cfg.ab.seeds[0]
        return base, int(seed), "base"
    try:
        arms = arm_configs(cfg)
    except ExperimentError as e:
        raise BadInput(str(e)) from None
    arm = cfg.arm if cfg.arm is not None else next(iter(arms))
    seed = cfg.seed if cfg.seed is not None else cfg.ab.seeds[0]
    factor = cfg.ab.factor
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key == factor or key.startswith(factor + "."):
            print(
                f"note: {key} is under ab.factor={factor}, where arm {arm} sets "
                f"{factor_value(arms[arm], factor)!r}: the override {o} has no effect on this run. "
                f"Pick another arm with arm=NAME, or change ab.arms.",
                file=sys.stderr,
            )
    return arms[arm], int(seed), str(arm)


def stack_summary(env: dict) -> dict:
    """The part of result.json's env that decides the bits, plus the device type on its own."""
    device = str(env.get("device", ""))
    return {
        "torch": env.get("torch"),
        "device_type": device.split(":")[0],
        "device": device,
        "device_name": env.get("device_name"),
        "threads": env.get("threads"),
        "cuda": env.get("cuda"),
        "cudnn": env.get("cudnn"),
        "python": env.get("python"),
        "mode": env.get("mode"),
    }


# -- save and check -----------------------------------------------------------------------------


def run_selected(overrides: list[str], config_dirs=()) -> dict:
    """Compose, run one (seed, arm), return its result dict (status "failed" when training failed)."""
    from harness.experiment.runner import run_one

    from harness.config.preflight import PreflightError, preflight

    arm_cfg, seed, arm = select_run(compose_config(overrides, config_dirs), overrides)
    try:
        preflight(arm_cfg, {arm: arm_cfg})
    except PreflightError as e:
        raise BadInput(str(e)) from None
    result, _ = run_one(arm_cfg, seed, arm)
    return result


def golden_record(result: dict, overrides: list[str], config_dirs=()) -> dict:
    fp = result["fingerprints"]
    return {
        "schema": GOLDEN_SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "overrides": list(overrides),
        "config_dirs": [str(Path(d).resolve()) for d in config_dirs],
        "seed": result["seed"],
        "arm": result["arm"],
        "config_hash": result["config_hash"],
        "code_version": result["code_version"],
        "env": stack_summary(result["env"]),
        "metrics": result["metrics"],
        "config": result["config"],
        "fingerprints": {
            "init": fp["init"],
            "data_order": fp["data_order"],
            "final": fp["final"],
            "steps": load_steps(result),
            "digests": digests_version(fp),
        },
    }


def load_golden(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"{path}: no such golden file. Write one with: python -m harness.golden save {path} [overrides ...]")
    try:
        golden = read_json(p)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: not a readable JSON file ({e}).") from None
    if not isinstance(golden, dict) or golden.get("schema") != GOLDEN_SCHEMA:
        raise BadInput(f"{path}: not a golden fingerprint file (expected \"schema\": \"{GOLDEN_SCHEMA}\").")
    return golden


def compare(golden: dict, result: dict) -> dict:
    """Step-by-step comparison of a rerun with the golden, and what differs around it."""
    g, r = golden["fingerprints"], {**result["fingerprints"], "steps": load_steps(result)}
    parts = digest_parts(g, r, g["steps"], r["steps"])
    loss_step, params_step = first_difference(g["steps"]["loss"], r["steps"]["loss"]), parts["first_params_step"]
    steps = [s for s in (loss_step, params_step) if s is not None]
    if g["init"] != r["init"]:
        steps.append(0)  # the initial weights already differ: "step 0"
    identical = not steps and g["final"] == r["final"] and parts["data_order_equal"] is not False
    return {
        "identical": identical,
        "first_divergent_step": None if identical else min(steps, default=len(g["steps"]["loss"])),
        "first_loss_step": loss_step,
        "first_params_step": params_step,
        "init_equal": g["init"] == r["init"],
        "data_order_equal": parts["data_order_equal"],
        "digests": parts["digests"],
        "steps": [len(g["steps"]["loss"]), len(r["steps"]["loss"])],
        "config_differences": differences(golden["config"], result["config"], ignore=NOT_NUMERICS),
        "stack_differences": [d for d in differences(golden["env"], stack_summary(result["env"])) if d[0] in STACK_KEYS],
    }


def _more_seeds(first: dict, n: int, overrides: list[str], config_dirs) -> list:
    """The golden's own run and the runs of the N - 1 seeds after it (same arm, same overrides)."""
    run = lambda seed: run_selected(list(overrides) + [f"seed={seed}", f"arm={first['arm']}"], config_dirs)  # noqa: E731
    return golden_stats.more_seeds(first, n, run)


def save(path: str, overrides: list[str], config_dirs=(), seeds: int | None = None, store_ops: bool = False) -> int:
    result = run_selected(overrides, config_dirs)
    if result["status"] != "completed":
        raise BadInput(f"the run (seed {result['seed']}, arm {result['arm']}) failed, so there are no fingerprints "
                       f"to save: {result['error']['message']}")
    if not any(o.lstrip("+").startswith("determinism.threads=") for o in overrides):
        # threads=auto depends on the load at the moment: the golden keeps the count its bits were made with
        overrides = list(overrides) + [f"determinism.threads={result['env']['threads']}"]
    record = golden_record(result, overrides, config_dirs)
    if seeds is not None:
        try:
            golden_stats.check_request(seeds, _declaration(result))
            runs = _more_seeds(result, seeds, overrides, config_dirs)
            record["statistical"] = golden_stats.record(runs, _declaration(result))
        except golden_stats.StatsInputError as e:
            raise BadInput(str(e)) from None
    if store_ops:
        try:
            record["ops"] = golden_ops.stored_stream(result)
        except golden_ops.ops.OpsError as e:
            raise BadInput(f"--ops: {e}") from None
    try:
        write_json(path, record)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e}.") from None
    n = len(record["fingerprints"]["steps"]["loss"])
    env = record["env"]
    print(
        f"golden saved: {path}: {n} steps of seed {record['seed']}, arm {record['arm']} "
        f"(torch {env['torch']}, {env['device_type']}, {env['threads']} threads; "
        f"{_primary_line(result)})"
        + (f"; declared metrics of {seeds} seeds" if seeds else "") + ". "
        f"Check with: python -m harness.golden check {shlex.quote(path)}"
    )
    return EXIT_OK


def check(path: str, extra: list[str], config_dirs=(), show_ops: bool = False) -> int:
    golden = load_golden(path)
    # The golden's own seed and arm, unless the extra overrides pick others.
    pinned = [f"seed={golden['seed']}", f"arm={golden['arm']}"]
    dirs = list(config_dirs) or list(golden.get("config_dirs") or [])
    result = run_selected(list(golden["overrides"]) + pinned + list(extra), dirs)
    if result["status"] != "completed":
        if result["error"]["type"] in ("DataError", "DeterminismError"):
            raise BadInput(result["error"]["message"])  # the setup, not the numerics
        # Training itself broke (a NaN loss, a new op without a deterministic kernel): a failed check.
        print(f"golden check FAILED: {path}: the run did not complete ({result['error']['type']}: "
              f"{result['error']['message']}).")
        return EXIT_DIFFERENT
    cmp = compare(golden, result)
    text = check_message(path, golden, result, cmp)
    if golden.get("statistical") and not cmp["identical"]:  # not failed yet: the seeds below decide
        text = text.replace("golden check FAILED:", "golden check: the bits differ:", 1)
    print(text)
    if cmp["identical"]:
        return EXIT_OK
    print("\n".join(golden_ops.check_lines(golden, result, cmp["first_divergent_step"])) if show_ops else
          f"  to name the first op whose bits differ: {shlex.join(['python', '-m', 'harness.golden', 'check', path, *extra, '--ops'])}")
    stat = golden.get("statistical")
    if not stat:
        return EXIT_DIFFERENT
    try:
        runs = _more_seeds(result, len(stat["seeds"]), list(golden["overrides"]) + list(extra), dirs)
        verdict = golden_stats.compare(stat, runs)
    except golden_stats.StatsInputError as e:
        raise BadInput(str(e)) from None
    print(golden_stats.message(stat, verdict))
    return golden_stats.OUTCOME_EXIT[verdict["outcome"]]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.golden",
        description="Save or check golden per-step fingerprints of one run (exit 0 identical, 1 different or results "
                    "changed, 2 bad input, 3 bits differ but results equivalent, 4 undecided).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="{save,check}")
    s = sub.add_parser("save", help="run one (seed, arm) and write its fingerprints to FILE")
    s.add_argument("file", metavar="FILE")
    s.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, as for python -m harness")
    s.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="also record the declared metrics of N seeds, for check's equivalence test where bits differ")
    s.add_argument("--ops", action="store_true", help="also store step 1's op stream (bit hashes), for check --ops")
    c = sub.add_parser("check", help="rerun the configuration stored in FILE and compare every step")
    c.add_argument("file", metavar="FILE")
    c.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="extra overrides, applied after the stored ones")
    c.add_argument("--ops", action="store_true", help="where bits differ, name the first aten op whose outputs differ")
    for sp in (s, c):
        add_config_dir(sp)
    return p


def main(argv=None) -> int:
    args = parse_args(parser(), argv)  # --config-dir anywhere (diff.parse_args, shared by the repro tools)
    try:
        if args.command == "save":
            return save(args.file, args.overrides, args.config_dir, seeds=args.seeds, store_ops=args.ops)
        return check(args.file, args.overrides, args.config_dir, show_ops=args.ops)
    except BadInput as e:
        print(f"harness.golden: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
