"""Stop 89: XGBoost's pair constructions timed on synthetic ranking rows (one thread a fit; not the H100 data).

300,000 rows of 90 random features, 48 a query, labels 0-4; 30 pairwise trees of depth 10, 64 bins. Log:
benchmarks/results/pairs_synthetic_stop89.log.
"""

import time

import numpy as np
import xgboost as xgb

rng = np.random.default_rng(0)
n, q = 300_000, 48
X = rng.standard_normal((n, 90)).astype(np.float32)
y = rng.integers(0, 5, n)
qid = np.arange(n) // q
for method, k in [("mean", 8), ("topk", 10), ("topk", 6), ("topk", 16)]:
    m = xgb.XGBRanker(
        objective="rank:pairwise", n_estimators=30, max_depth=10, tree_method="hist", max_bin=64,
        lambdarank_pair_method=method, lambdarank_num_pair_per_sample=k, n_jobs=1,
    )  # fmt: skip
    t = time.perf_counter()
    m.fit(X, y, qid=qid)
    print(method, k, round(time.perf_counter() - t, 2), flush=True)
