"""The command lines (issue 17, item 8): a plain run warns about nothing, and every tool takes
--config-dir anywhere on its command line."""

from __future__ import annotations

from tests.conftest import FAST, TEST_CONF, run_cli

# -- 8.3: a single run checks its output folder, and prints no warning ---------------------------


def test_a_plain_run_prints_no_warning(tmp_path):
    # no hydra.run.dir override: the default folder is what interpolates ${hydra:job.override_dirname}
    proc = run_cli([*FAST, "determinism.threads=1"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "HydraConfig was not set" not in proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    assert list((tmp_path / "outputs" / "loss_ab").glob("*/analysis.json"))


def test_the_single_run_check_sees_the_run_folder(monkeypatch):
    from harness import precheck
    from harness.config import compose

    seen = []
    monkeypatch.setattr(precheck, "check_writable", seen.append)
    cfg = compose([*FAST, "optim.lr=0.02"], return_hydra_config=True)  # as Hydra hands it to the callback
    precheck.CheckBeforeRuns().on_run_start(config=cfg)
    assert len(seen) == 1 and seen[0].parts[:2] == ("outputs", "loss_ab") and "optim.lr=0.02" in seen[0].name
