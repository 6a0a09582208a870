"""``python -m harness +experiment=loss_ab``: the Hydra entry point. The work is in app.py."""

import harness  # noqa: F401  - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import sys

import hydra
from omegaconf import DictConfig

from harness.config import register_configs, typed_overrides
from harness.integrations import interrupts
from harness.tools.fast_exit import exit_now

register_configs()
sys.argv[1:] = typed_overrides(sys.argv[1:])  # conditions written as in the yaml (harness/config/compose.py)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from harness.app import run

    return run(cfg)


def _interrupted(finished: bool = False) -> None:
    """Ctrl-C: say what is safe and how to resume, not a traceback (results are written atomically),
    and exit 130 without the interpreter's teardown (seconds on a busy machine: a Ctrl-C ends now)."""
    from harness.experiment.execute import interrupted_message

    print(f"\nharness: {interrupted_message(finished)}\n", file=sys.stderr)
    exit_now(130)
    raise SystemExit(130)  # a non-daemon thread still runs: the ordinary exit, which waits for it


if __name__ == "__main__":
    interrupts.install()
    try:
        main()
    except KeyboardInterrupt:
        _interrupted()
    if interrupts.seen():  # the KeyboardInterrupt was swallowed below (a finalizer, an exit handler)
        _interrupted(finished=True)
    exit_now()  # a failure left above, through SystemExit, with its status
