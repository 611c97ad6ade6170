#!/usr/bin/env bash
# One call of a lent machine of several GPUs: `scripts/device_collect.sh` once per GPU, each with its own problems.
#
#   scripts/device_collect_gpus.sh SECONDS 'COLLECT_ARGS of GPU 0' 'COLLECT_ARGS of GPU 1' ...
#   e.g. scripts/device_collect_gpus.sh 560 '--workload sampled --layouts 2d2d --count 1450 --reps 3 --skip ids.txt' \
#            '--workload sampled_grad_a --count 2300 --reps 3 --skip ids.txt'
#
# Why not `autoheur collect --gpus all`: that deals every GPU every N-th problem, so each GPU precompiles every compile
# key of the list (about 100 s a key). Here each GPU gets the problems the caller gives it (one workload, one key, as a
# rule) and a share of the CPU cores, and sees only its own device (CUDA_VISIBLE_DEVICES), so the precompile checks
# run on it too. GPU i collects into .cache/gpu<i> (a warm machine keeps it and Triton's cache between calls) and
# returns it as $OUT/gpu<i>/dataset.tgz (in 15 MB pieces when larger), with its log beside it. Merge them
# afterwards with `autoheur data merge`.
set -u
SECONDS_=$1
shift
N=$#
[ "$N" -ge 1 ] || { echo "usage: $0 SECONDS 'ARGS of GPU 0' ['ARGS of GPU 1' ...]" >&2; exit 2; }
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$N" -le "$GPUS" ] || { echo "$N argument sets but $GPUS GPUs" >&2; exit 2; }
WORKERS=$(($(nproc) / N))
OUT=${OUT:-/tmp/out}
i=0
for args in "$@"; do
    read -ra words <<<"$args"
    mkdir -p "$OUT/gpu$i"
    CUDA_VISIBLE_DEVICES=$i OUT=$OUT/gpu$i bash "$(dirname "$0")/device_collect.sh" ".cache/gpu$i" "$SECONDS_" \
        "${words[@]}" --workers "$WORKERS" >"$OUT/gpu$i/stdout.log" 2>&1 &
    i=$((i + 1))
done
wait
for d in "$OUT"/gpu*; do
    echo "== $d"
    tail -n 4 "$d/device_collect.log"
done
