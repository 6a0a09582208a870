"""``python -m harness +experiment=loss_ab``: the Hydra entry point. The work is in app.py."""

import harness  # noqa: F401  - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import sys

import hydra
from omegaconf import DictConfig

from harness.config import register_configs, typed_overrides

register_configs()
sys.argv[1:] = typed_overrides(sys.argv[1:])  # conditions written as in the yaml (harness/config/compose.py)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from harness.app import run

    return run(cfg)


def exit_now() -> None:
    """Exit 0 without the interpreter's teardown, which frees scipy's, matplotlib's and omegaconf's
    objects one by one (a few tenths of a second after the last line, on every run): every file is
    written by now, and what teardown would still run is run here (the exit handlers, the log's and
    the terminal's buffers). A non-daemon thread still running gets the ordinary exit, which waits
    for it."""
    import atexit
    import logging
    import os
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()  # wandb's and attach()'s handlers, as an ordinary exit runs them
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a pipe closed by its reader, or a closed stream: nothing reaches it
            pass
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # Ctrl-C: say what is safe and how to resume, not a traceback (results are written atomically)
        from harness.experiment.execute import interrupted_message

        print(f"\nharness: {interrupted_message()}\n", file=sys.stderr)
        raise SystemExit(130) from None
    exit_now()  # a failure left above, through SystemExit, with its status
