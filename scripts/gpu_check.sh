#!/usr/bin/env bash
# One command on one GPU: what deterministic mode costs (scripts/bench_determinism.py, each mode in
# its own process), whether two same-seed runs part ways (scripts/replicate_divergence.py), ResNet18
# on CIFAR-shaped batches, and 20 units side by side on the one GPU against one alone
# (scripts/gpu_side_by_side.py: the default experiment's small CNN, then ResNet18; goal <= 3x, the
# same bits as alone), and a 1-GPU DDP smoke step (scripts/gpu_ddp_smoke.py: torchrun, NCCL, world size 1).
#
#   scripts/gpu_check.sh OUTDIR             on a GPU: at most 510 s, every timeout counted
#   scripts/gpu_check.sh --dry-run OUTDIR   on a CPU: every step, tiny, at most 300 s
#
# Each step runs under its own timeout; a step that times out or fails is recorded and the next
# step runs, so the check always finishes and always leaves its tables. steps.tsv (and the end of
# the log) says, per step: its budget, the seconds it took, and ok / timed out / failed / skipped.
# GPU_CHECK_TIMEOUT_<STEP>=SECONDS overrides one step's budget (STEP as in steps.tsv, upper case).
#
# Needs torch, numpy, scipy and this checkout (PYTHONPATH points at it; no pip install); torchvision
# for the ResNet18 steps and matplotlib for the divergence figure: both are checked before anything
# runs, and a missing one skips (or draws no figure for) what needs it, said by name. No Hydra, no
# wandb. OUTDIR gets (flat):
#   env.txt                    date, nvidia-smi, torch version, what is missing
#   gpu_check.log              everything printed
#   steps.tsv                  each step: budget, seconds, status
#   determinism_cost.md/.json  the cost table (4 modes x fp32, bf16)
#   divergence.md/.json/.png   the same-seed pairs: first divergent step, max |dw|, curves
#   side_by_side.txt           20 units at once vs one alone, small CNN and ResNet18
set -uo pipefail  # no -e: a failed step is recorded, and the next one runs

dry=0
if [ "${1:-}" = "--dry-run" ]; then
  dry=1
  shift
fi
if [ $# -ne 1 ]; then
  echo "usage: $0 [--dry-run] OUTDIR" >&2
  exit 2
fi
out=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PYTHONPATH="$repo"
export PYTHONUNBUFFERED=1  # the log shows progress as it happens, and what ran before a timeout
py=${PYTHON:-$(command -v python || command -v python3)}
mkdir -p "$out"
log="$out/gpu_check.log"
steps="$out/steps.tsv"
: >"$log"
: >"$out/env.txt"
: >"$out/side_by_side.txt"
printf 'step\tbudget_s\tseconds\tstatus\n' >"$steps"

# Budgets (s): they add up to 510 on a GPU and 300 in a dry run, so the whole check fits its promise.
if [ $dry = 1 ]; then
  declare -A budget=([env]=30 [preflight]=30 [ddp]=30 [cost]=80 [divergence]=40 [side_by_side_cnn]=45 [side_by_side_resnet]=45)
else
  declare -A budget=([env]=10 [preflight]=40 [ddp]=30 [cost]=150 [divergence]=90 [side_by_side_cnn]=80 [side_by_side_resnet]=110)
fi
total=0
for name in "${!budget[@]}"; do
  override="GPU_CHECK_TIMEOUT_${name^^}"
  budget[$name]=${!override:-${budget[$name]}}
  total=$((total + budget[$name]))
done

record() {  # step, status, seconds
  printf '%s\t%s\t%s\t%s\n' "$1" "${budget[$1]}" "$3" "$2" >>"$steps"
  echo "== step $1: $2 (${3} s of ${budget[$1]} s)" | tee -a "$log"
}

# run_step NAME TEE_FILE CMD...: CMD under the step's timeout, its output to the log (and TEE_FILE)
run_step() {
  local name=$1 also=$2 start status
  shift 2
  start=$(date +%s)
  echo "== step $name (at most ${budget[$name]} s): $*" | tee -a "$log"
  timeout --kill-after=5 "${budget[$name]}" "$@" 2>&1 | tee -a "$log" ${also:+-a "$also"}
  status=${PIPESTATUS[0]}
  local took=$(($(date +%s) - start))
  case $status in
    0) record "$name" ok "$took" ;;
    124 | 137) record "$name" "timed out" "$took" ;;
    *) record "$name" "failed (exit status $status)" "$took" ;;
  esac
}

