#!/usr/bin/env bash
# One call of the lent GPU machine that grows a dataset (BENCHMARKS.md, Collection):
#   1. `autoheur collect ARGS --out DIR` until about 2 minutes before the call's end,
#   2. `autoheur data refine DIR`, then `autoheur data polish DIR`, in the time left, on the collection's `--gpus`
#      (both resumable, so what a call leaves the next one does),
#   3. `autoheur data pack DIR`, then DIR (and the call's log) to $OUT as one tarball, in 15 MB pieces when larger
#      (scripts/return_pieces.sh: `cat dataset.tgz.part* > dataset.tgz` restores it).
# DIR belongs under the ignored .cache/ (with Triton's cache beside it): a warm machine keeps both between calls, and
# on a fresh one the collection starts DIR afresh; nothing collected is lost, since each call returns all of DIR.
#
#   scripts/device_collect.sh DIR SECONDS COLLECT_ARGS...
#   e.g. scripts/device_collect.sh .cache/bwd 560 --workload backward --count 400 --reps 3
set -u
DIR=$1
END=$(($(date +%s) + $2))
shift 2
export TRITON_CACHE_DIR=$PWD/.cache/triton PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
left() { echo $((END - $(date +%s))); }
# step SECONDS_TO_KEEP_FOR_LATER ARGS...: `autoheur ARGS` until what is left minus that. Its --time-limit (no new
# problem after it) comes 40 s earlier, since a problem started just before it may take 30 s; SIGINT at the end stops
# one that runs longer, losing only that problem's part, which the next call collects.
step() {
    local keep=$1
    shift
    local t=$(($(left) - keep))
    if [ "$t" -lt 55 ]; then
        echo "skipped (no time left): autoheur $*"
        return 0
    fi
    echo "== autoheur $* --time-limit $((t - 40))"
    timeout -s INT "$t" python3 -m autoheur.cli "$@" --time-limit $((t - 40))
    echo "== exit $?, $(left) s left"
}
# the passes on the collection's GPUs (`--gpus N` or `all` among its arguments): on one GPU they fell behind a
# collection on two at stop 74
GPUS=1
prev=
for a in "$@"; do
    [ "$prev" = "--gpus" ] && GPUS=$a
    prev=$a
done
{
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
    step 110 collect "$@" --out "$DIR"
    step 50 data refine "$DIR" --gpus "$GPUS"
    step 10 data polish "$DIR" --gpus "$GPUS"
    python3 -m autoheur.cli data pack "$DIR"
    python3 -m autoheur.cli data info "$DIR"
} 2>&1 | tee "$OUT/device_collect.log"
tar czf "$OUT/dataset.tgz" -C "$(dirname "$DIR")" "$(basename "$DIR")"
bash "$(dirname "$0")/return_pieces.sh" "$OUT/dataset.tgz"   # over 15 MB: in pieces, since larger files do not come back
ls -la "$OUT"
