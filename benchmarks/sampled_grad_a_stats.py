"""Figures of the sampled input gradients (`collect --workload sampled_grad_a`) in one device's dataset, and against
another device's measurements of the same problems (BENCHMARKS.md, Collection).

Per device: problems, rows, censored share; the oracles' times and load paths; how many oracles the refine and
polish passes changed (the best ok config of the first measurement vs after both passes). Across devices: how often
the two oracles are the same config, and the other device's oracle timed on this one (its efficiency here).

  python benchmarks/sampled_grad_a_stats.py [--data data/nvidia-h100-80gb-hbm3] [--other data/nvidia-h200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.by_kind import kind  # noqa: E402

COLUMNS = ["problem_id", "problem_name", "config_id", "load", "warp_specialize", "median_ms", "status"]


def read(path: str, retimed: bool) -> pd.DataFrame:
    """The sampled grad_a rows of a dataset (retimed: with the refine and polish passes' rows in place)."""
    from autoheur.collect.store import DatasetStore

    df = DatasetStore.load(path).read(COLUMNS, retimed=retimed)
    return df[df.problem_name.map(kind) == "sampled/grad_a"]


def oracles(rows: pd.DataFrame) -> pd.DataFrame:
    """Each problem's best ok row, indexed by problem_id."""
    ok = rows[rows.status == "ok"]
    return ok.loc[ok.groupby("problem_id").median_ms.idxmin()].set_index("problem_id")


def figures(first: pd.DataFrame, rows: pd.DataFrame, other: pd.DataFrame | None = None) -> dict:
    """`first`: the rows as first measured; `rows`: after the passes; `other`: another device's rows (after its)."""
    best, before = oracles(rows), oracles(first)
    ms = best.median_ms
    path = np.where(best.load == "ptr", "pointer", np.where(best.warp_specialize, "tma-ws", "tma"))
    changed = before.config_id != best.config_id.reindex(before.index)
    out = {
        "problems": int(rows.problem_id.nunique()),
        "rows": len(rows),
        "censored_pct": 100 * float((rows.status == "censored").mean()),
        "other_status": int((~rows.status.isin(["ok", "censored"])).sum()),
        "oracle_ms": (float(ms.median()), float(ms.min()), float(ms.max())),
        "load_paths": pd.Series(path).value_counts().to_dict(),
        "changed": (int(changed.sum()), len(before)),
    }
    if other is None:
        return out
    theirs = oracles(other)
    common = best.index.intersection(theirs.index)
    if not len(common):
        return out
    ok = rows[rows.status == "ok"].set_index(["problem_id", "config_id"]).median_ms
    # their oracle config timed here; not ok here (censored, failed): efficiency 0
    eff = np.array([ms[p] / ok.get((p, theirs.config_id[p]), np.inf) for p in common])
    out["common"] = len(common)
    out["same_oracle"] = int((best.config_id[common] == theirs.config_id[common]).sum())
    out["their_oracle_here"] = (
        float(np.exp(np.mean(np.log(np.maximum(eff, 1e-9))))), float(np.quantile(eff, 0.1)), float(eff.min())
    )  # fmt: skip
    out["time_ratio_median"] = float(np.median(ms[common] / theirs.median_ms[common]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    ap.add_argument("--other", default="data/nvidia-h200")
    args = ap.parse_args()
    f = figures(read(args.data, False), read(args.data, True), read(args.other, True))
    print(f"{args.data}: {f['problems']} sampled grad_a problems, {f['rows']} rows, {f['censored_pct']:.1f}% censored, "
          f"{f['other_status']} other")  # fmt: skip
    print("oracle ms: median {:.4f}, min {:.4f}, max {:.4f}".format(*f["oracle_ms"]))
    print("oracle load paths:", f["load_paths"])
    n, of = f["changed"]
    print(f"oracles changed by refine and polish: {n} of {of} ({100 * n / of:.0f}%)")
    if "common" in f:
        print(f"vs {args.other}: {f['common']} problems in both; the same oracle config for {f['same_oracle']} "
              f"({100 * f['same_oracle'] / f['common']:.0f}%)")  # fmt: skip
        g, p10, mn = f["their_oracle_here"]
        print(f"the other device's oracle here: efficiency geomean {g:.4f}, P10 {p10:.3f}, min {mn:.3f}; "
              f"oracle time here / there, median {f['time_ratio_median']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
