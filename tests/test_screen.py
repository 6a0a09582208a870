"""What the screen says (issue 33, item 4): an infinite interval end explained on its own line, and a
submission sbatch refused named as a refusal with the launcher key to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.analyze import analyze
from harness.analysis.render.summary import lines

from . import _results_factory as F


def test_an_infinite_interval_end_is_explained_on_the_same_line():
    a = analyze(F.make_results(F.accuracies(3, shift=1.5, noise=0.3, rng_seed=1)))  # 3 seeds: below the floor
    screen = lines(a)
    verdict = screen[1]
    assert "CI -inf to" in verdict and "an infinite end: with so few pairs" in verdict
    (diff,) = [line for line in screen if line.strip().startswith("B - A =")]
    assert "[-inf, " in diff and "(infinite end: too few pairs" in diff


def test_a_submission_sbatch_refused_is_named_with_the_key_to_change(tmp_path, capsys):
    from submitit.core.utils import FailedJobError

    from hydra_plugins.harness_sweeper._lost_units import launch_surviving

    class Refusing:  # what submitit's launcher raises when sbatch exits non-zero
        def launch(self, jobs, initial_job_idx):
            raise FailedJobError("sbatch: error: Memory specification can not be satisfied\n"
                                 "sbatch: error: Batch job submission failed: Requested node configuration is "
                                 "not available")

    with pytest.raises(SystemExit) as e:
        launch_surviving(Refusing(), [["seed=0", "arm=A"]], 0, Path(tmp_path))
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert 'sbatch refused the submission: "sbatch: error: Memory specification can not be satisfied' in err
    assert "hydra.launcher.mem_gb" in err and "died" not in err
