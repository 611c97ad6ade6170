#!/usr/bin/env bash
# The working tree a call of the lent GPU machine carries is at most 64 MiB (with the `carry` paths). The two big
# datasets and their retests, the reports, the results and the H100 model go over it, so a call is made from a trimmed
# index: they leave git's index (not the disk) and are ignored for the call, then come back.
#
#   bash scripts/device_tree.sh trim      # before the device calls: prints what the tree carries
#   bash scripts/device_tree.sh restore   # after them (and before any commit)
#
# Left out: the H100 model (the H200's stays: 50 MB), so the tests that load it skip on the GPU (NEEDS_H100_MODEL).
# To carry the H100 model instead, edit LEFT_OUT. `.whl/` (the xgboost wheel, README's device notes) travels as a
# `carry` path: 5.6 MB of the 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
LEFT_OUT=(data/nvidia-h200 data/nvidia-h100-80gb-hbm3 data/retest-nvidia-h100-80gb-hbm3 data/fresh-nvidia-h200
          data/fresh-zipf2d2d-nvidia-h200 reports benchmarks/results models/nvidia-h100-80gb-hbm3.joblib)
EXCLUDE=.git/info/exclude
BASE=$'/.whl/\n/.ids/'
case "${1:-}" in
trim)
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
        echo "commit first: the device runs the committed tree's files, and restore resets the index" >&2
        exit 2
    fi
    git rm -r -q --cached "${LEFT_OUT[@]}"
    { echo "$BASE"; for p in "${LEFT_OUT[@]}"; do echo "/$p"; done; } > "$EXCLUDE"
    bytes=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    whl=$(du -cb .whl 2>/dev/null | tail -1 | cut -f1 || echo 0)
    echo "the call carries $((bytes / 1048576)) MiB of tree + $((whl / 1048576)) MiB of .whl (limit 64 MiB)"
    ;;
restore)
    echo "$BASE" > "$EXCLUDE"
    git reset -q -- "${LEFT_OUT[@]}"
    git status --short | head
    ;;
*)
    echo "usage: $0 trim|restore" >&2
    exit 2
    ;;
esac
