"""What one XGBoost scoring pass of the two-stage prediction costs by its rows and trees, each repeated on one booster.

For one public problem's candidates and its expert's boosters (the lead member and the re-ranker): the median of 30
calls of `rankers.booster_predict` for the coarse pass (every config, the lead's first 50 trees), the lead's other
trees over 128 rows, the re-ranker over 48 rows, over 1 row, and over 1 row with 10 of its trees, at each thread
count. Inside `top_k` the same passes take longer (`predict_latency.py --breakdown`): there they alternate between
boosters and the feature code, and the nodes a booster holds (~3 MB) are no longer in cache.

    python benchmarks/pass_cost.py [--model models/nvidia-h100-80gb-hbm3.joblib] [--problem 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.collect.workloads import public_problems  # noqa: E402
from autoheur.features import problem_config_matrix  # noqa: E402
from autoheur.models import rankers  # noqa: E402
from autoheur.models.artifact import TrainedModel  # noqa: E402
from benchmarks.common import cpu_model  # noqa: E402


def median_ms(f, n: int = 30) -> float:
    f()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def mean_nodes(booster) -> float:
    trees = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
    return statistics.mean(int(t["tree_param"]["num_nodes"]) for t in trees)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/nvidia-h100-80gb-hbm3.joblib")
    ap.add_argument("--problem", type=int, default=3, help="index into the public problems")
    args = ap.parse_args()
    model = TrainedModel.load(args.model)
    p = public_problems()[args.problem]
    X = problem_config_matrix(p, model.candidates(p, model.device), model.device)
    r = model.ranker
    if getattr(r, "experts_", None):
        r = r._expert(int(r._route(X[:1])[0]))
    X = np.ascontiguousarray(r._masked(X), dtype=np.float32)
    lead = (getattr(r, "members_", None) or [r.model_])[0].get_booster()
    rr = r.reranker_.get_booster() if getattr(r, "reranker_", None) is not None else lead
    print(f"{args.model}, {p.name}: {len(X)} configs; lead {lead.num_boosted_rounds()} trees of "
          f"{mean_nodes(lead):.0f} nodes, re-ranker {rr.num_boosted_rounds()} of {mean_nodes(rr):.0f}; "
          f"{cpu_model() or 'cpu'}")  # fmt: skip
    passes = {
        f"coarse {len(X)} rows x 50 trees": lambda: rankers.booster_predict(lead, X, 0, 50),
        "lead rest 128 rows": lambda: rankers.booster_predict(lead, X[:128], 50, 0),
        "re-ranker 48 rows": lambda: rankers.booster_predict(rr, X[:48]),
        "re-ranker 1 row": lambda: rankers.booster_predict(rr, X[:1]),
        "re-ranker 1 row, 10 trees": lambda: rankers.booster_predict(rr, X[:1], 0, 10),
    }
    for threads in (0, 1, 2, 0):
        lead.set_param({"nthread": threads})
        rr.set_param({"nthread": threads})
        cells = ", ".join(f"{name} {median_ms(f):.3f}" for name, f in passes.items())
        print(f"nthread {threads}: {cells} ms")
    rr.set_param({"nthread": r.n_jobs or 0})
    lead.set_param({"nthread": r.n_jobs or 0})


if __name__ == "__main__":
    main()
