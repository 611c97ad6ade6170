"""Fit time of one ranker member on all feature columns vs only the columns that vary over its training rows
(stop 52: does XGBoost spend time on the constant ones?). Per layout expert and objective: 100 trees, one thread,
the default row sample (48 / 12 a problem); also checks that both fits predict the same. Run it alone.

    python benchmarks/constant_columns.py [--data data/nvidia-h100-80gb-hbm3]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.data import RankingSet, load_ranking_set, sample_rows  # noqa: E402
from autoheur.models.rankers import XGBRankerModel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    args = ap.parse_args()
    rs = load_ranking_set(args.data)
    m = XGBRankerModel()
    one = replace(m, n_estimators=100, n_jobs=1)  # a member's fit as the ranker builds it, shortened
    route = m._route(rs.X)
    for e in sorted(set(route.tolist()), reverse=True):
        sub = sample_rows(rs, m.per_problem, m.top, 0, route == e)
        X = sub.X
        used = np.flatnonzero(X.min(axis=0) != X.max(axis=0))
        y = m.labels(sub.frame)
        for obj in ("rank:pairwise", "rank:ndcg"):
            res = {}
            for name, XX in (("all", X), ("used", np.ascontiguousarray(X[:, used]))):
                t = time.perf_counter()
                r = one._fit_one(RankingSet(sub.frame, XX, sub.device), obj, labels=y, n_jobs=1)
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