skip() {  # step, why
  record "$1" "skipped: $2" 0
}

finish() {  # the steps table, always; exit status 1 when a step timed out or failed
  local code=$?
  echo "gpu_check done: $out (budget ${total} s)" | tee -a "$log"
  column -t -s $'\t' "$steps" 2>/dev/null | tee -a "$log" || cat "$steps"
  if grep -qE $'\t(timed out|failed)' "$steps"; then code=1; fi
  exit $code
}
trap finish EXIT

echo "gpu_check: $([ $dry = 1 ] && echo "dry run on the CPU" || echo "on the GPU"), at most ${total} s" | tee -a "$log"
run_step env "$out/env.txt" bash -c "
  echo \"date: \$(date -u '+%Y-%m-%d %H:%M:%S UTC')\"; echo \"python: $py\"
  nvidia-smi || echo \"nvidia-smi failed with exit status \$?\"
  $py -c 'import torch; print(\"torch\", torch.__version__, \"CUDA\", torch.version.cuda)'"

# What is there, before anything runs: a missing torchvision skips the ResNet18 steps (named), a
# missing matplotlib only the figure; the GPU path must import neither Hydra nor wandb.
missing=$("$py" - <<'EOF' 2>/dev/null
import importlib.util
print(" ".join(m for m in ("torch", "numpy", "scipy", "torchvision", "matplotlib") if importlib.util.find_spec(m) is None))
EOF
)
echo "missing: ${missing:-nothing}" | tee -a "$log" "$out/env.txt"
has() { [[ " $missing " != *" $1 "* ]]; }
for need in torch numpy scipy; do
  if ! has $need; then
    echo "$need is missing: nothing can run; install it (pip install $need) and rerun" | tee -a "$log"
    exit 1
  fi
done
has matplotlib || echo "matplotlib is missing: divergence.png is not drawn (the tables are)" | tee -a "$log"
device=cuda
[ $dry = 1 ] && device=cpu
run_step preflight "" "$py" - "$device" <<'EOF'
import sys

sys.path.insert(0, "scripts")
import bench_determinism, replicate_divergence, gpu_side_by_side  # noqa: E401,F401  (imports harness too)

bad = sorted({m.split(".")[0] for m in sys.modules} & {"hydra", "omegaconf", "wandb"})
if bad:
    sys.exit(f"the GPU path imported {', '.join(bad)}; it must run with torch, numpy and scipy alone")
import torch

if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device: this check needs a GPU (--dry-run walks it on a CPU)")
print(f"imports ok (no hydra, omegaconf, wandb); device: {torch.cuda.get_device_name() if sys.argv[1] == 'cuda' else 'cpu (dry run)'}")
if sys.argv[1] == "cuda":  # a trainer callback's per-step calls must not wait for the device
    from harness.training.run import Run

    run = Run(0, "cuda")
    model = torch.nn.Linear(8, 4).cuda()
    run.watch(model, 100)
    batch = (torch.randn(16, 8, device="cuda"), {"y": torch.randint(0, 4, (16,), device="cuda")})
    run.consumed(batch)  # the first call copies the digest's weight table to the device
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            run.consumed(batch)
            loss = model(batch[0]).sum()
            loss.backward()
            run.step(loss)
        print("per step, run.consumed (a callback's batch) and run.step: no host sync")
    except RuntimeError as e:
        print(f"HOST SYNC in a step's recording: {e}")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    fp = run.finish({})["fingerprints"]
    print(f"data_order over {fp['batches']} batches on the device, folded in at the end: {fp['data_order']}")
