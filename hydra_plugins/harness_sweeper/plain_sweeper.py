"""The harness's plain sweeper: Hydra's basic sweeper (the same jobs, batches and job numbers, so the
same bits and results), except that a job that dies is a failed unit, not a traceback.

It is the default of ``python -m harness -m ...`` (harness/conf/config.yaml; ``hydra/sweeper=basic``
still gives Hydra's own). On any launcher (basic, ``hydra/launcher=local_pool``, SLURM) a job whose
process died -- SIGKILL, out of memory, ``scancel``, a node failure -- is named as ``(seed=S, arm=A):
the job died, killed by signal 9 ...`` and recorded as a failed unit (_lost_units.py), the batch's other
jobs run, the sweep is analysed with the lost units counted as failed, and the process exits 1 saying
that a rerun of the same command resumes them.

Because it analyses the sweep itself (to exit 1 after the analysis; Hydra's on_multirun_end cannot
set the exit status), it also writes the sweep's declaration: the harness callback leaves both to
the sweepers of this package, as it does for the sequential one. This module is imported by every
Hydra app: the work is imported when a sweep runs.
"""

from pathlib import Path
from typing import Any, List, Optional, Tuple

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class HarnessBasicSweeper(BasicSweeper):
    def sweep(self, arguments: List[str]) -> Any:
        """BasicSweeper.sweep, each batch through launch_surviving; then the analysis and the exit."""
        import logging

        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from harness.experiment.callbacks import write_declaration
        from harness.experiment.execute import fail
        from harness.experiment.precheck import composed_already
        from harness.experiment.resume import lock_timeout_problem

        from ._lost_units import launch_surviving

        problem = lock_timeout_problem(self.config.get("lock_timeout"))
        if problem:  # before any job (each job would refuse it)
            fail(problem + " No job was launched.")
        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params_conf), self.max_batch_size)
        root = Path(str(self.config.hydra.sweep.dir))
        root.mkdir(parents=True, exist_ok=True)
        write_declaration(self.config, root)  # may refuse (the ledger's level): before multirun.yaml is replaced
        OmegaConf.save(self.config, root / "multirun.yaml")

        returns, lost, idx = [], [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            if not composed_already(self.config, batch):  # the precheck composed each job (precheck.py)
                self.validate_batch_is_legal(batch)
            launched = launch_surviving(self.launcher, batch, idx, root, say=logging.getLogger("harness").warning)
            for _, results in launched.launched:
                for r in results:
                    _ = r.return_value  # a job that raised: Hydra's traceback, as the basic sweeper does
                returns.append(results)
            if launched.lost:
                lost.append(launched.message())
            idx = launched.next_idx
        analysed, problem = _analyse(self.config, root)
        if lost:
            fail(f"some units of this sweep failed because their job died: {'; '.join(lost)}. The other units ran"
                 f"{' and the analysis counts the lost ones as failed' if analysed else ''}. Run the same command "
                 "again to resume: only the units without a completed result run again."
                 + (f" Also, the {problem}" if problem else ""), code=1)
        if problem:
            fail(problem, code=1)
        return returns


def _analyse(config, root: Path) -> Tuple[bool, Optional[str]]:
    """The harness callback's analysis of a sweep (harness.experiment.callbacks.AnalyzeSweep.
    on_multirun_end, which leaves this sweeper's sweeps to it): (analysed?, why it failed)."""
    from harness.experiment.callbacks import analyse_sweep

    analysis, problem = analyse_sweep(config, root)
    return analysis is not None, problem
