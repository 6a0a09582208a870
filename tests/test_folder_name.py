"""The output folder follows what changes results: workers, logger.*, progress, tables and (where
the runs are the same) the analysis-only stats.* keys do not rename it, so adding them to a command
resumes the finished folder instead of training every unit again; a changed declared analysis key is
re-analysed there without training; goldens ignore such keys."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from harness.config import compose
from harness.results import differences
from harness.tools.golden.golden import NOT_NUMERICS
from tests.conftest import FAST, run_cli

BASE = [o for o in FAST if not o.startswith(("workers=", "logger=", "progress="))]


def _folder_name(overrides):
    return compose(overrides, return_hydra_config=True).hydra.job.override_dirname


@pytest.mark.slow
def test_keys_that_change_no_bit_do_not_name_the_folder():
    plain = _folder_name(BASE)
    assert plain and "train.max_steps=30" in plain
    for extra in (["workers=1"], ["workers=auto", "logger=none", "progress=false", "tables=true"],
                  ["logger.wandb.mode=offline", "logger.wandb.project=p"], ["stats.margin=0.5", "stats.alpha=0.01"],
                  ["stats.metrics.test_loss=max"]):
        assert _folder_name([*BASE, *extra]) == plain, extra
    assert _folder_name([*BASE, "optim.lr=0.01"]) != plain  # a key that changes the bits does
    # a sequential design decides from the margin which runs to make: there it names the folder
    seq = [*BASE, "ab.sequential.enabled=true"]
    assert _folder_name([*seq, "stats.margin=0.5"]) != _folder_name([*seq, "stats.margin=0.3"])


def test_golden_check_lists_no_key_that_changes_no_bit():
    golden = {"workers": 2, "logger": {"wandb": {"mode": "offline"}}, "lock_timeout": None, "optim": {"lr": 0.05}}
    now = {"workers": "auto", "logger": {"wandb": {"mode": "disabled"}}, "lock_timeout": 5, "optim": {"lr": 0.05}}
    assert differences(golden, now, ignore=NOT_NUMERICS) == []
    assert differences(golden, {**now, "optim": {"lr": 0.1}}, ignore=NOT_NUMERICS) == [("optim.lr", 0.05, 0.1)]


@pytest.mark.slow
def test_a_finished_folder_is_resumed_and_reanalysed_without_training(tmp_path):
    tiny = [*FAST, "train.max_steps=10", "ab.seeds=[0,1,2]", "repro.certificate=false"]  # no rerun: cheaper
    first = run_cli(tiny, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    # the same command without workers=1 and logger=none, and another margin: the same folder
    again = run_cli([o for o in tiny if o not in ("workers=1", "logger=none")] + ["logger.wandb.mode=disabled",
                                                                                    "stats.margin=0.5"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    folders = list((tmp_path / "outputs" / "loss_ab").iterdir())
    assert len(folders) == 1, folders
    log = again.stderr + again.stdout
    assert log.count("skipped, completed with the same config and code") == 6, log[-3000:]
    assert "the declaration changed" in log
    assert json.loads((folders[0] / "declaration.json").read_text())["margin"] == 0.5


@pytest.mark.slow
def test_ledger_keys_do_not_name_the_folder(tmp_path):
    plain = _folder_name(BASE)
    for extra in (["ledger.enabled=false"], [f"ledger.path={tmp_path / 'l.sqlite'}"]):
        assert _folder_name([*BASE, *extra]) == plain, extra


def _own_experiment(tmp_path):
    """A researcher's experiment whose yaml sets determinism.threads: 1 itself."""
    (tmp_path / "experiment").mkdir(exist_ok=True)
    (tmp_path / "experiment" / "threads_one.yaml").write_text(
        "# @package _global_\nexperiment_name: threads_one\ndeterminism:\n  threads: 1\n"
        "ab:\n  factor: loss.label_smoothing\n  arms: {A: 0.0, B: 0.1}\n  seeds: [0, 1]\n")
    return tmp_path


@pytest.mark.slow
def test_an_override_at_the_value_the_config_already_has_names_no_folder(tmp_path):
    dirs = [_own_experiment(tmp_path)]

    def name(overrides):
        return compose(overrides, config_dirs=dirs, return_hydra_config=True).hydra.job.override_dirname

    assert name(["+experiment=threads_one", "determinism.threads=1"]) == name(["+experiment=threads_one"]) == ""
    assert name(["+experiment=threads_one", "determinism.threads=2"]) == "determinism.threads=2"
    # the shipped default (data.augment: false) typed again, beside a key that does change the bits
    assert _folder_name([*BASE, "data.augment=false"]) == _folder_name(BASE)
    assert _folder_name([*BASE, "data.augment=true"]) != _folder_name(BASE)


@pytest.mark.slow
def test_a_long_override_list_gets_a_short_stable_folder_name(tmp_path):
    longest = "0." + "1" * 60  # a value this long is still one float: each is a distinct config
    many = [*BASE, f"optim.lr={longest}", f"optim.momentum={longest}", f"optim.weight_decay={longest}",
            f"model.dropout={longest}", "data.test_limit=400"]
    assert len(",".join(many)) > 300
    cfg = compose(many, return_hydra_config=True)
    folder = OmegaConf.select(cfg, "hydra.sweep.dir")
    parts = folder.split("/")
    assert all(len(p.encode()) <= 255 for p in parts), folder
    assert folder == OmegaConf.select(compose(list(reversed(many)), return_hydra_config=True), "hydra.sweep.dir")
    assert OmegaConf.select(compose([*many[:-1], "data.test_limit=399"], return_hydra_config=True),
                            "hydra.sweep.dir") != folder  # another list: another name

    tiny = [*many, "seed=0", "arm=A", "repro.certificate=false"]
    done = run_cli(tiny, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (out,) = (tmp_path / "outputs" / "loss_ab").iterdir()
    assert len(out.name.encode()) <= 255
    assert (out / "runs" / "seed=0" / "arm=A" / "result.json").is_file()
    written = (out / ".hydra" / "overrides.yaml").read_text()  # the full list, inside the folder
    assert all(o in written for o in many), written


def test_the_noise_tools_default_folder_is_one_short_component_too():
    from harness.tools.noise.noise_audit import default_out

    many = [f"optim.lr=0.{'1' * 100}", f"optim.momentum=0.{'2' * 100}", f"model.dropout=0.{'3' * 100}"]
    for tool in ("noise_audit", "noise_sources"):
        folder = default_out(many, tool)
        assert folder.parent.name == tool and len(folder.name.encode()) <= 255
        assert folder == default_out(list(reversed(many)), tool) != default_out(many[:2], tool)
