"""A command arm's keys (train.cmd, cwd, args, seed_arg, metrics_from, timeout_s, compare_files):
read once, checked before any unit runs, rendered into the argument list of one (seed, arm).

A problem is one paragraph naming the key, what it holds and what is allowed (``problems``); the
preflight refuses the experiment with it before anything runs. Torch-free.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from harness import HarnessError

COMMAND_FN = "harness.integrations.command.train"
BUILTIN_LOOP = "harness.builtin.loop.train"
PLACEHOLDERS = ("{seed}", "{arm}", "{run_dir}")
HARNESS_PYTHON = ("python", "python3")  # a command's first word meaning the harness's own interpreter
_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class CommandSpecError(ValueError, HarnessError):
    """A command arm's keys cannot run; the message names the key and what is allowed."""


def is_command(cfg) -> bool:
    """Whether a config, or its ``train`` node alone, runs a command arm (train.cmd set)."""
    node = cfg.get("train") if "train" in cfg else cfg
    return node is not None and node.get("cmd") is not None


def training_fn(cfg) -> str:
    """The dotted path of the training function a unit calls: the command arm when train.cmd is set,
    the launcher of its ranks when train.nproc > 1 (integrations/ranks/; the ranks call train.fn), the
    leader of a SLURM job's tasks when they are the unit's ranks (ranks/slurm_units.py)."""
    from harness.integrations.ranks.nproc_spec import NPROC_FN, nproc_of
    from harness.integrations.ranks.slurm_tasks import UNITS_ENV

    if is_command(cfg):
        return COMMAND_FN
    if nproc_of(cfg) > 1:
        return NPROC_FN
    return "harness.integrations.ranks.slurm_units.train" if os.environ.get(UNITS_ENV) else cfg.train.fn


def black_box_refusal(tool: str, needs: str) -> str:
    """Why a tool that looks inside a run cannot look inside a command arm."""
    return (f"{tool} {needs}, and a command arm (train.cmd) is a black box: the script runs in a "
            "process of its own and the harness sees only its metrics. Use a train.fn (docs/own-code.md), "
            "which the harness can see into, for this tool.")


@dataclass(frozen=True)
class CommandSpec:
    argv: tuple  # the command's arguments before the flags, placeholders not yet replaced
    cwd: Optional[str]
    args: tuple  # (flag key, value) in the config's order
    seed_arg: Optional[str]
    patterns: tuple  # (metric, compiled regex)
    metrics_file: Optional[str]
    timeout_s: Optional[float]
    compare_files: tuple

    @classmethod
    def from_config(cls, cfg) -> "CommandSpec":
        found = problems(cfg)
        if found:
            raise CommandSpecError(" ".join(found))
        return _read(cfg)

    def render(self, seed: int, arm: str, run_dir: Path) -> list[str]:
        """The arguments of one unit: the command, the flags of train.args, then the seed. A bare
        ``python``/``python3`` is the interpreter running the harness (see interpreter_of)."""
        out = [fill(a, seed, arm, run_dir) for a in self.argv]
        if out and out[0] in HARNESS_PYTHON:
            out[0] = sys.executable
        for key, value in self.args:
            if value is True:
                out.append(f"--{key}")
            elif value is False or value is None:
                continue
            elif isinstance(value, list):
                out += [f"--{key}", *(fill(str(v), seed, arm, run_dir) for v in value)]
            else:
                out += [f"--{key}", fill(str(value), seed, arm, run_dir)]
        if self.seed_arg:
            out += [self.seed_arg, str(seed)]
        return out

    def interpreter(self) -> Optional[str]:
        return interpreter_of(list(self.argv), self.workdir())

    def workdir(self) -> Path:
        return Path(self.cwd).expanduser().resolve() if self.cwd else Path.cwd()


def interpreter_of(argv: list[str], workdir: Path) -> Optional[str]:
    """The Python that runs a command: for a bare ``python`` or ``python3``, the interpreter running
    the harness (sys.executable: the one with the packages the harness itself was installed with,
    whichever python is first on PATH); for another word or path named python*, that program; None
    when the command is not a Python (a shell script picks its own)."""
    if not argv:
        return None
    program = argv[0]
    if program in HARNESS_PYTHON:
        return sys.executable
    if not re.fullmatch(r"python[0-9.]*", Path(program).name):
        return None
    if "/" in program:
        return str((workdir / Path(program).expanduser()).absolute())
    return shutil.which(program)


def fill(text: str, seed: int, arm: str, run_dir: Path) -> str:
    """Replace {seed}, {arm}, {run_dir} (only these: other braces, e.g. JSON in an argument, stay)."""
    return str(text).replace("{seed}", str(seed)).replace("{arm}", str(arm)).replace("{run_dir}", str(run_dir))


def _argv(cmd) -> list[str]:
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [str(a) for a in cmd]


