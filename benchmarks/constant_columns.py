"""Fit time of one ranker member on all feature columns vs only the columns that vary over its training rows
(stop 52: does XGBoost spend time on the constant ones?). Per layout expert and objective: 100 trees, one thread,
the default row sample (48 / 12 a problem); also checks that both fits predict the same. Run it alone.

    python benchmarks/constant_columns.py [--data data/nvidia-h100-80gb-hbm3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.data import load_ranking_set  # noqa: E402
from autoheur.models.rankers import XGBRankerModel, _subsample  # noqa: E402


def main() -> None:
    import xgboost as xgb

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    args = ap.parse_args()
    rs = load_ranking_set(args.data)
    m = XGBRankerModel()
    route = m._route(rs.X)
    for e in sorted(set(route.tolist()), reverse=True):
        sub = _subsample(rs, m.per_problem, m.top, 0, route == e)
        X = sub.X
        used = np.flatnonzero(X.min(axis=0) != X.max(axis=0))
        qid = pd.factorize(sub.frame["problem_id"], sort=False)[0]
        y = m.labels(sub.frame)
        for obj in ("rank:pairwise", "rank:ndcg"):
            res = {}
            for name, XX in (("all", X), ("used", np.ascontiguousarray(X[:, used]))):
                r = xgb.XGBRanker(
                    objective=obj, n_estimators=100, max_depth=8, learning_rate=0.1, tree_method="hist",
                    lambdarank_pair_method="topk" if obj == "rank:ndcg" else "mean",
                    lambdarank_num_pair_per_sample=16 if obj == "rank:ndcg" else 8, n_jobs=1, random_state=0,
                )  # fmt: skip
                t = time.perf_counter()
                r.fit(XX, y, qid=qid)
                res[name] = time.perf_counter() - t
                res[name + "_pred"] = r.predict(XX[:5000])
            same = np.allclose(res["all_pred"], res["used_pred"], atol=1e-5)
            print(
                f"expert {e}: {len(sub.frame)} rows, {X.shape[1]} -> {len(used)} columns, {obj}: "
                f"all {res['all']:.1f} s, used {res['used']:.1f} s, same predictions {same}",
                flush=True,
            )


if __name__ == "__main__":
    main()
