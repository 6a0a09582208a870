"""The command lines (issue 17, item 8): a plain run warns about nothing, and every tool takes
--config-dir anywhere on its command line."""

from __future__ import annotations

import pytest

from tests.conftest import FAST, FAST_CLI_GROUP, run_cli

# -- 8.3: a single run checks its output folder, and prints no warning ---------------------------


@pytest.mark.slow
@FAST_CLI_GROUP
def test_a_plain_run_prints_no_warning(fast_cli_run):
    # no hydra.run.dir override: the default folder is what interpolates ${hydra:job.override_dirname}
    # (the run is conftest's fast_cli_run: FAST in a folder of its own, shared with test_workers.py)
    proc = fast_cli_run.proc
    assert proc.returncode == 0, proc.stderr
    assert "HydraConfig was not set" not in proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    assert list((fast_cli_run.cwd / "outputs" / "loss_ab").glob("*/analysis.json"))


def test_the_single_run_check_sees_the_run_folder(monkeypatch):
    from harness.experiment import precheck as precheck
    from harness.config import compose

    seen = []
    monkeypatch.setattr(precheck, "check_writable", seen.append)
    cfg = compose([*FAST, "optim.lr=0.02"], return_hydra_config=True)  # as Hydra hands it to the callback
    precheck.CheckBeforeRuns().on_run_start(config=cfg)
    assert len(seen) == 1 and seen[0].parts[:2] == ("outputs", "loss_ab") and "optim.lr=0.02" in seen[0].name


# -- 8.4: --config-dir anywhere, in every tool ---------------------------------------------------

TINY = """# @package _global_
experiment_name: tiny_ab
ab:
  factor: loss.label_smoothing
  arms: {A: 0.0, B: 0.1}
  seeds: [0]
train: {max_steps: 5}
data: {train_limit: 128}
"""


@pytest.fixture
def conf(tmp_path):
    """A researcher's config folder: +experiment=tiny_ab exists only there."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "tiny_ab.yaml").write_text(TINY)
    return tmp_path / "conf"


@pytest.mark.slow
def test_golden_save_takes_config_dir_after_the_file(tmp_path, conf):
    golden = tmp_path / "golden.json"
    proc = run_cli(["save", str(golden), "--config-dir", str(conf), "+experiment=tiny_ab", "logger=none",
                    "progress=false", "determinism.threads=1"], module="harness.golden", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "golden saved" in proc.stdout and golden.is_file()


def _stop(seen):
    def capture(*args, **kwargs):
        seen.append((args, kwargs))
        raise _Stop()
    return capture


class _Stop(Exception):
    pass


POSITIONS = [  # the overrides (or a tool's positionals) with --config-dir DIR at each place, both spellings
    pytest.param(lambda d: ["--config-dir", d, "a=1", "b=2"], id="first"),
    pytest.param(lambda d: ["a=1", "--config-dir", d, "b=2"], id="between"),
    pytest.param(lambda d: ["a=1", "b=2", f"--config-dir={d}"], id="last-equals"),
    pytest.param(lambda d: ["a=1", "-cd", d, "b=2", "--config-dir", d + "2"], id="short-and-twice"),
]


@pytest.mark.parametrize("argv", POSITIONS)
def test_golden_noise_audit_and_audit_take_config_dir_at_any_position(argv, monkeypatch):
    from harness.tools import audit as audit
    from harness.tools.golden import golden as golden
    from harness.tools.noise import noise_audit as noise_audit

    args = argv("DIR")
    want_dirs = ["DIR", "DIR2"] if "DIR2" in args else ["DIR"]
    for command in ("save", "check"):
        seen = []
        monkeypatch.setattr(golden, command, _stop(seen))
        with pytest.raises(_Stop):
            golden.main([command, "FILE", *args])
        assert seen[0][0] == ("FILE", ["a=1", "b=2"], want_dirs), (command, seen)
    for tool in (noise_audit, audit):
        seen = []
        monkeypatch.setattr(tool, "compose_config", _stop(seen))
        with pytest.raises(_Stop):
            tool.main(args)
        assert seen[0][0] == (["a=1", "b=2"], want_dirs), (tool.__name__, seen)


def test_noise_audit_takes_its_other_options_between_overrides_too(monkeypatch):
    from harness.tools.noise import noise_audit as noise_audit

    seen = []
    monkeypatch.setattr(noise_audit, "compose_config", _stop(seen))
    with pytest.raises(_Stop):
        noise_audit.main(["a=1", "--repeats", "3", "b=2", "--config-dir", "DIR"])
    assert seen[0][0] == (["a=1", "b=2"], ["DIR"])


@pytest.mark.parametrize("argv", POSITIONS)
def test_diff_accepts_config_dir_anywhere_and_says_it_reads_only_files(argv, monkeypatch, capsys):
    from harness.tools.diff import diff as diff

    args = [a if "=" not in a or a.startswith("--") else {"a=1": "RUN_A", "b=2": "RUN_B"}[a] for a in argv("DIR")]
    seen = []

    def load_run(path):
        seen.append(path)
        raise diff.DiffError(f"{path}: stop here")

    monkeypatch.setattr(diff, "load_run", load_run)
    assert diff.main(args) == diff.EXIT_BAD_INPUT
    assert seen == ["RUN_A"]
    assert "--config-dir is not used" in capsys.readouterr().err


def test_config_dir_without_a_value_is_refused(capsys):
    from harness.tools import audit as audit

    with pytest.raises(SystemExit) as e:
        audit.main(["a=1", "--config-dir"])
    assert e.value.code == 2 and "--config-dir" in capsys.readouterr().err
