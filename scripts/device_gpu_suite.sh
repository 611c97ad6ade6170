#!/usr/bin/env bash
# The GPU suite, in one call of the lent GPU machine (BENCHMARKS.md, "The test suite on an H200/two H200s"): the carried
# xgboost wheel installed beside the tree, the versions recorded, the GPU test directories run whole, in one process
# (two side by side on one host ran slower at stop 80, the second past its 430 s: they share its compiles),
# logs under $OUT.
#
#   scripts/device_gpu_suite.sh [SECONDS [TEST PATHS...]]   # default 560 s, the six GPU test paths
#
# Made from a trimmed tree (scripts/device_tree.sh trim) with `.whl` carried; on two GPUs the two-GPU tests run too.
# At stop 81 the whole suite took 548 s of a 565 s limit (and its process had not exited by then), so it no longer
# fits one call with room: give it two calls, each with part of the paths, e.g.
#   scripts/device_gpu_suite.sh 560 tests/kernels tests/features tests/test_problem.py
#   scripts/device_gpu_suite.sh 560 tests/inference tests/inductor tests/collect
# (each writes its own log, named by its first path, under $OUT).
set -u
LIMIT=${1:-560}
shift || true
PATHS=("$@")
[ "${#PATHS[@]}" -gt 0 ] || PATHS=(tests/kernels tests/inference tests/inductor tests/collect tests/features
                                   tests/test_problem.py)
NAME=gpu_tests
[ "$#" -gt 0 ] && NAME="gpu_tests_$(basename "${PATHS[0]}" .py)"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
else
    echo "no .whl/*.whl carried: xgboost comes from the machine, if it has one" > "$OUT/gpu_tests_env.txt"
    export PYTHONPATH=$PWD
fi
export TRITON_CACHE_DIR=$PWD/.cache/triton PYTHONUNBUFFERED=1
# what the process does after its summary (stop 81's slow exit): scripts/pytest_exit_trace.py, into $OUT
export PYTHONPATH=$PYTHONPATH:$PWD/scripts EXIT_TRACE=$OUT/$NAME.exit.txt
{
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
    nproc
    for m in torch triton xgboost pytest; do
        python3 -c "import $m; print('$m', $m.__version__)" 2>/dev/null || echo "$m: not importable"
    done
} >> "$OUT/gpu_tests_env.txt" 2>&1
# SIGINT at the limit: pytest still prints its summary, which names the failures (-rfEs; a SIGTERM'd run names none)
timeout -s INT -k 20 "$LIMIT" python3 -m pytest "${PATHS[@]}" -q -rfEs --durations=15 -p no:cacheprovider \
    -p pytest_exit_trace > "$OUT/$NAME.log" 2>&1
rc=$?
echo "exit $rc" >> "$OUT/$NAME.log"
date +"exited at %T" >> "$OUT/$NAME.exit.txt"
tail -25 "$OUT/$NAME.log"
exit $rc
