"""Where the ranker's top 10 misses the oracle: per kind of problem, which of the oracle config's fields no config of
the top 10 shares (CPU, on a dev CV's held-out scores).

A miss is a problem whose oracle (its fastest config timed ok; of configs tied at that time, the best-ranked) is not
among the 10 configs the ranker scored highest.
For each field of the config (tile, block_k, stages, warps, group_m, load path, warp specialization), the share of the
misses in which no top-10 config has the oracle's value: the field the ranker got wrong everywhere in its list. Also
where the oracle ranked, and how far the best of the 10 is from it (best-of-10 efficiency).

    python benchmarks/dev_cv.py --data data/nvidia-h100-80gb-hbm3 --variants base --seeds 0 --jobs 1 --scores DIR
    python benchmarks/misses.py DIR/base_seed0.parquet [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.kernels.config import KernelConfig  # noqa: E402
from autoheur.models.metrics import evaluate  # noqa: E402
from benchmarks.by_kind import kind as problem_kind  # noqa: E402
from benchmarks.common import print_json  # noqa: E402
from benchmarks.dev_cv import oracle_rank  # noqa: E402

FIELDS = {
    "tile (block_m, block_n)": lambda c: (c.block_m, c.block_n),
    "block_k": lambda c: c.block_k,
    "num_stages": lambda c: c.num_stages,
    "num_warps": lambda c: c.num_warps,
    "group_m": lambda c: c.group_m,
    "load": lambda c: c.load,
    "warp_specialize": lambda c: c.warp_specialize,
}


def misses(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per problem: its kind, whether the oracle is in the top 10 and the best-of-10 efficiency (as
    `autoheur eval` scores them), the oracle's rank by score (dev_cv's), and per field whether some top-10 config
    shares the oracle's value (of configs tied at the best time, the best-ranked one's)."""
    scored = evaluate(scores)
    ranks = oracle_rank(scores)
    rows = []
    configs: dict[str, KernelConfig] = {}
    for pid, g in scores.groupby("problem_id", sort=False):
        if pid not in ranks.index:  # no config timed ok
            continue
        order = g.sort_values("score", ascending=False, kind="stable")  # oracle_rank's order
        top = order.head(10)
        oracle = order.iloc[ranks[pid]]
        row = {
            "problem_id": pid,
            "kind": problem_kind(oracle["problem_name"]),
            "hit": bool(scored.loc[pid, "oracle_in_top10"]),
            "oracle_rank": int(ranks[pid]),
            "best10": float(scored.loc[pid, "eff_best10"]),
        }
        cfg = {c: configs.setdefault(c, KernelConfig.from_id(c)) for c in [oracle["config_id"], *top["config_id"]]}
        want = cfg[oracle["config_id"]]
        for name, get in FIELDS.items():
            row[name] = any(get(cfg[c]) == get(want) for c in top["config_id"])
        rows.append(row)
    return pd.DataFrame(rows)


def summary(per_problem: pd.DataFrame) -> dict:
    out = {}
    for kind, g in [("all", per_problem), *per_problem.groupby("kind")]:
        m = g[~g["hit"]]
        out[kind] = {
            "problems": len(g),
            "hit": round(float(g["hit"].mean()), 4),
            "misses": len(m),
            "missed_rank_median": float(m["oracle_rank"].median()) if len(m) else None,
            "missed_best10_median": round(float(m["best10"].median()), 4) if len(m) else None,
            "missed_field_absent_from_top10": {
                f: round(float((~m[f]).mean()), 3) if len(m) else None for f in FIELDS
            },  # fmt: skip
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scores", help="a dev_cv.py --scores parquet")
    ap.add_argument("--out", help="write the summary JSON here")
    args = ap.parse_args(argv)
    return print_json(summary(misses(pd.read_parquet(args.scores))), args.out)


if __name__ == "__main__":
    sys.exit(main())
