#!/usr/bin/env bash
# Throughput on a GPU machine, unattended: the GPU's model; rollout and update tokens/s and model FLOPs
# utilisation (against the datasheet's dense bf16 peak when the GPU is known, else a measured bf16
# matmul) for the demo policy (2 layers, d = 64) and a ~10M-parameter one (6 layers, d = 384), at batch
# sizes that fill the device; the host syncs per generated token while playing; and the wall time of
# the main job (sweeps/quick.toml, 2 workers) on a fresh store.
#
#   bash benchmarks/gpu.sh                 # from the repository root, with the project's venv
#   PYTHON=python3 ROLLOUTS=8192 bash benchmarks/gpu.sh
#
# Needs a CUDA build of torch (`pip install -e .` without the CPU pin). Writes nothing in the checkout:
# the main job runs on a copy of the code in a temporary folder, so its store (mlruns/ there) is fresh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # the main job runs elsewhere
ROLLOUTS=${ROLLOUTS:-4096}        # rollouts per RL step (prompts x G): the harness plays them as one batch
MINIBATCH=${MINIBATCH:-$ROLLOUTS} # segments per update mini-batch: the whole batch in one pass

echo "== GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"

echo "== throughput: demo and ~10M-parameter policies, $ROLLOUTS rollouts per step"
# this tree alone (the device's copy has no git history for a baseline); no token bound on a mini-batch:
# length buckets sized for a CPU core's cache would starve a GPU
PYTHONPATH=. "$PY" benchmarks/bench_throughput.py --device cuda --models demo 10m --steps 3 --baseline none \
    --rollouts "$ROLLOUTS" --set "train.minibatch_segments=$MINIBATCH" --set train.minibatch_tokens=0 --sync-check

echo "== main job: simlab sweep sweeps/quick.toml --workers 2 on a fresh store"
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
cp -r simlab tasks analysis sweeps "$fresh"/
sed 's/^name = "quick"$/name = "quick-gpu"/' sweeps/quick.toml > "$fresh/sweeps/quick-gpu.toml"
TIMEFORMAT="main job wall time: %R s (base model included)"
time (cd "$fresh" && PYTHONPATH="$fresh" "$PY" -m simlab.cli sweep sweeps/quick-gpu.toml --workers 2 --no-progress \
    > "$fresh/sweep.log" 2>&1) || { tail -40 "$fresh/sweep.log"; exit 1; }
grep -E "^done:|^results table" "$fresh/sweep.log" || true
