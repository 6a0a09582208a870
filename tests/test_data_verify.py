"""Nothing runs that should not: CIFAR-10 pickles are checked against the official md5s before
they are unpickled; the explicit opt-out (data.verify=false) is recorded and reported."""

from __future__ import annotations

import os
import pickle

import pytest

from harness.analysis.render import markdown
from harness.analysis.analyze import analyze
from harness import instantiate as load
from harness.builtin.data import DataError

from ._results_factory import accuracies, make_results
from .conftest import compose_cfg
from .test_experiment import _write_cifar


class _CreatesAFile:
    """Unpickling this runs code: it creates the file at ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_a_tampered_pickle_is_refused_before_it_is_unpickled(tmp_path):
    _write_cifar(tmp_path)
    sentinel = tmp_path / "code-ran"
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    batch.write_bytes(pickle.dumps({"data": _CreatesAFile(sentinel), "labels": []}))
    cfg = compose_cfg(["data=cifar10", f"data.root={tmp_path}"])  # data.verify defaults to true
    assert cfg.data.verify is True

    with pytest.raises(DataError) as refused:
        load(cfg.data)
    assert not sentinel.exists(), "the tampered pickle was unpickled (and ran its code)"
    message = str(refused.value)
    assert str(batch) in message and "c99cafc152244af753f735de768cd75f" in message  # names the file, the md5
    assert "data.verify=false" in message  # and the documented way out
    # every file is checked, not only the first: the tiny test_batch and batches.meta are named too
    assert "test_batch" in message and "batches.meta" in message


def test_the_opt_out_loads_the_files_and_the_report_says_so(tmp_path):
    _write_cifar(tmp_path)
    cfg = compose_cfg(["data=cifar10", f"data.root={tmp_path}", "data.verify=false"])
    assert tuple(load(cfg.data).train_x.shape) == (40, 3, 32, 32)

    results = make_results(accuracies(5, shift=0.5))
    line = "data not verified"
    assert line not in markdown.markdown(analyze(results, bootstrap_resamples=100))
    for r in results[:3]:  # the result records the opt-out: it is in the run's config
        r["config"]["data"] = {"name": "cifar10", "verify": False}
    analysis = analyze(results, bootstrap_resamples=100)
    assert analysis["data_unverified"] == 3
    assert f"{line}: 3 run(s)" in markdown.markdown(analysis) and "data.verify=false" in markdown.markdown(analysis)
