"""What the run-time tuning key's bucketing costs, measured on a collected dataset (issue 5: within 2%).

The tuner reuses one config for every call whose key matches (inference/key.py): the same shapes except the ragged
extent, whose total is bucketed (exact up to 16, then powers of two; the earlier key, bucketing the mean per group,
is measured beside it). The first call of a bucket is tuned;
the later ones run its winner. For every ordered pair (A, B) of distinct collected problems with the same key, this
takes A's exhaustive winner and looks up its time on B in the dataset: efficiency = B's own winner's time / the time
of A's winner on B. Every config of every problem was timed on the GPU, so nothing here is estimated; where A's winner
was censored on B (a hopeless config: one run, a lower bound) the efficiency is an upper bound, and it is counted.

  python benchmarks/bucketing.py [--data data/nvidia-h100-80gb-hbm3]
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections import defaultdict

import numpy as np

from autoheur.collect.schema import problem_from_row
from autoheur.collect.store import DatasetStore
from autoheur.inference.key import bucket
from autoheur.kernels.config import Ragged

NOISY = 0.25  # a config's IQR / median above this: its median of 3 runs is unreliable (0.9% of the H100 rows)


def problem_key(p, rows_bucket=bucket, per_group: bool = False) -> tuple:
    """The fields of `tune_key` for a collected problem (the device is the dataset's), computed without tensors;
    `per_group` buckets the mean rows per group instead of the total (the earlier key, for comparison)."""
    if p.ragged == Ragged.NONE:
        b = 0
    else:
        b = rows_bucket(p.total / p.groups if per_group else p.total)
    return (p.signature(), p.dtype, p.a_major, p.b_major, p.groups, p.m, p.n, p.k, b)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    args = ap.parse_args(argv)
    df = DatasetStore.load(args.data).read()
    timed = df[df.status.isin(["ok", "censored"])]
    problems = {pid: problem_from_row(g.iloc[0]) for pid, g in df.groupby("problem_id")}
    times = {pid: dict(zip(g.config_id, zip(g.median_ms, g.censored, g.spread, strict=True), strict=True))
             for pid, g in timed.groupby("problem_id")}  # fmt: skip
    ok = timed[~timed.censored]
    best = ok.loc[ok.groupby("problem_id").median_ms.idxmin()].set_index("problem_id")
    print(f"{args.data}: {len(problems)} problems; efficiency of a bucket's first winner on the bucket's other "
          "problems (ordered pairs), geomean / P10 / min, share within 2%")  # fmt: skip
    for label, per_group, same_total in (
        ("key (total rows bucketed), all pairs", False, None),
        ("  pairs with equal totals (only the routing differs)", False, True),
        ("  pairs with different totals in one bucket", False, False),
        ("earlier key (mean rows per group bucketed), all pairs", True, None),
    ):
        groups = defaultdict(list)
        for pid, p in problems.items():
            if pid in best.index:
                groups[problem_key(p, per_group=per_group)].append(pid)
        effs, noisy, upper = [], [], 0
        for pids in groups.values():
            for a, b in itertools.permutations(pids, 2):
                if same_total is not None and (problems[a].total == problems[b].total) != same_total:
                    continue
                ms, censored, spread = times[b].get(best.loc[a, "config_id"], (math.inf, False, 0.0))
                effs.append(best.loc[b, "median_ms"] / ms)
                noisy.append(spread > NOISY)
                upper += bool(censored)
        effs, noisy = np.array(effs), np.array(noisy)
        clean = effs[~noisy]
        print(f"{label}: {len(effs)} pairs: {_fig(effs)}; without the {noisy.sum()} whose looked-up time is a noisy "
              f"measurement (IQR spread > {NOISY}): {_fig(clean)}; {upper} censored (upper bounds)")  # fmt: skip


def _fig(e: np.ndarray) -> str:
    if not len(e):
        return "none"
    return f"{math.exp(np.log(e).mean()):.4f} / {np.quantile(e, 0.1):.3f} / {e.min():.3f}, {np.mean(e >= 0.98):.0%}"


if __name__ == "__main__":
    main()
