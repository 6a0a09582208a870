"""Every command the docs show is a test (tests/doc_commands.py reads them out of fenced blocks and
code spans).

Each one is composed in this process and passes the checks made before training (no training): the
overrides compose, the arms build, the preflight passes, a sweep's first job is one the sweep would
launch. A block marked ``<!-- doc-test: e2e expect="..." -->`` is the documented example of a
feature: its first command runs as a user would type it, at a tiny size, and must exit as promised
with the promised line in its output. A doc that stops matching the program fails here.
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.doc_commands import DocCommand, all_commands, doc_files

COMMANDS = all_commands()
E2E = [c for c in COMMANDS if "e2e" in c.marks and c.first_in_block]

# The tiny size an end-to-end example runs at (tests/conftest.py's FAST, without the experiment); a
# block may give its own with tiny="..." (a user's data has no data.train_limit).
TINY = {
    "harness": ["ab.seeds=[0,1,2]", "train.max_steps=10", "data.train_limit=256", "logger=none",
                "progress=false", "workers=1", "determinism.threads=1"],
    "harness.noise_audit": ["--repeats", "2", "train.max_steps=20", "data.train_limit=512", "logger=none",
                            "determinism.threads=1"],
    "harness.audit": ["data.train_limit=512", "logger=none", "determinism.threads=1"],
    "harness.golden": ["train.max_steps=20", "data.train_limit=512", "logger=none", "determinism.threads=1"],
}


def _split_harness_args(args: list[str]):
    """(multirun, config dirs, overrides) of ``python -m harness ARGS``."""
    multirun, dirs, overrides, i = False, [], [], 0
    while i < len(args):
        a = args[i]
        if a in ("-m", "--multirun"):
            multirun = True
        elif a in ("--config-dir", "-cd"):
            dirs.append(str(REPO / args[i + 1]))
            i += 1
        elif a.startswith("--config-dir="):
            dirs.append(str(REPO / a.split("=", 1)[1]))
        elif a.startswith("-"):
            raise AssertionError(f"python -m harness takes no flag {a} (only -m and --config-dir)")
        else:
            overrides.append(a)
        i += 1
    return multirun, dirs, overrides


def _first_job(overrides: list[str]) -> list[str]:
    """A sweep's first job, as Hydra's basic sweeper expands it (the overrides themselves otherwise)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return list(BasicSweeper.split_arguments(parsed, None)[0][0])


def check_harness(args: list[str]) -> None:
    """What ``python -m harness ARGS`` checks before its first run, in this process."""
    from harness.config import compose, factor_override_problem, replace_whole_arms, typed_overrides
    from harness.config.declaration import Declaration
    from harness.experiment.conditions import condition_configs
    from harness.experiment.precheck import check_job
    from harness.experiment.arms import ExperimentError

    multirun, dirs, overrides = _split_harness_args(args)
    job = _first_job(typed_overrides(overrides))  # as harness/__main__.py hands them to Hydra
    cfg = compose(job, config_dirs=dirs)
    replace_whole_arms(cfg, job)
    problem = factor_override_problem(cfg, job)
    if problem:
        raise ExperimentError(problem)
    # a sweep over code arms: its launching process reads the revisions first (on_multirun_start),
    # which this in-process check does not do; the job's checks are those of one invocation
    check_job(cfg, multirun=multirun and cfg.ab.factor != "code")
    declaration = Declaration.from_config(cfg)
    if declaration.conditions:
        for c in condition_configs(cfg, declaration, job, dirs).values():
            check_job(c, multirun=multirun)


def tool_module(module: str) -> str:
    """Where ``python -m harness.X``'s parser and main live: the module its entry point (harness/X.py)
    takes main from, or a room's cli.py (harness/ledger/cli.py)."""
    entry = importlib.import_module(module)
    return entry.main.__module__ if hasattr(entry, "main") else module + ".cli"


def check_tool(module: str, args: list[str]) -> None:
    """A tool's command: its flags parse; its overrides compose and select a run that passes the
    preflight (``golden check``'s overrides on their own: the file's apply first)."""
    from harness.config.preflight import preflight
    from harness.tools.args import parse_args
    from harness.tools.golden.golden import compose_config, select_run

    tool = importlib.import_module(tool_module(module))
    parsed = parse_args(tool.parser(), args)
    overrides = list(getattr(parsed, "overrides", None) or [])
    dirs = [str(REPO / d) for d in getattr(parsed, "config_dir", None) or []]
    if not hasattr(parsed, "overrides"):
        return  # analyze and diff read folders an earlier command wrote: their flags parsed
    cfg = compose_config(overrides, dirs)
    arm_cfg, _, _ = select_run(cfg, overrides)
    preflight(cfg, {"run": arm_cfg})


