"""A live progress line per run (seed, arm, step, loss) on the terminal; silent when not a TTY."""

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
