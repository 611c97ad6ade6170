"""Stop 68: the three scoring passes of real top-10 predictions (the shipped H100 model, every 6th of
predict_latency.py's 118 problems: 20 problems, 60 batches, captured through `rankers.booster_predict`), each batch
timed by XGBoost (its C entry point, 2 threads, as inference scored every batch until stop 67) and by forest.py's
compiled walk (one thread); median of 20 calls a batch, then the median over the batches of a pass. The outputs are
checked equal. Run from the repository root on a quiet host."""

import os
import time

import numpy as np

from autoheur.collect.workloads import public_problems, workload
from autoheur.models import forest, rankers
from autoheur.models.artifact import TrainedModel

model = TrainedModel.load("models/nvidia-h100-80gb-hbm3.joblib")
problems = public_problems() + workload("default", 130, seed=1)[18:118]
batches = []
inner = rankers.booster_predict


def capture(booster, X, begin=0, end=0):
    batches.append((booster, np.array(X, np.float32), begin, end))
    return inner(booster, X, begin, end)


rankers.booster_predict = capture
for p in problems[::6]:
    model.top_k(p, 10)
rankers.booster_predict = inner
print(f"{len(batches)} batches; {forest.status()}")


def ms(f, n=20):
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return np.median(ts) * 1e3


per_pass: dict[int, list] = {}
for i, (b, X, s, e) in enumerate(batches):
    os.environ["AUTOHEUR_FOREST"] = "0"
    want = inner(b, X, s, e)
    xgb_ms = ms(lambda b=b, X=X, s=s, e=e: inner(b, X, s, e))
    os.environ["AUTOHEUR_FOREST"] = "1"
    assert np.array_equal(inner(b, X, s, e), want)
    walk_ms = ms(lambda b=b, X=X, s=s, e=e: inner(b, X, s, e))
    trees = (e or b.num_boosted_rounds()) - s
    per_pass.setdefault(i % 3, []).append((len(X), trees, xgb_ms, walk_ms))
for k, recs in sorted(per_pass.items()):
    v = np.array(recs)
    rows, trees, x, w = (np.median(v[:, j]) for j in range(4))
    print(f"pass {k}: {rows:.0f} rows x {trees:.0f} trees: XGBoost {x:.3f} ms, walk {w:.3f} ms ({x / w:.2f}x); "
          f"walk {w / (rows * trees) * 1e6:.1f} ns a row-tree")  # fmt: skip
