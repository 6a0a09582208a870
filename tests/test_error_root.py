"""One exception root: every error the harness defines is a harness.HarnessError and keeps its
builtin base, and the errors still cross a process boundary (a worker pickles what it raises)."""

from __future__ import annotations

import concurrent.futures
import importlib
import inspect
import multiprocessing
import pickle
from pathlib import Path

import pytest

import harness
from .conftest import REPO

# Exceptions defined in the package that are deliberately not HarnessErrors, with why.
OUTSIDE = {
    # a request to stop (the audit's first N steps), not an error: a training loop's
    # `except RuntimeError` must not swallow it
    "harness.training.steps.StopRun",
}


def _defined_exceptions() -> dict[str, type]:
    """Every exception class defined at module level under harness/ and hydra_plugins/, by import."""
    found = {}
    for root in ("harness", "hydra_plugins"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if "conf" in rel.parts or rel.name == "__main__":  # __main__ runs its command
                continue
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            module = importlib.import_module(name)
            for attr, value in vars(module).items():
                if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                    found[f"{name}.{attr}"] = value
    return found


def test_every_error_of_the_package_is_a_harness_error():
    found = _defined_exceptions()
    assert len(found) >= 30, sorted(found)  # the walk saw the package's errors, not an empty tree
    outside = sorted(n for n, cls in found.items() if not issubclass(cls, harness.HarnessError))
    assert outside == sorted(OUTSIDE), "exceptions that are not harness.HarnessError: " + ", ".join(outside)
    assert not issubclass(found["harness.training.steps.StopRun"], RuntimeError)


def test_the_root_is_one_object_and_keeps_the_old_bases():
    from harness import HarnessError
    from harness.analysis.render.outputs import OutputsNotWritten
    from harness.analysis import AnalysisError
    from harness.experiment.arms import ExperimentError
    from harness.experiment.runner import MetricsError
    from harness.results import FileRefused

    assert HarnessError is harness.HarnessError and issubclass(HarnessError, RuntimeError)
    with pytest.raises(ValueError):  # an `except ValueError` written before the root still catches it
        raise AnalysisError("x")
    with pytest.raises(ValueError):
        raise ExperimentError("x")
    with pytest.raises(TypeError):
        raise MetricsError("x")
    e = OutputsNotWritten(OSError(28, "No space left on device", "/out/a.json"), Path("/out"), ["a.json"])
    assert isinstance(e, OSError) and (e.errno, e.filename) == (28, "/out/a.json")  # OSError's own fields
    assert str(FileRefused("not a regular file")) == "not a regular file"


def _rebuilt(e: BaseException) -> BaseException:
    return pickle.loads(pickle.dumps(e))


def test_every_harness_error_survives_pickling():
    from harness.analysis.render.outputs import OutputsNotWritten
    from harness.training.steps import NonFiniteLoss

    special = {
        NonFiniteLoss: NonFiniteLoss(7, float("nan")),
        OutputsNotWritten: OutputsNotWritten(OSError(28, "No space left on device", "/o/a"), Path("/o"), ["a"]),
    }
    for name, cls in _defined_exceptions().items():
        e = special.get(cls) or cls(f"{name} said this")
        back = _rebuilt(e)
        assert type(back) is cls and str(back) == str(e), name
    assert _rebuilt(special[NonFiniteLoss]).step == 7
    back = _rebuilt(special[OutputsNotWritten])
    assert (back.errno, back.filename, back.folder, back.names) == (28, "/o/a", Path("/o"), ("a",))


def test_an_error_raised_in_another_process_arrives_as_itself(tmp_path):
    from harness.results import FileRefused, read_json

    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter, as a worker of the pool is
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        with pytest.raises(FileRefused, match="not a regular file") as e:
            pool.submit(read_json, tmp_path).result()
    assert isinstance(e.value, harness.HarnessError) and isinstance(e.value, OSError)
