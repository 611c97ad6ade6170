"""Figures of the sampled input gradients (`collect --workload sampled_grad_a`) in one device's dataset, and against
another device's measurements of the same problems (BENCHMARKS.md, Collection).

Per device: problems, rows, censored share; the oracles' times and load paths; how many oracles the refine and
polish passes changed (the best ok config of the first measurement vs after both passes). Across devices: how often
the two oracles are the same config, and the other device's oracle timed on this one (its efficiency here).

  python benchmarks/sampled_grad_a_stats.py [--data data/nvidia-h100-80gb-hbm3] [--other data/nvidia-h200]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from autoheur.collect.store import DatasetStore

COLUMNS = ["problem_id", "problem_name", "config_id", "load", "warp_specialize", "median_ms", "status"]


def oracles(path: str, retimed: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sampled grad_a rows of a dataset and each problem's best ok row (indexed by problem_id)."""
    df = DatasetStore.load(path).read(COLUMNS, retimed=retimed)
    df = df[df.problem_name.str.match(r"^sampled/2d3d/.*/grad_a$")]
    ok = df[df.status == "ok"]
    return df, ok.loc[ok.groupby("problem_id").median_ms.idxmin()].set_index("problem_id")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    ap.add_argument("--other", default="data/nvidia-h200")
    args = ap.parse_args()
    _, first = oracles(args.data, retimed=False)
    rows, best = oracles(args.data, retimed=True)
    print(f"{args.data}: {rows.problem_id.nunique()} sampled grad_a problems, {len(rows)} rows, "
          f"{100 * (rows.status == 'censored').mean():.1f}% censored, "
          f"{int((~rows.status.isin(['ok', 'censored'])).sum())} other")  # fmt: skip
    ms = best.median_ms
    print(f"oracle ms: median {ms.median():.4f}, min {ms.min():.4f}, max {ms.max():.4f}")
    path = np.where(best.load == "ptr", "pointer", np.where(best.warp_specialize, "tma-ws", "tma"))
    print("oracle load paths:", pd.Series(path).value_counts().to_dict())
    changed = first.config_id != best.config_id.reindex(first.index)
    print(f"oracles changed by refine and polish: {changed.sum()} of {len(first)} ({100 * changed.mean():.0f}%)")
    _, other = oracles(args.other, retimed=True)
    common = best.index.intersection(other.index)
    if not len(common):
        return
    same = best.config_id[common] == other.config_id[common]
    print(f"vs {args.other}: {len(common)} problems in both; the same oracle config for {same.sum()} "
          f"({100 * same.mean():.0f}%)")  # fmt: skip
    ok = rows[rows.status == "ok"].set_index(["problem_id", "config_id"]).median_ms
    eff = np.array([ms[p] / ok.get((p, other.config_id[p]), np.inf) for p in common])
    print(f"the other device's oracle here: efficiency geomean {np.exp(np.mean(np.log(np.maximum(eff, 1e-9)))):.4f}, "
          f"P10 {np.quantile(eff, 0.1):.3f}, min {eff.min():.3f}; oracle time here / there, median "
          f"{np.median(ms[common] / other.median_ms[common]):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
