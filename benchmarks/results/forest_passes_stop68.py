"""Stop 68: the three scoring passes of real top-10 predictions (the shipped H100 model, every 6th of
predict_latency.py's 118 problems: 20 problems, 60 batches, captured through `rankers.booster_predict`), each batch
timed by XGBoost (its C entry point, 2 threads, as inference scored every batch until stop 67) and by forest.py's
compiled walk (one thread); median of 20 calls a batch, then the median over the batches of a pass. The outputs are
checked equal. Run from the repository root on a quiet host."""

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autoheur.collect.workloads import public_problems, workload  # noqa: E402
from autoheur.models import forest, rankers  # noqa: E402
from autoheur.models.artifact import TrainedModel  # noqa: E402
from benchmarks.common import median_ms  # noqa: E402

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


per_pass: dict[int, list] = {}
for i, (b, X, s, e) in enumerate(batches):
    os.environ["AUTOHEUR_FOREST"] = "0"
    want = inner(b, X, s, e)
    xgb_ms = median_ms(lambda b=b, X=X, s=s, e=e: inner(b, X, s, e))
    os.environ["AUTOHEUR_FOREST"] = "1"
    assert np.array_equal(inner(b, X, s, e), want)
    walk_ms = median_ms(lambda b=b, X=X, s=s, e=e: inner(b, X, s, e))
    trees = (e or b.num_boosted_rounds()) - s
    per_pass.setdefault(i % 3, []).append((len(X), trees, xgb_ms, walk_ms))
for k, recs in sorted(per_pass.items()):
    v = np.array(recs)
    rows, trees, x, w = (np.median(v[:, j]) for j in range(4))
    print(f"pass {k}: {rows:.0f} rows x {trees:.0f} trees: XGBoost {x:.3f} ms, walk {w:.3f} ms ({x / w:.2f}x); "
          f"walk {w / (rows * trees) * 1e6:.1f} ns a row-tree")  # fmt: skip
