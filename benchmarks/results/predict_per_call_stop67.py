"""Stop 67: what one XGBoost prediction call costs against its rows and trees, on the shipped H100 model's boosters
(the rest expert's lead and re-ranker; random float32 rows, since the cost does not depend on the values), through
the same C entry point as inference (`booster_predict`), median of 300 calls, the predictor's 2 threads and 1.
Run from the repository root on a quiet host."""

import time

import numpy as np

from autoheur.models.artifact import TrainedModel
from autoheur.models.rankers import booster_predict

r = TrainedModel.load("models/nvidia-h100-80gb-hbm3.joblib").ranker
lead = r.experts_[1].members_[0].get_booster()
rerank = r.experts_[1].reranker_.get_booster()
X = np.ascontiguousarray(np.random.default_rng(0).normal(size=(1242, 57)).astype(np.float32))


def ms(f, n=300):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return np.median(ts) * 1e3


passes = (("re-ranker, 450 trees", rerank, 0, 0), ("re-ranker, 1 tree", rerank, 0, 1),
          ("lead, first 50 trees", lead, 0, 50), ("lead, trees 50-450", lead, 50, 450))  # fmt: skip
for threads in (2, 1):
    for b in (lead, rerank):
        b.set_param({"nthread": threads})
    print(f"predictor threads: {threads}", flush=True)
    for rows in (1, 8, 24, 48, 64, 128, 1242):
        cells = [
            f"{name} {ms(lambda b=b, s=s, e=e, n=rows: booster_predict(b, X[:n], s, e)):6.3f}"
            for name, b, s, e in passes
        ]
        print(f"  {rows:5d} rows: " + " | ".join(cells) + " ms", flush=True)
