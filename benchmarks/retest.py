"""Test-retest: how much of the ranking metrics is measurement noise (CPU; the retest dataset was collected on a GPU).

The same problems collected twice on the same GPU model: A, the shipped dataset, and B, a second collection of a
random sample of A's problems (`benchmarks/retest2_h100_problems.jsonl` and `retest2_h200_problems.jsonl`, from
`benchmarks/retest_sample.py --seed 20261126`; same inputs, same configs).
Every figure below is per problem over the problems both hold, summarized like `autoheur eval` (geomean / P10 / min
of efficiency, mean of oracle-in-top-10):

  ceiling      the ranking given by one measurement, scored on the other ("B predicts A": sort by B's times, score
               with A's). No predictor that learns from a measurement can be expected to agree with another
               measurement better than the measurement itself does: these are the noise ceilings of the metrics.
  ranker       the default ranker's held-out ranking (GroupKFold over A exactly as `autoheur eval`: 5 folds, seed 0;
               each problem ranked by the fold model that never saw it), scored on A (as the eval does), on B (an
               independent measurement it never saw) and on AB (per config the geometric mean of the two medians,
               the less noisy estimate). The fixed list baseline likewise.
  agreement    per problem: Kendall tau between A's and B's times over the configs both timed ok; the median
               |log(B/A)| over A's 10 fastest configs; whether A's oracle is B's oracle.
  by oracle    oracle in the top 10 of each ranking scored on A and on B, by the scored problem's oracle time
               (under 0.02 ms, 0.02-0.1 ms, from 0.1 ms): [fraction, problems].

Example:
  python benchmarks/retest.py --a data/nvidia-h100-80gb-hbm3 --b data/retest-nvidia-h100-80gb-hbm3 \
      --out benchmarks/results/h100_retest_summary.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoheur.models.data import (  # noqa: E402
    RankingSet,
    TrainingPool,
    _release_arrow_memory,
    fit_rows,
    load_auxiliary,
    load_dataset,
)
from autoheur.models.evaluate import group_kfold, make_model  # noqa: E402
from autoheur.models.metrics import evaluate, kendall_tau_b, summarize  # noqa: E402
from autoheur.models.rankers import family_params  # noqa: E402

KEY = ["problem_id", "config_id"]
BUCKETS_MS = [0, 0.02, 0.1, math.inf]
BUCKET_NAMES = ["<0.02ms", "0.02-0.1ms", ">=0.1ms"]


def pooled(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per (problem, config): the geometric mean of A's and B's medians where both timed it; status ok only where
    both are ok, censored where either is censored (a lower bound stays a lower bound), else A's failure status."""
    m = a.merge(b[[*KEY, "median_ms", "status"]], on=KEY, suffixes=("", "_b"), how="inner")
    timed = m["status"].isin(["ok", "censored"]) & m["status_b"].isin(["ok", "censored"])
    both_ok = (m["status"] == "ok") & (m["status_b"] == "ok")
    m["median_ms"] = np.where(timed, np.sqrt(m["median_ms"] * m["median_ms_b"]), m["median_ms"])
    m["status"] = np.where(both_ok, "ok", np.where(timed, "censored", m["status"]))
    return m.drop(columns=["median_ms_b", "status_b"])


def score_on(scored: pd.DataFrame, target: pd.DataFrame) -> pd.DataFrame:
    """Metrics of the rankings in `scored` (problem_id, config_id, score) measured with `target`'s times."""
    f = target.merge(scored[[*KEY, "score"]], on=KEY, how="inner")
    return evaluate(f)


def as_scores(df: pd.DataFrame) -> pd.DataFrame:
    """A measurement as a ranking: faster first; failed configs last, censored ones after every ok one."""
    t = df["median_ms"].to_numpy(dtype=float)
    s = np.where(df["status"] == "ok", -t, np.where(df["status"] == "censored", -1e9 - t, -np.inf))
    return df[KEY].assign(score=s)


