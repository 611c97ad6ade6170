"""Ten configs timed in two rounds: the ranker's best k, then 10 - k around the fastest of them.

The brief autotune times 10 configs either way. A static list is the ranker's best 10. Here the first round is its
best k; once they are timed, the second round takes the 10 - k configs that the ranker scores highest among the
neighbours of the first round's fastest (`--around`), the ranker's next where there are too few:
- `tile`: the same output tile (block_m, block_n);
- `one`: one parameter changed (any of block_m, block_n, block_k, stages, warps, group_m, load path, warp
  specialization);
- `tile_one`: either.
The question is whether a problem whose front is narrow (one tile shape, a few stages or warps) is better served by
spending some of the 10 on the first round's winner's neighbourhood than on the ranker's 6th-10th picks.

The first round is "timed" with the dataset's own medians, as the best-of-10 metric times the whole list. On the dev
set only: the held-out scores that `benchmarks/dev_cv.py --scores DIR` writes, so nothing here reads a problem that
`autoheur eval` reports on, and nothing is fitted.

    python benchmarks/dev_cv.py --data data/nvidia-h100-80gb-hbm3 --variants base --seeds 0 --jobs 1 --scores DIR
    python benchmarks/adaptive_list.py DIR/base_seed0.parquet --first 10,5,6,7,8 --around tile,one,tile_one
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.kernels.config import KernelConfig  # noqa: E402
from autoheur.models.metrics import evaluate  # noqa: E402
from benchmarks.list_fill import _ranked, list_row, record, write_rows  # noqa: E402

FIELDS = ("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m", "load", "warp_specialize")


def config_table(config_ids: np.ndarray) -> pd.DataFrame:
    """The FIELDS of each config id (its row order)."""
    uniq = pd.unique(config_ids)
    rows = {cid: [getattr(KernelConfig.from_id(cid), f) for f in FIELDS] for cid in uniq}
    return pd.DataFrame([rows[c] for c in config_ids], columns=list(FIELDS))


def neighbours(params: np.ndarray, best: int, around: str) -> np.ndarray:
    """Boolean mask of the rows of one problem's `params` (rows x FIELDS, object) near row `best`."""
    diff = (params != params[best]).sum(axis=1)
    same_tile = (params[:, 0] == params[best, 0]) & (params[:, 1] == params[best, 1])
    if around == "tile":
        return same_tile
    if around == "one":
        return diff == 1
    if around == "tile_one":
        return same_tile | (diff == 1)
    raise ValueError(f"unknown --around {around!r}")


def two_rounds(frame: pd.DataFrame, params: np.ndarray, first: int, around: str, k: int = 10) -> np.ndarray:
    """Scores whose top k is the ranker's best `first`, then the best-scored neighbours of the fastest of them."""
    score = frame["score"].to_numpy(dtype=float)
    if first >= k:
        return score.copy()
    out = np.empty_like(score)
    ok = frame["status"].to_numpy() == "ok"
    t = np.where(ok, frame["median_ms"].to_numpy(dtype=float), np.inf)
    for idx in frame.groupby("problem_id", sort=False).indices.values():
        order = idx[np.argsort(-score[idx], kind="stable")]
        lead = list(order[:first])
        best = lead[int(np.argmin(t[lead]))]
        near = neighbours(params[order], int(np.flatnonzero(order == best)[0]), around)
        taken = set(lead)
        extra = [i for i, m in zip(order, near, strict=True) if m and i not in taken][: k - first]
        _ranked(out, order, lead + extra)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scores", nargs="+", help="parquet files of dev_cv.py --scores")
    ap.add_argument("--first", default="10,5,6,7,8", help="first-round sizes (10: the static list)")
    ap.add_argument("--around", default="tile,one,tile_one")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = []
    for path in args.scores:
        frame = pd.read_parquet(path)
        params = config_table(frame["config_id"].to_numpy()).to_numpy(dtype=object)
        kind = frame.groupby("problem_id", sort=False)["problem_name"].first()
        zipf2d2d = kind.str.startswith("sampled/2d2d") & kind.str.endswith("/zipf")
        for first in [int(x) for x in args.first.split(",")]:
            for around in args.around.split(",") if first < 10 else ["-"]:
                pp = evaluate(frame.assign(score=two_rounds(frame, params, first, around)))
                z = pp["eff_best10"][zipf2d2d.reindex(pp.index).to_numpy()]
                row = {
                    "scores": path, "first": first, "around": around, **list_row(pp),
                    "zipf2d2d_min": round(float(z.min()), 4),
                    "zipf2d2d_hit": round(float(pp["oracle_in_top10"][z.index].mean()), 4),
                }  # fmt: skip
                record(rows, row)
    return write_rows(rows, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