def _read(cfg) -> CommandSpec:
    t = cfg.train
    plain = OmegaConf.to_container(t, resolve=True)
    source = plain.get("metrics_from") or {}
    patterns = tuple((str(k), re.compile(v)) for k, v in (source.get("stdout") or {}).items())
    return CommandSpec(
        argv=tuple(_argv(plain["cmd"])), cwd=plain.get("cwd"), args=tuple((plain.get("args") or {}).items()),
        seed_arg=plain.get("seed_arg"), patterns=patterns, metrics_file=source.get("file"),
        timeout_s=plain.get("timeout_s"), compare_files=tuple(plain.get("compare_files") or ()))


def problems(cfg) -> list[str]:
    """Every reason train.cmd and its keys cannot run (empty: they can), one paragraph each."""
    t = cfg.train
    plain = OmegaConf.to_container(t, resolve=True)
    cmd = plain.get("cmd")
    out: list[str] = []
    if t.fn != BUILTIN_LOOP:
        out.append(f"train.cmd and train.fn={t.fn} are both set: an arm runs a command OR calls a training "
                   "function. Remove one (train.cmd runs a script unchanged; train.fn calls fn(cfg, run)).")
    if dict(plain.get("kwargs") or {}):
        out.append("train.kwargs is set with train.cmd: keyword arguments go to a train.fn. Pass a command's "
                   "options as train.args (rendered as flags: true -> --key, false/null -> omitted, else --key value).")
    problem = cmd_problem(cmd)
    if problem is not None:
        return out + [problem]
    argv = _argv(cmd)
    cwd = plain.get("cwd")
    workdir = Path(cwd).expanduser() if cwd else Path.cwd()
    if cwd is not None and not workdir.is_dir():
        out.append(f"train.cwd={cwd!r} is not a folder (relative paths are taken from {os.getcwd()}).")
    out += _program_problems(argv, workdir)
    out += _args_problems(plain.get("args") or {})
    seed_arg = plain.get("seed_arg")
    if seed_arg is not None and (not isinstance(seed_arg, str) or not seed_arg.startswith("-") or " " in seed_arg):
        out.append(f"train.seed_arg={seed_arg!r} is not an option name: give the script's own seed option "
                   "(e.g. --seed: the harness's seed S is passed as --seed S), or null not to pass it.")
    out += _metrics_problems(plain.get("metrics_from"), cfg)
    timeout = plain.get("timeout_s")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        out.append(f"train.timeout_s={timeout!r} must be a number of seconds > 0, or null (no limit).")
    return out


def cmd_problem(cmd) -> Optional[str]:
    """Why the value of train.cmd is not a command (None: it is one), from its shape alone: checked
    before anything is written (experiment/precheck.py), and again with the other keys."""
    if isinstance(cmd, str):
        try:
            argv = shlex.split(cmd)
        except ValueError as e:
            return f"train.cmd={cmd!r} cannot be split like a shell line ({e}). Close the quote, or give a list."
    elif isinstance(cmd, (list, tuple)) and all(isinstance(a, (str, int, float)) and not isinstance(a, bool)
                                                for a in cmd):
        argv = [str(a) for a in cmd]
    else:
        return (f"train.cmd={cmd!r} is not a command: give a string (split like a shell line, e.g. "
                "'python main.py --epochs 1') or a list of arguments.")
    if not argv or not argv[0].strip():
        return (f"train.cmd is empty ({cmd!r}): it must name the command that trains one run, as a string split "
                "like a shell line (e.g. 'python main.py --epochs 5') or a list of arguments (e.g. [python, "
                "main.py]), whose first word is the program. To call a training function instead, leave "
                "train.cmd unset (null) and set train.fn.")
    return None


def config_cmd_problem(train, factor) -> Optional[str]:
    """cmd_problem of a config's ``train`` node's cmd, unless the arms give it (``factor``, ab.factor,
    under train.cmd: each arm's value is checked with the arm)."""
    try:
        cmd = OmegaConf.select(train, "cmd", default=None) if train is not None else None
        factor = str(factor or "")
    except Exception:  # noqa: BLE001 - an interpolation that fails here fails, named, in the preflight
        return None
    if cmd is None or factor == "train.cmd" or factor.startswith("train.cmd."):
        return None
    return cmd_problem(OmegaConf.to_container(cmd, resolve=True) if OmegaConf.is_config(cmd) else cmd)


def _program_problems(argv: list[str], workdir: Path) -> list[str]:
    program = argv[0]
    if program in HARNESS_PYTHON:
        pass  # the harness's own interpreter (interpreter_of): it exists
    elif "/" in program:
        found = (workdir / program).expanduser()
        if not (found.is_file() and os.access(found, os.X_OK)):
            return [f"train.cmd: the command {program!r} is not an executable file (looked in {workdir})."]
    elif shutil.which(program) is None:
        return [f"train.cmd: the command {program!r} was not found on PATH. Give its full path, or install it."]
    script = script_of(argv, workdir)
    if script is not None and not script.is_file():
        return [f"train.cmd: the script {script} does not exist (relative paths are taken from train.cwd, "
                f"here {workdir})."]
    return _torch_problems(argv, workdir, script)


