"""Draw a seeded random sample of a dataset's problems as a shapes file, for a retest (`benchmarks/retest.py`).

The sample is a random permutation of the dataset's finished problems, cut at --count: a collection that stops early
(a device call's time limit) still holds a random sample, since `autoheur collect --shapes` goes in file order. Each
line carries the problem's exact sizes, so the retest times the same problems on the same inputs (the collection's
--seed, 0 unless it was collected with another); the script checks that every line parses back to its problem id.

  python benchmarks/retest_sample.py --data data/nvidia-h100-80gb-hbm3 --count 240 --seed 20261126 \
      --out benchmarks/retest2_h100_problems.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from autoheur.collect.schema import PROBLEM_FIELDS, problem_from_row, problem_id
from autoheur.collect.shapes import load_shapes
from autoheur.collect.store import DatasetStore


def sample_ids(ids: list[str], count: int, seed: int) -> list[str]:
    """`count` of `ids` (sorted first, so the draw depends on the set only), in a seeded random order."""
    ids = sorted(ids)
    order = np.random.default_rng(seed).permutation(len(ids))
    return [ids[i] for i in order[:count]]


def problem_records(store: DatasetStore, ids: list[str]) -> dict[str, dict]:
    """problem_id -> its shapes-file record, read from the first row of its part (only the problem columns)."""
    where: dict = {}
    parts = store.parts()
    for pid in ids:
        where.setdefault(parts[pid], []).append(pid)
    out = {}
    columns = ["problem_id", "problem_name", *PROBLEM_FIELDS]
    for path, pids in where.items():
        table = pq.read_table(path, columns=columns, filters=[("problem_id", "in", pids)])
        col = table.column("problem_id").to_numpy(zero_copy_only=False)
        _, first = np.unique(col, return_index=True)
        rows = {r["problem_id"]: r for r in table.take(first).to_pylist()}
        for pid in pids:
            problem = problem_from_row(rows[pid])
            if problem_id(problem) != pid:
                raise SystemExit(f"{path}: the row of {pid} rebuilds another problem; the dataset is corrupt")
            rec = {f: getattr(problem, f) for f in PROBLEM_FIELDS}
            rec["sizes"] = [int(s) for s in problem.sizes]
            rec["name"] = problem.name
            out[pid] = rec
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="the dataset to sample (A of the retest)")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True, help="the shapes file (.jsonl) to write")
    args = ap.parse_args()

    store = DatasetStore.load(Path(args.data))
    ids = sample_ids(list(store.done_problems()), args.count, args.seed)
    records = problem_records(store, ids)
    lines = [json.dumps(records[pid]) for pid in ids]
    Path(args.out).write_text("\n".join(lines) + "\n")
    back = [problem_id(p) for p in load_shapes(args.out)]
    if back != ids:
        raise SystemExit(f"{args.out} does not parse back to the sampled problems")
    print(f"{len(ids)} problems of {args.data} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
