"""``Run``: what a training function gets from the harness for ONE (seed, arm).

A training function is ``fn(cfg, run, **train.kwargs) -> dict of final metrics``. The harness has
already switched PyTorch into the configured determinism mode and pinned the threads; the ``Run``
hands out everything seeded and records everything the harness proves things with:

    run.device, run.seed, run.precision, run.run_dir (the unit's folder, or None)
    run.generator("data_order" | "augment" | any name)  a torch.Generator per purpose, from the seed
    with run.init(): model = ...        initial weights from the init stream; afterwards the global
                                        RNG is the model stream (dropout, noise in a loss term)
    run.loader(dataset, batch_size)     a DataLoader whose order comes from the data_order stream
                                        and is fingerprinted batch by batch as you consume it
    run.sampler(n, batch_size)          the same order, for a DataLoader you build yourself
    run.consumed(batch)                 one batch fingerprinted by content (a trainer's callback)
    run.ordered(batches)                batches that must keep their order (contiguous BPTT windows,
                                        a curriculum): passed through unchanged, each one's content
                                        fingerprinted as you consume it
    run.watch(model, total_steps=None)  the init fingerprint; the parameters fingerprinted each step
    run.step(loss)                      once per optimizer step: loss bits + parameter digest
    run.trained(steps)                  the optimizer steps the trainer itself counted (a trainer's
                                        callback, the built-in loop): a record that covers fewer is
                                        reported PARTIAL, never as a whole proof
    run.log(step, **scalars)            curve points (result.json, wandb)
    run.autocast()                      bf16 autocast when precision=bf16, else nothing
    run.record_examples(correct, metric=NAME)  per-example outcomes on the test split of a metric
                                        declared with examples: true (its test-set noise)
    run.dataset(node, **kw)             instantiate a data node once per process (cached by config)
    run.black_box(final, covers)        the training ran outside this process (a command arm): no
                                        watch, no steps; ``final`` is a digest of what it produced
                                        (``covers``: "metrics", or the files too)
    run.adopt(record)                   the training ran in a script that recorded through
                                        harness.attach(): its fingerprints become this run's

A fingerprint of nothing proves nothing: a run that drew no batch through the Run records its
data_order as missing (``fingerprints.missing`` says what to call to fill it), never as the hash
of zero bytes that every such run shares.

It imports neither Hydra nor wandb and knows nothing of arms: a notebook can build one directly.
``metrics`` are the declared metrics (the config's ``stats.metrics``: the harness passes the arm
config's); they tell ``record_examples`` without a name which metric its outcomes belong to.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterable, Mapping, Optional

import torch
from torch.utils.data import DataLoader

from harness.training import host_digest
from harness.training.fingerprint import flatten_parameters  # looked up at run.watch: a test may turn packing off
from harness.training.fingerprint_coverage import HOW_TO_FILL
from harness.training.record import adopted_record, adoption_problem, black_box_record, curve_columns
from harness.training.rng import Streams, seed_worker
from harness.training.batches import (
    OrderDigest, OrderedBatches, ShuffledBatches, TensorBatches, _FingerprintedLoader, _HashingDeque, cached_dataset)
from harness.training.steps import RunUsageError, Watched


class Run:
    """The harness's side of one (seed, arm): seeded streams, fingerprints, logs. See the module doc."""

    def __init__(self, seed: int, device: torch.device | str = "cpu", precision: str = "fp32", *,
                 check_every: int = 10, progress: Optional[Callable[[int, Optional[int], float], None]] = None,
                 init_hook: Optional[Callable[[torch.nn.Module], None]] = None, keep_step_weights: int = 0,
                 save_weights: bool = False, stop_after: Optional[int] = None, metrics: Optional[Mapping] = None,
                 stream_seeds: Optional[Mapping] = None, run_dir=None):
        """``init_hook(model)`` may change the initial weights in place before the init fingerprint
        (the noise audit nudges one weight by an ULP). ``keep_step_weights``: keep the full weights
        of the first N steps (harness.diff's butterfly curve); ``save_weights``: the final ones.
        ``metrics``: the declared metrics, name -> a ``stats.metrics`` entry (a direction, or
        {direction, unit, examples}) or a harness.config.metric_spec.MetricSpec; None: none declared.
        ``stream_seeds``: purpose -> a seed that stream derives from instead of ``seed`` (seeds.*).
        ``run_dir``: the unit's own folder (where its result.json goes), None for a run written nowhere
        (the certificate's rerun, a notebook): a training function may keep files of its own there."""
        self.seed = int(seed)
        self.device = torch.device(device)
        self.precision = precision
        self.run_dir = run_dir
        self.streams = Streams.from_seed(self.seed, stream_seeds)
        self._generators = {"data_order": self.streams.data_order, "augment": self.streams.augment}
        self._order = OrderDigest()
        self._black_box: Optional[tuple[str, str]] = None  # (final, what it covers)
        self._adopted: Optional[dict] = None  # what an attached Run in another process recorded
        self._watch_options = dict(init_hook=init_hook, keep_step_weights=int(keep_step_weights),
                                   check_every=check_every, stop_after=stop_after)
        self._keep = int(keep_step_weights)
        self._progress = progress
        self._save_weights = bool(save_weights)
        self._watched: Optional[Watched] = None  # from run.watch on (steps.py)
        self._trained: Optional[int] = None  # the trainer's own step count, when something told it (run.trained)
        self._curve: dict[int, dict[str, float]] = {}
        self._declared = _declared(metrics)
        self._examples: dict[str, Any] = {}  # metric -> per-example outcomes, in recording order
        self._set_aside: list[tuple] = []  # (outcomes, why, fix) of records no declared metric can own
        self._in_init = False
        self._t0 = time.perf_counter()
        # what the harness says once for all units (a trainer's wandb logger turned off: wandb_hook.py)
        self.notices: list[dict] = []

    # -- randomness ------------------------------------------------------------------------------

    def generator(self, purpose: str) -> torch.Generator:
        """A CPU generator for one purpose, seeded from (seed, purpose): the same object each call."""
        if purpose not in self._generators:
            if purpose in ("init", "model"):
                raise RunUsageError(f"'{purpose}' is a global-RNG stream: use `with run.init():` instead.")
            self._generators[purpose] = torch.Generator().manual_seed(self.streams.derive(purpose))
        return self._generators[purpose]

    @contextlib.contextmanager
    def init(self):
        """Build the model inside: its initial weights come from the init stream, whatever the arm
        draws later. On exit the global RNG (CPU and CUDA) is reseeded with the model stream."""
        self.streams.seed_init()
        self._in_init = True
        try:
            yield self
        finally:
            self._in_init = False
            self.streams.seed_model()

    # -- data ------------------------------------------------------------------------------------

    def sampler(self, n: int, batch_size: int, drop_last: bool = False) -> ShuffledBatches:
        """A batch sampler (index tensors) drawing from the data_order stream. Pass it as
        ``batch_sampler=`` to your own DataLoader with ``generator=run.generator("data_order")``;
        the order is then fingerprinted as batches are drawn (prefer run.loader: it fingerprints
        what you consume, so stopping mid-epoch with workers gives the same fingerprint)."""
        sampler = self._shuffled(n, batch_size, self.generator("data_order"), drop_last)
        sampler.drawn = _HashingDeque(self._order)
        return sampler

    def loader(self, dataset, batch_size: int, *, num_workers: int = 0, drop_last: bool = False, **kwargs):
        """Shuffled batches of ``dataset`` in an order that comes from the data_order stream alone.

        A ``TensorBatches`` is read a whole batch at a time; any other map-style dataset is read
        per example and collated (``collate_fn`` etc. go through ``kwargs``). Any ``num_workers``
        gives the same batches: workers are seeded from the same stream (numpy and random too).
        """
        g = self.generator("data_order")
        sampler = self._shuffled(len(dataset), batch_size, g, drop_last)
        common = dict(num_workers=num_workers, generator=g, worker_init_fn=seed_worker, persistent_workers=False)
        if isinstance(dataset, TensorBatches):
            loader = DataLoader(dataset, sampler=sampler, batch_size=None, **common, **kwargs)
            # read in this process without the DataLoader's machinery, the same bits (batches.py)
            direct = num_workers == 0 and not {k: v for k, v in kwargs.items() if k != "pin_memory" or v}
        else:
            loader, direct = DataLoader(dataset, batch_sampler=sampler, **common, **kwargs), False
        return _FingerprintedLoader(loader, sampler, self._order, direct)

    def _shuffled(self, n: int, batch_size: int, g: torch.Generator, drop_last: bool) -> ShuffledBatches:
        """The batch sampler of run.loader and run.sampler (a rank's Run takes its share: attach.py)."""
        return ShuffledBatches(n, batch_size, g, drop_last)

    def ordered(self, batches: Iterable) -> "OrderedBatches":
        """``batches`` passed through in their own order (no shuffling), each batch's content (tensors,
        arrays, numbers, nested in tuples, lists or dicts) fingerprinted into data_order as it is
        consumed: the pairing proof for data that must not be shuffled. Iterable once per epoch like
        the object it wraps. Tensors on a GPU are digested there and folded in every 256 batches (no
        sync per batch)."""
        return OrderedBatches(batches, self._order)

    def consumed(self, batch) -> None:
        """Fingerprint one batch's content into data_order as the loop consumes it: for a loop that
        someone else iterates (a Lightning or Hugging Face callback sees each batch, not the loader)."""
        self._order.update_content(batch)

    def dataset(self, node, **call_site):
        """Instantiate a data node once per process, cached by its resolved config.

        Loading data draws no random numbers from the run's streams, so every (seed, arm) that
        shares a data config shares one loaded copy (the harness loads it before the first run to
        check it, so a missing file fails before any training). Do not modify it in place.
        """
        return cached_dataset(node, **call_site)

    # -- model and steps -------------------------------------------------------------------------

    def watch(self, model: torch.nn.Module | Iterable[torch.Tensor], total_steps: Optional[int] = None) -> None:
        """Fingerprint the initial weights and record the parameters at every ``run.step``.

        Call it once, after building the model and before the first step. The parameters of one
        dtype and device are moved into one buffer (same values and numerics) so the per-step
        digest is a few kernels. ``total_steps`` sizes the buffers and the progress bar.
        """
        if self._watched is not None:
            raise RunUsageError("run.watch was called twice: watch one model, once, before the first step.")
        if self._in_init:
            raise RunUsageError("call run.watch after the `with run.init():` block, not inside it.")
        self._watched = Watched(model, total_steps, self.device, flatten=flatten_parameters, **self._watch_options)

    @property
    def steps(self) -> int:
        """The optimizer steps recorded so far."""
        return self._watched.steps if self._watched is not None else 0

    def step(self, loss: torch.Tensor) -> None:
        """Record one optimizer step: the loss's bits and a digest of every parameter (no host sync
        except every ``check_every`` steps, where a non-finite loss stops the run)."""
        if self._watched is None:
            raise RunUsageError("run.step before run.watch: call run.watch(model) once before training.")
        self._watched.step(loss)

    def trained(self, steps: int) -> None:
        """Say how many optimizer steps the trainer took, counted apart from ``run.step`` (Lightning's
        ``global_step``, a Trainer's ``state.global_step``, the built-in loop's count). The record keeps
        it beside the steps it recorded (``fingerprints.steps_trained``); where they differ, the proofs
        are reported as covering part of the training. Not called: the count stays unknown."""
        self._trained = int(steps)

    def log(self, step: Optional[int] = None, **scalars) -> None:
        """Curve points at ``step`` (default: the steps recorded so far): floats, or 0-d tensors
        (converted here, a host sync). They go to result.json's curve and to wandb."""
        step = self.steps if step is None else int(step)
        row = self._curve.setdefault(step, {})
        for name, value in scalars.items():
            row[name] = float(value.item() if isinstance(value, torch.Tensor) else value)
        if self._progress is not None and "train_loss" in row:
            self._progress(step, self._watched.total if self._watched is not None else None, row["train_loss"])

    def autocast(self):
        """bf16 autocast around the forward pass when precision=bf16; no context at all in fp32."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def record_examples(self, correct, metric: Optional[str] = None) -> None:
        """Which test examples this run got right (a bool per example, in the test split's order),
        the per-example outcomes of the returned metric ``metric``: lets the analysis separate the
        test set's sampling noise from seed noise. The metric must be declared with examples: true
        (stats.metrics.NAME: {direction: max, unit: pts, examples: true}) for the analysis to use
        it. Without ``metric``: the one metric declared so. One record per metric (a second call
        for the same metric replaces the first).

        Called without ``metric`` when not exactly one metric is declared with examples: true (the
        call as it was before metric= existed), whose outcomes these are cannot be told: the slip is
        found after training, so it never fails the run. The record is set aside (result.json's
        examples_set_aside, unused by the analysis) with the line to add, which the analysis says
        once for all units (results.set_aside_note); a Run outside a harness run warns at finish."""
        t = torch.as_tensor(correct).detach().reshape(-1).to("cpu", torch.bool)
        if metric is None:
            metric, why = self._examples_metric()
            if metric is None:
                self._set_aside = [(t.numpy().copy(), why, None)]  # a second such call replaces the first
                return
        elif not isinstance(metric, str) or not metric:
            raise RunUsageError(f"run.record_examples(correct, metric={metric!r}): metric must be the name of "
                                f"the returned metric these outcomes are of, e.g. metric=\"test_accuracy\".")
        self._examples.pop(metric, None)
        self._examples[metric] = t.numpy().copy()

    def _examples_metric(self) -> tuple[Optional[str], str]:
        """(the one declared metric with examples: true, ""), else (None, why it cannot be told)."""
        named = [name for name, examples in (self._declared or {}).items() if examples]
        if len(named) == 1:
            return named[0], ""
        if self._declared is None:
            found = "no metrics were declared to this Run"
        elif not named:
            found = f"none of the declared metrics ({', '.join(self._declared) or 'none'}) has examples: true"
        else:
            found = f"several declared metrics have examples: true ({', '.join(named)})"
        return None, (f"run.record_examples(correct) without metric=: {found}, so whose per-example outcomes "
                      f"these are cannot be told (it is never guessed)")

    def black_box(self, final: str, covers: str = "metrics") -> None:
        """Say the training ran outside this process (a command the harness started): nothing was
        watched and no step recorded, so init, data order and steps are recorded as missing and the
        pairing rests on the seed alone. ``final`` is a digest of what the run produced (its metrics,
        the bytes of files it wrote): what the certificate compares. ``covers`` says which: a digest
        of the metrics alone may repeat under another seed (two runs printing the same rounded
        score), so the analysis calls equal finals a relabelled copy only when files were covered."""
        if self._watched is not None:
            raise RunUsageError("run.black_box after run.watch/run.step: a run is watched here or run elsewhere, not both.")
        self._black_box = (str(final), str(covers))

    def adopt(self, record: Mapping) -> None:
        """Say the training ran in a process of its own that recorded through ``harness.attach()``
        (a command arm's script): ``record`` is what that Run's finish wrote. Its fingerprints (init,
        data order, every step), per-example records and curve become this run's, so the pairing
        and the certificate rest on them as on a training function's."""
        if self._watched is not None or self._black_box is not None:
            raise RunUsageError("run.adopt after run.watch/run.step/run.black_box: a run is watched here or adopted, not both.")
        problem = adoption_problem(record)
        if problem is not None:
            raise RunUsageError(f"run.adopt: the record is not what an attached Run writes: {problem}.")
        self._adopted = dict(record)

    # -- the harness's side ----------------------------------------------------------------------

    def finish(self, metrics) -> dict:
        """Called by the harness after the training function returned: the run's record."""
        from harness.results import pack_example_records, set_aside_records

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - self._t0
        if self._black_box is not None:
            return black_box_record(metrics, *self._black_box, self._curve, seconds)
        if self._adopted is not None:
            return adopted_record(self._adopted, metrics, self._curve, seconds)
        if self._watched is None:
            raise RunUsageError(
                "the training function never called run.watch(model): without it there are no init or "
                "per-step fingerprints, so pairing and bit-exactness cannot be proven. Call run.watch(model) "
                "after building the model and run.step(loss) after each optimizer step."
            )
        if self.steps == 0:
            raise RunUsageError("the training function never called run.step(loss): no step was recorded.")
        watched = self._watched.fingerprints()
        out = {
            "metrics": dict(metrics),
            "fingerprints": {
                "init": watched["init"],
                "data_order": self._order.hexdigest() if self._order.batches else None,
                "final": watched["final"],
                "steps": watched["steps"],
                "batches": self._order.batches,
                "digests": host_digest.digests_version(),  # how steps and a content data order were hashed
            },
            "curve": curve_columns(self._curve),
            "timing": {
                "train_seconds": seconds,
                "steps": self.steps,
                "steps_per_s": self.steps / seconds if seconds > 0 else None,
                "ms_per_step": 1000 * seconds / self.steps,
            },
        }
        if self._trained is not None:  # unknown stays unknown: no default from the steps recorded
            out["fingerprints"]["steps_trained"] = self._trained
        if not self._order.batches:
            out["fingerprints"]["missing"] = {"data_order": f"no batch was drawn through the Run: {HOW_TO_FILL['data_order']}"}
        for name in [name for name in self._examples if name not in metrics]:  # found only now: set aside
            self._set_aside.append((self._examples.pop(name), (
                f"run.record_examples recorded the per-example outcomes of {name}, but the training function "
                f"returned no such metric (it returned {', '.join(metrics) or 'none'})"),
                f"return {name} from the training function, or name the returned metric they make up in the "
                f"call: run.record_examples(correct, metric=\"NAME\")"))
        if self._examples:
            out["examples"] = pack_example_records(self._examples)
        if self._set_aside:
            out["examples_set_aside"] = set_aside_records(self._set_aside, self.run_dir is None)
        if self._save_weights or self._keep:
            out["weights"] = self._watched.weights()
        if self.notices:
            out["notices"] = list(self.notices)
        return out

    @property
    def last_loss(self) -> Optional[float]:
        """The last recorded loss (a host sync)."""
        return self._watched.last_loss if self._watched is not None else None


def _declared(metrics: Optional[Mapping]) -> Optional[dict]:
    """name -> whether per-example outcomes back it, from ``stats.metrics`` entries or MetricSpecs.

    Read here without importing the declaration (the Run sits below the config): the declaration
    itself checks each entry before any run."""
    if metrics is None:
        return None
    out = {}
    for name, entry in metrics.items():
        examples = getattr(entry, "examples", None)
        if examples is None:
            examples = entry.get("examples", False) if isinstance(entry, Mapping) else False
        out[str(name)] = examples is True
    return out