else:
    print("the no-host-sync check of a step's recording needs CUDA (dry run: not run)")
EOF
if [ "$(tail -n 1 "$steps" | cut -f4)" != ok ] && [ $dry = 0 ]; then
  echo "the preflight did not pass: the GPU steps are skipped" | tee -a "$log"
  for name in ddp cost divergence side_by_side_cnn side_by_side_resnet; do skip $name "the preflight did not pass"; done
  exit 1
fi

# DDP smoke: one rank under torchrun (a lent machine has one GPU), NCCL, 5 steps recorded by the Run.
run_step ddp "" "$py" -m torch.distributed.run --standalone --nproc_per_node=1 scripts/gpu_ddp_smoke.py --device "$device"

if [ $dry = 1 ]; then  # the same steps and scripts, tiny: a digits-shaped small CNN, a few steps
  tiny=(--device cpu --model small_cnn --channels 1 --image-size 8 --batch 16 --threads 1)
  run_step cost "" "$py" scripts/bench_determinism.py "${tiny[@]}" --steps 2 --warmup 1 --repeats 1 \
    --profile-steps 0 --isolate --out "$out"
  run_step divergence "" "$py" scripts/replicate_divergence.py "${tiny[@]}" --steps 3 --out "$out"
  run_step side_by_side_cnn "$out/side_by_side.txt" "$py" scripts/gpu_side_by_side.py "${tiny[@]}" --units 2 \
    --steps 3 --timeout "${budget[side_by_side_cnn]}"  # one launch may take the step's whole budget
  if has torchvision; then
    run_step side_by_side_resnet "$out/side_by_side.txt" "$py" scripts/gpu_side_by_side.py --device cpu \
      --model resnet18 --image-size 8 --batch 2 --threads 1 --units 2 --steps 1 --timeout "${budget[side_by_side_resnet]}"
  else
    skip side_by_side_resnet "torchvision is missing"
  fi
  exit 0
fi

# Cost: 8 cells x 10 rounds x (5 warm-up + 50 timed) steps, about 4,400 ResNet18 steps; each mode
# in its own process (--isolate), so cudnn.benchmark's plans cannot serve the benchmark-off rows.
if has torchvision; then
  run_step cost "" "$py" scripts/bench_determinism.py --device cuda --model resnet18 --batch 128 \
    --steps 50 --warmup 5 --repeats 10 --isolate --out "$out"
  # Divergence: 3 pairs x 2 runs x 200 ResNet18 steps, with a fingerprint after every step.
  run_step divergence "" "$py" scripts/replicate_divergence.py --device cuda --model resnet18 --batch 128 \
    --steps 200 --out "$out"
else
  skip cost "torchvision is missing (ResNet18)"
  skip divergence "torchvision is missing (ResNet18)"
fi
# Side by side: 20 units x 330 steps of the default experiment's CNN (digits-shaped, batch 64),
# then 20 x 100 ResNet18 steps (CIFAR-shaped, batch 128), each against one unit alone.
run_step side_by_side_cnn "$out/side_by_side.txt" "$py" scripts/gpu_side_by_side.py --device cuda --units 20 \
  --model small_cnn --channels 1 --image-size 8 --batch 64 --steps 330 --threads 1 --timeout "${budget[side_by_side_cnn]}"
if has torchvision; then
  run_step side_by_side_resnet "$out/side_by_side.txt" "$py" scripts/gpu_side_by_side.py --device cuda --units 20 \
    --model resnet18 --batch 128 --steps 100 --threads 1 --timeout "${budget[side_by_side_resnet]}"
else
  skip side_by_side_resnet "torchvision is missing"
fi