def agreement(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    m = a.merge(b[[*KEY, "median_ms", "status"]], on=KEY, suffixes=("_a", "_b"))
    rows = []
    for pid, g in m.groupby("problem_id", sort=False):
        ok = (g["status_a"] == "ok") & (g["status_b"] == "ok")
        ga = g[ok]
        top = ga.nsmallest(10, "median_ms_a")
        rows.append(
            {
                "problem_id": pid,
                "oracle_a_ms": float(ga["median_ms_a"].min()),
                "tau_ab": kendall_tau_b(ga["median_ms_a"].to_numpy(), ga["median_ms_b"].to_numpy()),
                "top10_abs_log_ratio": float(np.median(np.abs(np.log(top["median_ms_b"] / top["median_ms_a"])))),
                "same_oracle": bool(
                    g.loc[g["median_ms_a"].where(g["status_a"] == "ok").idxmin(), "config_id"]
                    == g.loc[g["median_ms_b"].where(g["status_b"] == "ok").idxmin(), "config_id"]
                ),
            }
        )
    return pd.DataFrame(rows)


FIELDS = ["eff_top1", "eff_best10"]


def brief(pp: pd.DataFrame) -> dict:
    s = summarize(pp)
    out = {"n": s["n_problems"]}
    for f in FIELDS:
        out[f] = [round(s[f"{f}_geomean"], 4), round(s[f"{f}_p10"], 4), round(s[f"{f}_min"], 4)]
    out["oracle_in_top10"] = round(s["oracle_in_top10"], 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="data/nvidia-h100-80gb-hbm3", help="the dataset the models are evaluated on")
    ap.add_argument("--b", default="data/retest-nvidia-h100-80gb-hbm3", help="its retest (a subset of A's problems)")
    ap.add_argument("--models", default="xgb_ranker,fixed_list", help="'' for the ceilings alone")
    ap.add_argument(
        "--aux",
        action="append",
        help="another device's dataset the models also train on, less its rows of each fold's test problems "
        "(as `autoheur train --aux` and `autoheur eval --aux-for` do; the shipped H200 model trains so). With the "
        "H100 set as the H200's auxiliary data it was killed for memory on the 2-core host's 24 GB while each fold "
        "copied its rows (before stop 75's TrainingPool; not tried since)",
    )
    ap.add_argument("--out", help="write the summary JSON here")
    ap.add_argument("--per-problem", help="write the per-problem rows (CSV) here")
    args = ap.parse_args()

    df_a, dev_a, space_a = load_dataset(args.a)
    df_b, _, space_b = load_dataset(args.b)
    if space_a != space_b:
        raise SystemExit(f"config spaces differ ({space_a} vs {space_b}): a retest must time the same space")
    common = sorted(set(df_a["problem_id"]) & set(df_b["problem_id"]))
    a = df_a[df_a["problem_id"].isin(common)].reset_index(drop=True)
    b = df_b[df_b["problem_id"].isin(common)].reset_index(drop=True)
    ab = pooled(a, b)
    print(f"{len(common)} problems in both; A {len(a)} rows, B {len(b)} rows")
    # The models' set, and then A's whole frame let go: with an auxiliary dataset both would not fit in 24 GB.
    rs = RankingSet.from_frame(df_a, dev_a) if args.models else None
    del df_a, df_b
    _release_arrow_memory()

    targets = {"A": a, "B": b, "AB": ab}
    results: dict = {"problems": len(common), "ceiling": {}, "models": {}}
    per_problem = []

    def record(kind: str, name: str, target: str, pp: pd.DataFrame) -> None:
        results[kind].setdefault(name, {})[target] = brief(pp)
        per_problem.append(pp.reset_index().assign(kind=kind, name=name, target=target))

    # The noise ceilings: one measurement's ranking scored on another.
    for src, dst in (("B", "A"), ("A", "B"), ("A", "AB"), ("B", "AB")):
        record("ceiling", f"{src} ranks", dst, score_on(as_scores(targets[src]), targets[dst]))

    # The models, held out exactly as `autoheur eval`'s GroupKFold on A; only the common problems are scored.
    # every training row stacked once, each fold a row mask over it, as the eval's folds (TrainingPool)
    pool = TrainingPool.build(rs, load_auxiliary(args.aux or (), args.a)) if args.models else None
    params = family_params("triton")
    for name in filter(None, args.models.split(",")):
        scored = []
        t0 = time.perf_counter()
        for fold, train_ids, fold_test in group_kfold(rs):
            test_ids = [p for p in fold_test if p in set(common)]
            if not test_ids:
                continue
            # as the eval: never the fold's test problems timed on the other device (no aux: the fold's subset)
            model = fit_rows(make_model(name, **params.get(name, {})), pool.set, pool.rows(train_ids, fold_test))
            test = rs.subset(test_ids)
            scored.append(test.frame[KEY].assign(score=model.predict(test)))
            print(f"  {name} fold {fold}: {len(test_ids)} common problems scored ({time.perf_counter() - t0:.0f} s)")
        scored = pd.concat(scored, ignore_index=True)
        for target, frame in targets.items():
            record("models", name, target, score_on(scored, frame))

    agree = agreement(a, b)
    small = agree["oracle_a_ms"] < 0.02
    results["agreement"] = {
        "tau_ab_median": round(float(agree["tau_ab"].median()), 4),
        "top10_abs_log_ratio_median": round(float(agree["top10_abs_log_ratio"].median()), 4),
        "top10_abs_log_ratio_median_oracle_under_0.02ms": round(
            float(agree.loc[small, "top10_abs_log_ratio"].median()), 4
        ),
        "top10_abs_log_ratio_median_oracle_over_0.1ms": round(
            float(agree.loc[agree["oracle_a_ms"] >= 0.1, "top10_abs_log_ratio"].median()), 4
        ),
        "same_oracle_frac": round(float(agree["same_oracle"].mean()), 3),
        "problems_oracle_under_0.02ms": int(small.sum()),
    }

    # Oracle in the top 10 by the oracle's time (A's): where the ceiling is lowest.
    rows = pd.concat(per_problem, ignore_index=True)
    rows["bucket"] = pd.cut(rows["oracle_ms"], BUCKETS_MS, labels=BUCKET_NAMES).astype(str)
    rows = rows[rows["target"].isin(["A", "B"])]
    by = rows.groupby(["kind", "name", "target", "bucket"])["oracle_in_top10"].agg(["mean", "size"])
    results["oracle_in_top10_by_oracle_ms"] = {
        f"{kind}/{name} on {target}": {
            b: [round(float(r["mean"]), 3), int(r["size"])] for b, r in g.droplevel([0, 1, 2]).iterrows()
        }
        for (kind, name, target), g in by.groupby(level=[0, 1, 2])
    }

    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    if args.per_problem:
        pd.concat(per_problem, ignore_index=True).merge(agree, on="problem_id", how="left").to_csv(
            args.per_problem, index=False
        )
    return 0 if not math.isnan(results["agreement"]["tau_ab_median"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
