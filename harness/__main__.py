"""``python -m harness +experiment=loss_ab``: the Hydra entry point. The work is in app.py."""

import harness  # noqa: F401  - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import sys

import hydra
from omegaconf import DictConfig

from harness.config import register_configs, typed_overrides
from harness.tools.fast_exit import exit_now

register_configs()
sys.argv[1:] = typed_overrides(sys.argv[1:])  # conditions written as in the yaml (harness/config/compose.py)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from harness.app import run

    return run(cfg)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # Ctrl-C: say what is safe and how to resume, not a traceback (results are written atomically)
        from harness.experiment.execute import interrupted_message

        print(f"\nharness: {interrupted_message()}\n", file=sys.stderr)
        raise SystemExit(130) from None
    exit_now()  # a failure left above, through SystemExit, with its status
