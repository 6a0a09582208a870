"""``python -m harness +experiment=loss_ab``: the Hydra entry point. The work is in app.py."""

import harness  # noqa: F401  - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import hydra
from omegaconf import DictConfig

from harness.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from harness.app import run

    return run(cfg)


if __name__ == "__main__":
    main()