def _on_path(cmd: DocCommand, monkeypatch) -> None:
    for p in filter(None, cmd.env.get("PYTHONPATH", "").split(os.pathsep)):
        monkeypatch.syspath_prepend(str(REPO / p))


def test_the_docs_are_read_and_their_markers_used():
    """The collection itself: every doc file is read, commands are found in README and docs, each
    e2e block promises a line, and no marker names a promise the tests do not know."""
    names = {str(p.relative_to(REPO)) for p in doc_files()}
    assert {"README.md", "docs/reproducibility.md", "docs/statistics.md"} <= names
    where = {c.path for c in COMMANDS}
    assert {"README.md", "docs/reproducibility.md", "docs/statistics.md", "docs/racing.md"} <= where
    assert len(COMMANDS) >= 40
    assert E2E and all(c.marks.get("expect") for c in E2E)
    known = {"e2e", "expect", "exit", "tiny", "gpu"}
    for c in COMMANDS:
        assert set(c.marks) <= known, f"{c.id}: unknown doc-test marker {sorted(set(c.marks) - known)}"
        if "device=cuda" in c.args:  # a reader must see that it needs a GPU, and CI checks it on the CPU
            assert "gpu" in c.marks, f"{c.id}: {c.text} needs a GPU: mark its block <!-- doc-test: gpu -->"
        if "gpu" in c.marks:
            assert "GPU" in c.raw, f"{c.id}: a GPU command says so on its line (# needs a GPU)"
    assert any("gpu" in c.marks for c in COMMANDS)


def _refused_before_training(cmd: DocCommand, monkeypatch):
    """None when the command passes every check made before training, else why not."""
    _on_path(cmd, monkeypatch)
    args = cmd.args
    if "gpu" in cmd.marks:
        import torch

        if not torch.cuda.is_available():  # everything but the device, as far as it can be checked here
            args = ["device=cpu" if a == "device=cuda" else a for a in args]
    try:
        if cmd.module == "harness":
            check_harness(args)
        else:
            check_tool(cmd.module, args)
    except SystemExit as e:
        return f"exits {e.code} before training"
    except Exception as e:  # noqa: BLE001 - the doc's command is refused: say where and why
        return f"{type(e).__name__}: {e}"
    return None


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.id)
def test_every_documented_command_passes_the_checks_before_training(cmd: DocCommand, monkeypatch):
    """...or, the first of a block that promises exit status 2, is refused before training, saying so."""
    why = _refused_before_training(cmd, monkeypatch)
    if cmd.first_in_block and cmd.marks.get("exit") == "2":
        assert why and cmd.marks["expect"] in why, f"{cmd.id}: {cmd.text}\n  promised a refusal, got: {why}"
    else:
        assert why is None, f"{cmd.id}: {cmd.text}\n  is refused: {why}"


def _tiny(cmd: DocCommand) -> list[str]:
    if "tiny" in cmd.marks:
        return shlex.split(cmd.marks["tiny"])
    return TINY[cmd.module]


@pytest.mark.slow
@pytest.mark.parametrize("cmd", E2E, ids=lambda c: c.id)
def test_each_documented_feature_example_runs_as_promised(cmd: DocCommand, tmp_path):
    """One subprocess per example, in a fresh folder (the repository's tests/ and examples/ beside it,
    so the doc's relative paths hold), at the tiny size appended to the doc's own arguments."""
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([*filter(None, cmd.env.get("PYTHONPATH", "").split(os.pathsep)), str(REPO)])}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", cmd.module, *cmd.args, *_tiny(cmd)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == int(cmd.marks.get("exit", 0)), f"{cmd.id}: {cmd.text}\n{out[-3000:]}"
    assert cmd.marks["expect"] in out, f"{cmd.id}: {cmd.text}\n promised {cmd.marks['expect']!r}:\n{out[-3000:]}"
    if proc.returncode == 2:  # a refusal writes nothing (docs/failures.md)
        left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.parts[len(tmp_path.parts)] not in ("tests", "examples"))
        assert not left, f"{cmd.id}: refused, yet it wrote {left}"
