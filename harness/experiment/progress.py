"""A live progress line per run (seed, arm, step, loss) on the terminal; silent when not a TTY.

One line at a time (``start``/``done``, the serial path) or one per unit running side by side
(``line``: the workers report their steps to the parent, which draws them here).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RunProgress:
    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self._progress = None
        self._task = None

    def __enter__(self):
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False

    def start(self, seed: int, arm: str):
        """A callback for train_run: (step, total, loss) -> None; None when disabled."""
        if self._progress is None:
            return None
        self._task = self._progress.add_task(f"seed={seed} arm={arm}", total=None, loss="-")

        def update(step: int, total: int, loss: float) -> None:
            self._progress.update(self._task, completed=step, total=total, loss=f"{loss:.4f}")

        return update

    def done(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None

    def line(self, seed: int, arm: str):
        """One more live line, for a unit running in a worker: (update(step, total, loss), close()),
        or None when disabled."""
        if self._progress is None:
            return None
        task = self._progress.add_task(f"seed={seed} arm={arm}", total=None, loss="-")

        def update(step: int, total: int, loss: float) -> None:
            self._progress.update(task, completed=step, total=total, loss=f"{loss:.4f}")

        return update, lambda: self._progress.remove_task(task)
