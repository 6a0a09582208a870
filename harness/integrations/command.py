"""The command arm: a script run unchanged, once per (seed, arm), behind train.fn's door.

``train(cfg, run)`` is what a unit calls when ``train.cmd`` is set (command_spec.training_fn): it
renders the command for the Run's seed and the arm, runs it with the unit's environment
(process.py) in a working folder of its own that mirrors the launch folder (workdir.py), and reads
the metrics from its stdout or a file it wrote. A command is a black box: the Run records no init,
data order or steps, so the pairing rests on the seed alone and the
certificate compares what the run produced, metrics bit for bit and train.compare_files byte for
byte (``run.black_box(final)``) -- unless the script called ``harness.attach()`` (attach.py): then
what its Run recorded is adopted (``run.adopt``) and the unit proves what a train.fn's does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
import tempfile
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from harness.integrations.command_env import ATTACHED_ENV_NAME, read_reported
from harness.integrations.command_spec import CommandSpec, fill
from harness.integrations import process, ranks
from harness.integrations.ranks import rank_timeout
from harness.integrations.revisions import snapshot
from harness.integrations.process import ATTACHED_NAME, RUN_ENV, CommandFailed, run_settings
from harness.integrations.workdir import unit_workdir

log = logging.getLogger(__name__)


def train(cfg, run) -> dict:
    spec = CommandSpec.from_config(cfg)
    arm = arm_of(cfg)
    if run.run_dir is not None:
        return _unit(spec, cfg, run, arm, Path(run.run_dir))
    with tempfile.TemporaryDirectory(prefix="harness-command-") as tmp:  # a rerun: written nowhere
        return _unit(spec, cfg, run, arm, Path(tmp))


def _unit(spec: CommandSpec, cfg, run, arm: str, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    who = f"seed {run.seed} arm {arm}"
    argv = spec.render(run.seed, arm, folder)
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    env = process.environment(run.seed, arm, folder, int(cfg.determinism.threads))
    env[RUN_ENV] = _attach_settings(cfg, run)
    env.update(rank_timeout.environment(cfg.train))  # a torchrun script's init_process_group reads it
    argv = snapshot.for_command(argv, spec.workdir(), env)  # a code arm: its revision's script
    attached, reported = folder / ATTACHED_NAME, folder / ATTACHED_ENV_NAME
    for left in (attached, reported):  # a record left by an earlier run of this unit is not this run's
        left.unlink(missing_ok=True)
    ranks.clear(folder)
    shared: list = []  # the launch folder's files the script wrote through its links (workdir.py)
    # a working folder of its own (mirroring the launch folder): units side by side never share a file
    with unit_workdir(spec.workdir(), folder, shared) as cwd:
        try:
            code = process.run(argv, cwd, env, out, err, spec.timeout_s)
        except CommandFailed as e:  # the timeout: said with the unit and what it printed last
            raise CommandFailed(f"{who}: {e}: {shlex.join(argv)}\nlast lines of stdout ({out}):\n"
                                f"{process.tail(out) or '(stdout is empty)'}") from None
        if code != 0:
            shown = process.tail(err) or "(stderr is empty)"
            world = ranks.launched_world(argv) or {}
            rank = ranks.failure_words(err.read_text(errors="replace") if err.exists() else "", folder, process.ending,
                                       world.get("world_size"), rank_timeout.of(cfg.train))
            raise CommandFailed(f"{who}: the command {process.ending(code)}"
                                f"{f' ({rank})' if rank else ''}: {shlex.join(argv)}\n"
                                f"last lines of stderr ({err}):\n{shown}")
        metrics = _read_metrics(spec, run, arm, folder, out, who, cwd)
        digest = None if attached.exists() else _digest(metrics, spec, run.seed, arm, folder, who, cwd)
    if shared:
        log.warning(f"{who}: the script wrote into {', '.join(shared)}, a file of the launch folder that its "
                    "working folder reaches through a link: units side by side share that file. Move it out of "
                    f"{spec.workdir()}, or have the script write under {{run_dir}}.")
    if digest is None:  # the script called harness.attach(): what its Run recorded is this run's
        return _adopt(run, attached, metrics, who, read_reported(folder))
    run.black_box(final=digest, covers="metrics and train.compare_files" if spec.compare_files else "metrics")
    return metrics


def _attach_settings(cfg, run) -> str:
    """What a script's harness.attach() needs to build a Run like this unit's (HARNESS_RUN)."""
    def plain(key):
        node = OmegaConf.select(cfg, key, default=None)
        return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node

    d = cfg.determinism
    determinism = {"mode": str(getattr(d.mode, "value", d.mode)), "threads": int(d.threads),
                   "fill_uninitialized_memory": bool(d.fill_uninitialized_memory),
                   "cudnn_benchmark": bool(d.cudnn_benchmark)}
    return run_settings(str(run.device), run.precision, determinism, plain("seeds"), plain("stats.metrics"),
                        int(cfg.train.log_every))


def _adopt(run, path: Path, metrics: dict, who: str, reported: Optional[dict]) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CommandFailed(f"{who}: the script attached (harness.attach()) but its record {path} could not be "
                            f"read as JSON: {e}") from None
    if isinstance(record, dict) and record.get("error"):
        raise CommandFailed(f"{who}: the script attached (harness.attach()) but its Run recorded no proof: "
                            f"{record['error']}")
    if reported is not None:  # what the script's own process said of its torch (command_env.py)
        record["env"] = reported
    record = _ranks_combined(record, path.parent, who)
    run.adopt(record)
    path.unlink()  # result.json holds it from here on
    ranks.clear(path.parent)
    (path.parent / ATTACHED_ENV_NAME).unlink(missing_ok=True)
    # the metrics the script handed run.finish join those read from its output (which win on a name)
    return {**{k: v for k, v in (record.get("metrics") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}, **metrics}


def _ranks_combined(record: dict, folder: Path, who: str) -> dict:
    """A unit of several processes (torchrun): rank 0's record with every rank's proofs (ranks.py);
    its world joins the unit's env (the identity compares it)."""
    try:
        record = ranks.combine(record, folder)
    except ranks.RanksFailed as e:
        raise CommandFailed(f"{who}: {e}") from None
    if isinstance(record.get("world"), dict) and isinstance(record.get("env"), dict):
        record["env"] = {**record["env"], "world": record["world"]}
    replicas = record["fingerprints"].get("replicas")
    if isinstance(replicas, dict) and not replicas.get("equal"):
        log.warning(f"{who}: {replicas['says']}.")
    return record


