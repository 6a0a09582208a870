"""Ways in from outside: a researcher's code as it already is, behind the same door as a train.fn.

Owns: command_spec.py (a command arm's train.* keys read and checked before any unit runs, the
argument list and the files that make up the command's code; torch-free), command.py (the command
arm as a training function: ``train(cfg, run)`` runs the command once for the Run's (seed, arm) and
reads its metrics), command_run.py (the Run of a command unit on the CPU, torch-free: the harness's
process that runs it never imports torch), process.py (the child process: its environment, its
output files, a timeout, and a process group that dies with the harness), group_guard.py (the small
process that kills a unit's group when the harness is killed), interrupts.py (a Ctrl-C held while a
child process starts; the test seam that sends one at a named point), workdir.py (a unit's
working folder of its own, mirroring the launch folder through links), command_env.py (what a
command unit's record says of its process: what the harness set, what the script reported, else
unknown; the code identity's interpreter), interpreter_probe.py (an interpreter's Python and package
versions, read by running that interpreter; stdlib only), attach.py (``harness.attach()``: the unit's Run
from inside the script a command arm starts, its record written for the command arm to adopt; a
stand-alone Run that records nothing when the script runs on its own), lightning.py (the
Callback for a user's own Lightning Trainer, ``harness.lightning``; the only importer of lightning),
hf.py (the Callback for a user's own Hugging Face Trainer, ``harness.hf``, and ``harness.hf.fit``; the
only importer of transformers), wandb_hook.py (one wandb run per unit when a trainer brings its own
wandb logger: shared with the tracker's run, or turned off, said; torch-free), revisions/ (a code
arm's revision read out of git, submodules included, and its unit run from that snapshot: sys.path
and the modules for a train.fn, the script and PYTHONPATH for a command), ranks/ (a unit that spans processes, torchrun: which rank a
process is, the ranks' records made one, the replicas compared, the failed rank named, a rank's
share of the order, the ranks a launcher starts out of the unit's process group).

May import: harness.training (the Run's public API) and harness.results only. The experiment calls a
command arm through ``train.fn``'s door (``training_fn``), so resume, workers, sweeps, the
certificate and tracking treat it as any training function.
"""
