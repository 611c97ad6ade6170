"""Latency of one problem's top-10 prediction after the model is loaded and warm (issue 4's 5 ms target).

Per problem: candidate configs (cached per signature), the feature matrix, two-stage XGBoost scoring, the top 10.
Problems: the 18 public ones and 100 of the default workload's others; each timed 5 times after one warm-up call.

  python benchmarks/predict_latency.py [--model models/nvidia-h100-80gb-hbm3.joblib]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from autoheur.collect.workloads import public_problems, workload
from autoheur.models.artifact import TrainedModel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/nvidia-h100-80gb-hbm3.joblib")
    args = ap.parse_args()
    model = TrainedModel.load(args.model)
    problems = public_problems() + workload("default", 130, seed=1)[18:118]
    for p in problems:  # warm: first calls build the per-signature candidate tuples and feature caches
        model.top_k(p, 10)
    times = []
    for p in problems:
        for _ in range(5):
            t0 = time.perf_counter()
            model.top_k(p, 10)
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"{args.model}: {len(problems)} problems x 5, {os.cpu_count()} CPU cores, {platform.processor() or 'cpu'}")
    print(f"top-10 latency ms: median {statistics.median(times):.2f}, p90 {np.quantile(times, 0.9):.2f}, "
          f"max {max(times):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
