"""The config schema, registered in Hydra's ConfigStore.

Every yaml file under conf/ is merged onto these dataclasses, so an unknown key or a value of the
wrong type fails when Hydra composes the config, before anything runs. Enums list what is allowed;
OmegaConf's error then names the key and the allowed values.
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from harness.config.fdr_spec import FDR_METHODS



class Mode(Enum):
    strict = "strict"  # use_deterministic_algorithms(True): an op without a deterministic kernel raises
    warn = "warn"  # the same, but such an op only warns (and the run is not bit-exact)
    off = "off"  # PyTorch defaults; cudnn.benchmark allowed


class Device(Enum):
    auto = "auto"  # cuda when available, else cpu
    cpu = "cpu"
    cuda = "cuda"


class Precision(Enum):
    fp32 = "fp32"
    bf16 = "bf16"  # bf16 autocast around forward and loss; weights and optimizer stay fp32


class MatmulPrecision(Enum):  # torch.set_float32_matmul_precision
    highest = "highest"  # float32 matmuls in float32
    high = "high"  # TF32 in CUDA matmuls (and in oneDNN's on CPUs that have it)
    medium = "medium"  # TF32 on CUDA; bf16 inside oneDNN's float32 matmuls on CPUs that have it


@dataclass
class DeterminismConfig:
    mode: Mode = Mode.strict
    # torch.set_num_threads in every run: on CPU 1 vs 2 threads changes the bits. "auto" (the default):
    # the cores free at start, never more (pinned threads on a busy core wait at every barrier:
    # 15-135x slower); or an integer >= 1. Resolved before hashing: see harness/training/threads.py.
    threads: Any = "auto"
    # Off by default. On, deterministic mode writes NaN into every new tensor, so that a read of
    # memory nothing wrote is reproducible. A valid program never makes such a read, so the bits
    # do not change (scripts/replicate_divergence.py: fill on and off give identical weights); and
    # what shows a setup is bit-exact is the repro certificate (one run rerun and compared step by
    # step), fill or no fill. Filling costs one extra write of every new tensor: the profiler put
    # it at 5-10% of a small ResNet18 step on a CPU, 1.4% of the small CNN's (see
    # docs/determinism-cost.md); scripts/gpu_check.sh measures it on a GPU. Turn it on to hunt a
    # suspected read of uninitialized memory: such a read then gives NaN.
    fill_uninitialized_memory: bool = False
    cudnn_benchmark: bool = False  # only allowed with mode=off
    # Math modes, pinned in every unit and restored after it (harness/training/math_modes.py): they
    # change the bits of a float32 run, and a report's "fp32" means float32 unless these say TF32.
    float32_matmul_precision: MatmulPrecision = MatmulPrecision.highest
    tf32_cudnn: bool = False  # TF32 in cuDNN convolutions and RNNs (PyTorch's own default is on)


BUILTIN_LOOP = "harness.builtin.loop.train"  # TrainConfig.fn's default


@dataclass
class TrainConfig:
    # The training function: "package.module.name", called once per (seed, arm) as
    # fn(cfg, run, **kwargs) -> dict of final metrics (see harness/training/run.py for the Run).
    fn: str = BUILTIN_LOOP
    kwargs: Dict[str, Any] = field(default_factory=dict)  # your function's own keyword arguments
    # The knobs below are read by the built-in loop (a loop of your own may read them too).
    # 15 digits epochs (315 steps) reach ~98%; the default experiment's 21 runs then fit in a
    # minute on 2 CPU cores, wandb and the certificate's rerun included.
    epochs: int = 15
    max_steps: Optional[int] = None  # stop after this many optimizer steps (overrides epochs)
    batch_size: int = 64
    eval_batch_size: int = 512
    log_every: int = 10  # steps between curve points, progress updates and non-finite checks
    num_workers: int = 0  # DataLoader workers; any value gives the same batches
    # A command arm (harness/integrations/command.py): set cmd to run an unchanged script once per
    # (seed, arm) instead of train.fn, and read its metrics. {seed}, {arm}, {run_dir} (the unit's
    # folder) are replaced in cmd, args values, metrics_from.file and compare_files.
    cmd: Any = None  # null: train.fn runs; a string (split like a shell) or a list of arguments
    cwd: Optional[str] = None  # the command's working folder; null: the folder the harness was launched from
    args: Dict[str, Any] = field(default_factory=dict)  # flags: true -> --key, false/null -> omitted, else --key value
    seed_arg: Optional[str] = "--seed"  # the harness's seed S is passed as `--seed S`; null: not passed
    # {stdout: {metric: 'regex with one (group)'}}: the last match's first group; and/or
    # {file: '{run_dir}/metrics.json'}: a JSON object of name -> number the command writes
    metrics_from: Any = None
    timeout_s: Optional[float] = None  # kill a unit that runs longer (seconds); null: no limit
    compare_files: List[str] = field(default_factory=list)  # files the certificate compares byte for byte
    # processes one unit runs as: 1, or N ranks of one process group that the harness starts for
    # train.fn (integrations/ranks/); an integer >= 1, checked by the preflight (any type here so a
    # bad value is refused with its own sentence)
    nproc: Any = 1
    # seconds a rank waits in a collective for the other ranks before the unit fails (the process
    # group's timeout; integrations/ranks/rank_timeout.py); null: torch's default. Any type here so a
    # bad value is refused with its own sentence
    rank_timeout_s: Any = None


class WandbMode(Enum):
    offline = "offline"  # write runs under the output folder; upload later with `wandb sync`
    online = "online"  # stream to the wandb server (needs WANDB_API_KEY or `wandb login`)
    disabled = "disabled"  # wandb runs as a no-op: nothing is written


@dataclass
class WandbConfig:
    # A value set here (or on the command line) wins over the WANDB_* variable, which wins over the
    # default: mode null -> $WANDB_MODE, else offline; project null -> $WANDB_PROJECT, else harness.
    project: Optional[str] = None
    entity: Optional[str] = None  # null: $WANDB_ENTITY, else your account's default
    mode: Optional[WandbMode] = None
    init_timeout: float = 60.0  # seconds wandb may take to start a run; online, then go offline
    # Train loss every N steps (and always at the last step). A wandb history row costs ~0.5-0.9 ms,
    # a digits step ~2.5 ms: every step would add ~25% to the experiment. The exact loss of every
    # step is in result.json (fingerprints.steps.loss); 1 logs them all.
    history_every: int = 10
    tags: List[str] = field(default_factory=list)  # empty: $WANDB_TAGS
    group: Optional[str] = None  # null: $WANDB_RUN_GROUP, else <experiment>:<folder name>:<hash of its path>
    name: Optional[str] = None  # prefix of every run's name; null: $WANDB_NAME, else none


@dataclass
class LoggerConfig:
    name: str = "wandb"  # wandb | none
    wandb: WandbConfig = field(default_factory=WandbConfig)


class Direction(Enum):
    max = "max"  # higher is better (accuracy)
    min = "min"  # lower is better (loss, error, perplexity, ECE)


def builtin_loop_metrics() -> dict:
    """What the built-in loop returns, declared for an experiment that runs it and declares no metrics
    of its own (the built-in experiments declare them in their yaml too). test_accuracy is the mean of
    the per-example outcomes it records (run.record_examples(correct, metric="test_accuracy")), in
    percentage points. Never merged into a user's stats.metrics: a declaration holds what
    the experiment declares."""
    return {"test_accuracy": {"direction": "max", "unit": "pts", "examples": True},
            "test_loss": {"direction": "min"}, "train_loss": {"direction": "min"}}


# Built from the names (lord++ is not an identifier): OmegaConf reads a string by member name.
FDRMethod = Enum("FDRMethod", [(name, name) for name in FDR_METHODS])


@dataclass
class FDRConfig:
    # The false discovery rate held over every claim in the project's ledger (docs/statistics.md):
    # none (each claim at stats.alpha), lond, lord++, saffron, addis, or lond_dep / lord_dep (any
    # dependence between claims). With a method, the experiment's level alpha_t is taken from the
    # ledger when it is declared, before any data.
    method: FDRMethod = FDRMethod["none"]
    level: float = 0.1


@dataclass
class LedgerConfig:
    # Every declared analysis appends its claims to the project's ledger (python -m harness.ledger).
    enabled: bool = True
    # null: outputs/ledger.sqlite under the launch directory ($HARNESS_LEDGER when set); a path: that file
    path: Optional[str] = None
    # A team's ledger in PostgreSQL instead (postgresql://USER@HOST/DB; pip install "psycopg[binary]"),
    # without a password: it is recorded; PGPASSWORD, ~/.pgpass or a service file give it (ledger_spec.py)
    url: Optional[str] = None


@dataclass
class StatsConfig:
    metric: str = "test_accuracy"  # the primary metric: the verdict is about it (a key of the metrics)
    # Every metric to report, declared (never guessed from a name): a direction (rmse: min) or
    # {direction: max|min, unit: TEXT, examples: true|false}. unit is how the numbers read (pts =
    # percentage points); examples: the metric is the mean of the per-example 0/1 outcomes the
    # training function records with run.record_examples(correct, metric=NAME), which gives the
    # test set's own noise. Checked when the declaration is made (harness/config/declaration.py).
    # Empty: none declared here; an experiment that runs the built-in loop and declares none gets the
    # built-in loop's (builtin_loop_metrics). A default with entries would be merged into every user's own.
    metrics: Dict[str, Any] = field(default_factory=dict)
    alpha: float = 0.05
    # The smallest effect that matters, in the metric's units, declared before the data; one key for
    # every mode. auto = the seed noise floor, ESTIMATED FROM THE DATA (fixed seeds only); null = no
    # margin: claims are better or worse than 0, never "equivalent".
    margin: Any = "auto"
    baseline: Optional[str] = None  # arm the others are compared with; default: the first arm
    # A run whose loss or metric became non-finite: worst (counted as worse than every finished run of
    # its seed; decided by the signed-rank sign-flip test), exclude (left out with its partner: the
    # verdict then leads with a survivorship warning) or fail (no verdict). Declared before the data.
    diverged: str = "worst"
    bootstrap_resamples: int = 9999
    bootstrap_seed: int = 0
    fdr: FDRConfig = field(default_factory=FDRConfig)


@dataclass
class ReproConfig:
    certificate: bool = True  # rerun one (seed, arm) and compare every per-step fingerprint
    save_weights: bool = False  # write final weights (weights.pt) beside result.json for harness.diff
    keep_step_weights: int = 0  # keep full weights for the first N steps (the butterfly curve)
    # A run's identity covers the harness's source and every package a _target_ or train.fn names
    # (outside site-packages). Add files or folders your code reads (a data-prep script), and/or
    # the git tree (HEAD's tree plus uncommitted changes) of those packages' repository.
    code_paths: List[str] = field(default_factory=list)
    code_git: bool = False


@dataclass
class SequentialConfig:
    # Add seeds until the comparison is settled (docs/sequential.md): seeds run in batches, every
    # arm of a seed in the same batch; after each batch a group-sequential design (alpha-spending,
    # repeated confidence intervals) decides, with its error rate kept whatever made the run stop.
    # Everything here is the design: declare it before any data, and do not change it on resume.
    enabled: bool = False  # on: python -m harness runs the loop; -m hydra/sweeper=harness_sequential needs no flag
    max_seeds: int = 50  # the most seeds (complete pairs) any arm gets: the last look is here
    min_seeds: Optional[int] = None  # the first look; null: the fewest seeds a claim can rest on (5-7)
    seeds_per_look: int = 2  # seeds added between looks
    alpha: Optional[float] = None  # the error rate of each claim; null: stats.alpha
    # The margin is stats.margin (one key for every mode; a number or null here, never auto). This key
    # is kept only to say so to a config written before: any value is refused with that sentence.
    margin: Any = None
    equivalence: Optional[bool] = None  # may "equivalent" be claimed? null: yes when stats.margin is a number
    spending: str = "pocock"  # alpha-spending function: pocock | obrien-fleming | hsd
    gamma: float = 1.0  # the Hwang-Shih-DeCani parameter (spending=hsd only; -4 is like obrien-fleming)
    futility: float = 0.05  # stop as futile when no plausible effect settles a claim with this chance; 0: never
    # which chance futility bounds: reach (any claim, at every effect inside the interval) | better (the
    # predictive chance that max_seeds shows better: for keep/discard decisions; python -m harness.judge's)
    futility_rule: str = "reach"
    # futility-only looks before the first claim look: at this many seeds, then every seeds_per_look below
    # min_seeds (>= 3); they spend no alpha, so they only stop runs heading nowhere (futility_rule better only;
    # python -m harness.judge uses 4); null: none
    futility_from: Optional[int] = None
    max_failures: int = 0  # failed runs tolerated (their seeds count for no arm) before the run stops


@dataclass
class RaceConfig:
    # Race the arms (or one swept key: optim.lr=0.01,0.03,0.1) to the best with
    # -m hydra/sweeper=harness_race, or the arms without -m and enabled=true (docs/racing.md): every
    # configuration on the same seeds, in batches; after each look Kim & Nelson's procedure drops
    # those shown worse than the best by more than stats.margin (a number > 0), with stats.alpha.
    # The design: declare it before the data.
    enabled: bool = False  # on: python -m harness races the arms; -m hydra/sweeper=harness_race needs no flag
    min_seeds: int = 10  # the first look, where each pair's variance of differences is estimated
    seeds_per_look: int = 2  # seeds added between looks
    max_seeds: int = 40  # the most seeds a configuration gets; the race stops there with the set left
    max_failures: int = 0  # failed runs tolerated (their seeds count for no configuration)


@dataclass
class ABConfig:
    factor: str = "loss.label_smoothing"  # the ONE config path where arms differ
    # arm name -> the value placed at the factor. Empty here: an experiment file declares its arms
    # (a default here would be merged with them). On the command line, ab.arms.B=0.2 changes an
    # arm, +ab.arms.C=0.3 adds one, ~ab.arms.B removes one.
    arms: Dict[str, Any] = field(default_factory=dict)
    seeds: List[int] = field(default_factory=lambda: list(range(10)))
    sequential: SequentialConfig = field(default_factory=SequentialConfig)  # seeds in order, then ab.seeds' missing integers
    race: RaceConfig = field(default_factory=RaceConfig)  # the race sweeper's design (docs/racing.md)
    # The same A/B (arms, seeds) under several conditions: name -> config overrides, e.g.
    # {digits: [data=digits], synthetic: [data=synthetic]}. Each condition gets its own paired
    # verdict; the primary claim is the average effect across them (docs/statistics.md). Any, not a
    # typed Dict, so that ab.conditions={...} on the command line can set them all; the declaration
    # checks the shape (harness/config/declaration.py). Add one with +ab.conditions.NAME=[...].
    conditions: Any = None  # null: none


@dataclass
class Config:
    experiment_name: str = "default"
    seed: Optional[int] = None  # narrow the run to one seed of ab.seeds (the unit a sweep launches)
    arm: Optional[str] = None  # narrow the run to one arm
    # The revision of the researcher's code a unit runs, set only by the arms of ab.factor=code (a
    # commit, branch, tag or WORKTREE: docs/code-arms.md). null: the code as it is, the usual.
    code: Optional[str] = None
    device: Device = Device.auto
    precision: Precision = Precision.fp32
    resume: bool = True  # skip a (seed, arm) whose completed result matches config and code
    # Seconds a run waits for another process's lock on its (seed, arm) folder before it gives up
    # with a message naming the lock file and its holder (PID, host). null: wait as long as the
    # holder runs (a legitimate holder may train for hours); the wait is logged either way.
    lock_timeout: Optional[float] = None
    progress: bool = True  # live progress bar on the terminal
    tables: bool = False  # every table on the terminal; off: the verdict screen (report.md always has them all)
    # (seed, arm) units side by side in long-lived worker processes: "auto" (the free cores divided
    # by the threads per unit; 1 unit -> this process), or an integer >= 1 (1: one after another, in
    # this process). Changes no bit: see harness/training/threads.py and harness/experiment/parallel/workers.py.
    workers: Any = "auto"
    # One random stream's seed set apart from ``seed`` (init, data_order, model, augment, or a name
    # given to run.generator): that stream moves, the others stay. Empty (the default): each derives
    # from the seed, and the run keeps its bits and identity. Both arms of a unit get the same streams.
    seeds: Dict[str, Optional[int]] = field(default_factory=dict)
    # Pluggable components: _target_ nodes (a dotted path + its keyword arguments), ours or yours.
    # Every key under one is an argument of its target, checked against its signature before the
    # first run. The built-in loop passes the rest at the call site: model(in_channels=,
    # num_classes=, image_size=) -- each model takes the ones it names --, optim(params=),
    # scheduler(optimizer=); a data node returns a harness.builtin.data.Datasets for it.
    data: Any = None
    model: Any = None
    loss: Any = None
    optim: Any = None
    scheduler: Any = None  # null: constant learning rate; stepped once per optimizer step
    determinism: DeterminismConfig = field(default_factory=DeterminismConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    ab: ABConfig = field(default_factory=ABConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    repro: ReproConfig = field(default_factory=ReproConfig)
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