def _read_metrics(spec: CommandSpec, run, arm: str, folder: Path, out: Path, who: str, cwd: Path) -> dict:
    metrics: dict = {}
    if spec.patterns:
        text = out.read_text(errors="replace")
        for name, pattern in spec.patterns:
            found = [m.group(1) for m in pattern.finditer(text)]
            if not found:
                raise CommandFailed(f"{who}: train.metrics_from.stdout.{name} pattern {pattern.pattern!r} never "
                                    f"matched the command's output. Last lines of stdout ({out}):\n"
                                    f"{process.tail(out) or '(stdout is empty)'}")
            values = [_number(v, name, who) for v in found]
            metrics[name] = values[-1]
            if len(values) > 1:  # a per-epoch line: every match is a curve point
                for i, v in enumerate(values, start=1):
                    run.log(i, **{name: v})
    if spec.metrics_file:
        path = _under(cwd, fill(spec.metrics_file, run.seed, arm, folder))
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise CommandFailed(f"{who}: train.metrics_from.file {path} could not be read as JSON: {e}") from None
        if not isinstance(data, dict):
            raise CommandFailed(f"{who}: train.metrics_from.file {path} holds a {type(data).__name__}, not a JSON "
                                "object of metric name -> number.")
        metrics.update({str(k): v for k, v in data.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool) and str(k) not in metrics})
    return metrics


def _number(text: str, name: str, who: str) -> float:
    try:
        return float(text)  # a non-finite value is kept: the analysis excludes it, naming it
    except ValueError:
        raise CommandFailed(f"{who}: train.metrics_from.stdout.{name} captured {text!r}, not a number.") from None


def _under(cwd: Path, path: str) -> Path:
    """A path the script wrote, relative to its working folder (the unit's own)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else cwd / p


def _digest(metrics: dict, spec: CommandSpec, seed: int, arm: str, folder: Path, who: str, cwd: Path) -> str:
    """What the certificate compares: every metric's exact value, and the bytes of train.compare_files."""
    h = hashlib.blake2b(digest_size=8)
    h.update(json.dumps({k: float(v).hex() for k, v in sorted(metrics.items())}).encode())
    for name in spec.compare_files:
        path = _under(cwd, fill(name, seed, arm, folder))
        try:
            h.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError as e:
            raise CommandFailed(f"{who}: train.compare_files: {path} could not be read after the run "
                                f"({e.strerror}): the certificate compares its bytes.") from None
    return h.hexdigest()


def arm_of(cfg) -> str:
    """The unit's arm: cfg.arm as the harness sets it for the training function; else (a tool that
    trains a config of its own) the arm whose value the config holds at ab.factor."""
    if cfg.get("arm") is not None:
        return str(cfg.arm)
    factor = cfg.ab.factor
    value = OmegaConf.select(cfg, factor)
    value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    for name, arm_value in cfg.ab.arms.items():
        arm_value = OmegaConf.to_container(arm_value, resolve=True) if OmegaConf.is_config(arm_value) else arm_value
        if arm_value == value:
            return str(name)
    return str(value)
