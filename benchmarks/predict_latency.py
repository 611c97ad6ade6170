"""Latency of one problem's top-10 prediction after the model is loaded and warm (issue 4's 5 ms target).

Per problem: candidate configs (cached per signature), the feature matrix, two-stage XGBoost scoring, the top 10.
Problems: the 18 public ones and 100 of the default workload's others; each timed 5 times after one warm-up call,
the model readied first as `autoheur predict` and the run-time tuner ready it (`TrainedModel.prepare_scoring`); the
warm-up calls are timed too (each problem's first call, the process's first among them).
`--breakdown` then times the XGBoost scoring passes of each call apart (a wrapper around `rankers.booster_predict`,
outside the timed calls above): rows and trees of each pass and its median time, the rest being features and Python.

`--set NAME=INT` (repeatable) sets a prediction setting of the ranker and its experts first, e.g. `coarse_trees=25`,
`shortlist=96`, `rerank_top=32` (the dev CV's SCORING variants, benchmarks/dev_cv.py). `--compare A B ...` times
several such settings (each `NAME=INT[,NAME=INT...]`, or `shipped`) interleaved, problem by problem, so that a noisy
host's drift falls on all of them alike, and prints each one's median and its median ratio to the first;
`xgboost` there is the shipped settings with every batch scored by XGBoost (AUTOHEUR_FOREST=0: no compiled walk of
the trees, autoheur/models/forest.py), and each setting's top 10s are checked against the first one's.

  python benchmarks/predict_latency.py [--model models/nvidia-h100-80gb-hbm3.joblib] [--breakdown] [--set ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.collect.workloads import public_problems, workload  # noqa: E402
from autoheur.models import forest  # noqa: E402
from autoheur.models.artifact import TrainedModel  # noqa: E402
from autoheur.models.rankers import PREDICTION_SETTINGS as SETTINGS  # noqa: E402
from autoheur.models.rankers import set_prediction  # noqa: E402
from benchmarks.common import cpu_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/nvidia-h100-80gb-hbm3.joblib")
    ap.add_argument("--breakdown", action="store_true", help="also time each XGBoost scoring pass apart")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT", help="a prediction setting to change")
    ap.add_argument("--compare", nargs="+", metavar="SETTINGS", help="time these settings interleaved")
    args = ap.parse_args()
    model = TrainedModel.load(args.model)
    try:
        apply_settings(model, args.set)
        compare = [parse_settings(c) for c in args.compare or ()]
    except ValueError as exc:
        ap.error(str(exc))
    problems = public_problems() + workload("default", 130, seed=1)[18:118]
    if compare:
        return interleaved(model, problems, args.compare, compare)
    t0 = time.perf_counter()
    model.prepare_scoring()  # what autoheur predict and the run-time tuner do once a process, after loading
    prepare_s = time.perf_counter() - t0
    first = []
    for p in problems:  # each problem's first call: later problems find what earlier ones of their kind cached
        t0 = time.perf_counter()
        model.top_k(p, 10)
        first.append((time.perf_counter() - t0) * 1e3)
    times = []
    for p in problems:
        for _ in range(5):
            t0 = time.perf_counter()
            model.top_k(p, 10)
            times.append((time.perf_counter() - t0) * 1e3)
    settings = "".join(f" --set {x}" for x in args.set)
    print(f"{args.model}{settings}: {len(problems)} problems x 5, {os.cpu_count()} CPU cores, {cpu_model() or 'cpu'}")
    print(f"small batches: {forest.status()}")
    print(
        f"prepare_scoring {prepare_s:.2f} s; then the first top_k of the process {first[0]:.2f} ms, each problem's "
        f"first: median {statistics.median(first):.2f}, p90 {np.quantile(first, 0.9):.2f}, max {max(first):.2f}"
    )
    print(f"top-10 latency ms: median {statistics.median(times):.2f}, p90 {np.quantile(times, 0.9):.2f}, "
          f"max {max(times):.2f}")  # fmt: skip
    if args.breakdown:
        breakdown(model, problems)


def parse_settings(text: str) -> list[str]:
    """`NAME=INT,NAME=INT` (or `shipped` / `xgboost`: none) as a list of NAME=INT items, checked."""
    items = [] if text in ("shipped", "xgboost") else text.split(",")
    for item in items:
        name, _, value = item.partition("=")
        if name not in SETTINGS or not value.isdigit():
            raise ValueError(f"{item!r}: expected NAME=INT with NAME one of {SETTINGS}, or 'shipped'")
    return items


def apply_settings(model, items: list[str], shipped: dict | None = None) -> dict:
    """Set `items` (NAME=INT) on the ranker and each expert, from `shipped` (the values before any change, as this
    returns them) for the settings not in `items`."""
    shipped = shipped or {name: getattr(model.ranker, name) for name in SETTINGS}
    wanted = {k: int(v) for k, v in (item.partition("=")[::2] for item in parse_settings(",".join(items) or "shipped"))}
    set_prediction(model.ranker, **{**shipped, **wanted})
    return shipped


def interleaved(model, problems, names: list[str], settings: list[list[str]]) -> None:
    """Each problem: a warm-up call, then 5 timed calls, under each of `settings` in turn."""
    shipped = apply_settings(model, [])
    times: list[list[float]] = [[] for _ in settings]
    same = [0] * len(settings)
    before = os.environ.get("AUTOHEUR_FOREST")
    for p in problems:
        first = None
        for i, items in enumerate(settings):
            apply_settings(model, items, shipped)
            os.environ["AUTOHEUR_FOREST"] = "0" if names[i] == "xgboost" else "1"
            top = [c.config_id for c, _ in model.top_k(p, 10)]
            first = top if first is None else first
            same[i] += top == first
            for _ in range(5):
                t0 = time.perf_counter()
                model.top_k(p, 10)
                times[i].append((time.perf_counter() - t0) * 1e3)
    apply_settings(model, [], shipped)
    os.environ.pop("AUTOHEUR_FOREST")
    if before is not None:
        os.environ["AUTOHEUR_FOREST"] = before
    print(f"{len(problems)} problems x 5, interleaved, {os.cpu_count()} CPU cores, {cpu_model() or 'cpu'}")
    print(f"small batches (all but xgboost): {forest.status()}")
    base = np.asarray(times[0])
    for i, (name, t) in enumerate(zip(names, times, strict=True)):
        ratio = np.median(np.asarray(t) / base)
        print(f"  {name}: median {statistics.median(t):.2f} ms, p90 {np.quantile(t, 0.9):.2f}, "
              f"median ratio to {names[0]} {ratio:.3f}; same top 10: {same[i]} of {len(problems)}")  # fmt: skip


def breakdown(model, problems) -> None:
    """Median per call of each XGBoost pass (by its order in the call: coarse, the rest of the lead, the other
    members, the re-ranker) and of the whole call, over the problems x 5 calls."""
    from autoheur.models import rankers

    inner = rankers.booster_predict
    passes: list[tuple[int, int, float]] = []

    def timed(booster, X, begin=0, end=0):
        t0 = time.perf_counter()
        out = inner(booster, X, begin, end)
        trees = (end or booster.num_boosted_rounds()) - begin
        passes.append((len(X), trees, (time.perf_counter() - t0) * 1e3))
        return out

    per_pass: dict[int, list[tuple[int, int, float]]] = {}
    whole = []
    rankers.booster_predict = timed
    try:
        for p in problems:
            for _ in range(5):
                passes.clear()
                t0 = time.perf_counter()
                model.top_k(p, 10)
                whole.append((time.perf_counter() - t0) * 1e3)
                for i, rec in enumerate(passes):
                    per_pass.setdefault(i, []).append(rec)
    finally:
        rankers.booster_predict = inner
    print(f"breakdown, median per call: whole {statistics.median(whole):.2f} ms")
    for i, recs in sorted(per_pass.items()):
        rows = statistics.median(r[0] for r in recs)
        trees = statistics.median(r[1] for r in recs)
        ms = statistics.median(r[2] for r in recs)
        per = ms / (rows * trees) * 1e6
        print(f"  pass {i}: {rows:.0f} rows x {trees:.0f} trees, {ms:.2f} ms ({per:.1f} ns a row-tree)")


if __name__ == "__main__":
    main()
