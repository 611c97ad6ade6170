#!/usr/bin/env bash
# The working tree a call of the lent GPU machine carries is at most 64 MiB (with the `carry` paths). The two big
# datasets and their retests, the fresh sets, the reports, the results and the H100 model go over it, so a call is made
# from a trimmed index: they leave git's index (not the disk) and are ignored for the call (a marked block appended to
# .git/info/exclude), then come back.
#
#   bash scripts/device_tree.sh trim      # before the device calls (commit first): prints what the tree carries
#   bash scripts/device_tree.sh restore   # after them (and before any commit)
#
# Left out: the H100 model (the H200's stays: 50 MB), so the tests that load it skip on the GPU (NEEDS_H100_MODEL);
# BENCHMARKS.md and the largest problem lists, which only tests/test_benchmarks.py reads (not a GPU test).
# To carry the H100 model instead, edit LEFT_OUT. `.whl/` (the xgboost wheel, README's device notes) travels as a
# `carry` path: 5.6 MB of the 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
LEFT_OUT=(data/nvidia-h200 data/nvidia-h100-80gb-hbm3 data/retest-nvidia-h100-80gb-hbm3 data/fresh-nvidia-h200
          data/fresh-zipf2d2d-nvidia-h200 reports benchmarks/results models/nvidia-h100-80gb-hbm3.joblib
          BENCHMARKS.md benchmarks/collect_stop46_h100_mix.jsonl benchmarks/fresh_s79_problems.jsonl
          benchmarks/fresh_s80_problems.jsonl)
EXCLUDE=$(git rev-parse --git-path info/exclude)
MARK="# device_tree.sh trim: begin"
END="# device_tree.sh trim: end"
present() {  # the LEFT_OUT paths git tracks here
    for p in "${LEFT_OUT[@]}"; do
        if [ -n "$(git ls-files -- "$p" | head -1)" ]; then echo "$p"; fi
    done
}
case "${1:-}" in
trim)
    if grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null; then
        echo "trimmed already (bash $0 restore first)" >&2
        exit 2
    fi
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
        echo "commit first: restore resets these paths in the index, and the device runs the committed files" >&2
        exit 2
    fi
    mapfile -t tracked < <(present)
    [ "${#tracked[@]}" -gt 0 ] && git rm -r -q --cached -- "${tracked[@]}"
    mkdir -p "$(dirname "$EXCLUDE")"
    if [ -s "$EXCLUDE" ] && [ -n "$(tail -c1 "$EXCLUDE")" ]; then echo >> "$EXCLUDE"; fi  # its last line ended
    { echo "$MARK"; for p in "${LEFT_OUT[@]}"; do echo "/$p"; done; echo "$END"; } >> "$EXCLUDE"
    bytes=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    whl=$( (du -cb .whl 2>/dev/null || echo 0) | tail -1 | cut -f1)
    echo "the call carries $((bytes / 1048576)) MiB of tree + $((whl / 1048576)) MiB of .whl (limit 64 MiB)"
    ;;
restore)
    if ! grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null; then
        echo "not trimmed: nothing to restore" >&2
        exit 2
    fi
    if ! git reset -q -- "${LEFT_OUT[@]}"; then  # back into the index as HEAD has them, before the block goes
        echo "git reset failed: the paths are still out of the index (do not commit); fix it and restore again" >&2
        exit 1
    fi
    sed -i "/^$MARK\$/,/^$END\$/d" "$EXCLUDE"  # the block trim appended; the file's other lines stay
    git status --short | head || true
    ;;
*)
    echo "usage: $0 trim|restore" >&2
    exit 2
    ;;
esac