_IMPORTS_TORCH = re.compile(r"^\s*(?:from|import)\s+torch\b", re.M)


def _torch_problems(argv: list[str], workdir: Path, script: Optional[Path]) -> list[str]:
    """A script that imports torch, given an interpreter known to have none (every unit would fail
    with ModuleNotFoundError after starting)."""
    interpreter = interpreter_of(argv, workdir)
    if interpreter is None or script is None:
        return []
    try:
        if not _IMPORTS_TORCH.search(script.read_text(errors="replace")):
            return []
    except OSError:
        return []
    from harness.integrations.interpreter_probe import interpreter_identity

    packages = interpreter_identity(interpreter).get("packages")
    if packages is None or "torch" in packages:  # unreadable: not known to lack it
        return []
    return [f"train.cmd: the script {script} imports torch, but the interpreter that would run it, {interpreter}, "
            f"has no torch installed. Write the path of a Python that has it (e.g. your virtual environment's "
            f"bin/python), or 'python' for the one running the harness ({sys.executable})."]


def script_of(argv: list[str], workdir: Path) -> Optional[Path]:
    """The file the command runs: `python main.py` -> main.py, `./train.sh` -> train.sh, `python -m pkg.mod`
    -> pkg/mod.py (or pkg/mod/__main__.py) under the working folder; None when it is not a file there."""
    if not argv:
        return None
    program = Path(argv[0]).name
    if re.fullmatch(r"python[0-9.]*", program):
        rest = [a for a in argv[1:] if a not in ("-u", "-O", "-B")]
        if rest[:1] == ["-m"] and len(rest) > 1:
            base = workdir / rest[1].replace(".", "/")
            for candidate in (base.with_suffix(".py"), base / "__main__.py"):
                if candidate.is_file():
                    return candidate
            return None
        return (workdir / rest[0]) if rest and not rest[0].startswith("-") else None
    return (workdir / argv[0]) if "/" in argv[0] else None


def code_files(cfg) -> list[str]:
    """The file the command runs and the .py files beside it (relative to the launch folder when
    below it): what a command arm's code identity covers besides repro.code_paths."""
    if not is_command(cfg):
        return []
    try:
        spec = _read(cfg)
        script = script_of(list(spec.argv), spec.workdir())
    except (ValueError, TypeError, re.error):  # a bad command: the preflight refuses it, naming the key
        return []
    if script is None or not script.is_file():
        return []
    files = {script.resolve(), *(p.resolve() for p in script.parent.glob("*.py"))}
    return [_relative(p) for p in sorted(files)]


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _args_problems(args: dict) -> list[str]:
    out = []
    for key, value in args.items():
        if not _FLAG.fullmatch(str(key)):
            out.append(f"train.args.{key}: {key!r} is not a flag name: keys are rendered verbatim as --KEY "
                       "(letters, digits, '_', '-', '.'; no leading dash, no spaces, no '=').")
        elif isinstance(value, dict):
            out.append(f"train.args.{key} is a mapping ({value!r}): a flag takes true (--{key}), false or null "
                       f"(omitted), a value (--{key} VALUE) or a list (--{key} V1 V2).")
    return out


def _metrics_problems(source, cfg) -> list[str]:
    allowed = ("train.metrics_from must say where the metrics are: {stdout: {METRIC: 'regex with one "
               "(group)'}} (the last match's first group) and/or {file: '{run_dir}/metrics.json'} (a JSON object "
               "the command writes).")
    if not isinstance(source, dict) or not source or set(source) - {"stdout", "file"}:
        return [f"{allowed} Got {source!r}."]
    out = []
    patterns = source.get("stdout") or {}
    if not isinstance(patterns, dict):
        return [f"train.metrics_from.stdout={patterns!r}: {allowed}"]
    for name, pattern in patterns.items():
        try:
            groups = re.compile(str(pattern)).groups
        except re.error as e:
            out.append(f"train.metrics_from.stdout.{name}={pattern!r} does not compile as a regular expression: {e}.")
            continue
        if groups < 1:
            out.append(f"train.metrics_from.stdout.{name}={pattern!r} has no capture group: put the number in "
                       f"parentheses, e.g. '{name}\\s+([0-9.eE+-]+)'.")
    file = source.get("file")
    if file is not None and not isinstance(file, str):
        out.append(f"train.metrics_from.file={file!r} must be a path (a string).")
    primary = OmegaConf.select(cfg, "stats.metric", default=None)
    if file is None and primary is not None and primary not in patterns:
        out.append(f"stats.metric={primary!r} cannot be produced: train.metrics_from.stdout reads only "
                   f"{', '.join(map(str, patterns)) or 'nothing'}. Add a pattern for {primary}, or read the metrics "
                   "from a file (train.metrics_from.file).")
    return out
