"""How a model ranks problems just outside its training range: the measure behind the Inductor filter's range margin.

The filter (autoheur/inductor/filter.py) gives Inductor the full template list for a problem outside the model's
training range (`TrainedModel.extrapolation`). Without a measure, "outside" meant outside by any amount: stop 82's
mixtral-8x7b gate/up GEMM on an H200 was 0.01 log2 units past the range in one feature and kept all its choices.
This measures how far out the model's top 10 stays as good as inside.

On the dev set only (outer fold `--outer-fold`'s training problems, as benchmarks/dev_cv.py; the outer fold's test
problems are never read, and the dev problems are recorded in models/design-seen.txt), for every problem feature that
varies and each side of it: the problems past the `--rim` quantile on that side are held out, the model is fitted on
the rest, and each held-out problem gets its distance outside the fit's range: the largest over all problem features
of (value - max) / span or (min - value) / span (span = max - min of the fit's problems; a feature of zero span counts
only if the value differs, as infinite distance). A problem inside every range (distance 0) was held out for one
feature but lies within the others' ranges: inside, as in a GroupKFold. The rows: held-out problems by distance
bin, the model's best-of-10 and top-1 (geomean, P10, min) and the best fixed list of 10 fitted on the same problems,
pooled over the experiments (a problem held out in several experiments counts in each). Beside them, the model on
an inner 5-fold GroupKFold of the same dev set (inside the range, mostly).

    python benchmarks/extrapolation.py --data data/inductor-nvidia-h200 --variant inductor --seeds 0,1
    python benchmarks/extrapolation.py --data data/inductor-nvidia-h100-80gb-hbm3 --variant inductor --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.features import FEATURE_NAMES  # noqa: E402
from autoheur.features.core import N_PROBLEM  # noqa: E402
from autoheur.models.baselines import FixedList  # noqa: E402
from autoheur.models.data import load_ranking_set  # noqa: E402
from autoheur.models.design_seen import record_seen  # noqa: E402
from autoheur.models.evaluate import group_kfold  # noqa: E402
from autoheur.models.metrics import evaluate  # noqa: E402
from benchmarks.dev_cv import VARIANTS  # noqa: E402

BINS = (0.0, 0.02, 0.05, 0.10, 0.25, np.inf)  # distance outside, as a share of the feature's span in the fit


def problem_table(rs) -> pd.DataFrame:
    """One row per problem: its problem features (the first N_PROBLEM columns, constant over its rows)."""
    first = ~rs.frame["problem_id"].duplicated().to_numpy()
    return pd.DataFrame(
        rs.X[first, :N_PROBLEM].astype(np.float64),
        index=rs.frame["problem_id"].to_numpy()[first],
        columns=FEATURE_NAMES[:N_PROBLEM],
    )


def distance_outside(train: pd.DataFrame, test: pd.DataFrame) -> pd.Series:
    """Per test problem, the largest distance outside the training problems' range over the features, each as a
    share of that feature's span (inf: a feature constant in training that differs)."""
    lo, hi = train.min(), train.max()
    span = hi - lo
    below, above = (lo - test).clip(lower=0), (test - hi).clip(lower=0)
    past = np.maximum(below, above)
    past = past.where(past > 1e-6, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(span.to_numpy() > 0, past / span.to_numpy(), np.where(past > 0, np.inf, 0.0))
    return pd.Series(rel.max(axis=1), index=test.index)


def _fit_score(variant: str, seed: int, rs, train_ids, test_ids) -> pd.DataFrame:
    """Per held-out problem: best-of-10 and top-1 efficiency of the model and best-of-10 of the fixed list."""
    train, test = rs.subset(train_ids), rs.subset(test_ids)
    out = {}
    for name, model in (("model", VARIANTS[variant](seed)), ("fixed10", FixedList(10))):
        model.fit(train)
        per = evaluate(test.frame.assign(score=model.predict(test)))
        out[f"{name}_best10"] = per["eff_best10"]
        if name == "model":
            out["model_top1"] = per["eff_top1"]
    return pd.DataFrame(out)


def _figures(v: pd.Series) -> list[float]:
    v = v.to_numpy(dtype=float)
    return [round(float(np.exp(np.log(np.maximum(v, 1e-3)).mean())), 4), round(float(np.percentile(v, 10)), 4),
            round(float(v.min()), 4)]  # fmt: skip


def _interval(label: str) -> str:
    """pandas' string of the bin labelled "a..b"."""
    a, b = label.split("..")
    return str(pd.Interval(float(a), float(b), closed="right"))


def summarize_bins(rows: pd.DataFrame) -> list[dict]:
    out = []
    d = rows["distance"].to_numpy()
    labels = np.where(d == 0, "0 (inside)", pd.cut(d, BINS, right=True).astype(str))
    for label in ["0 (inside)", *(f"{a:g}..{b:g}" for a, b in zip(BINS[:-1], BINS[1:], strict=True))]:
        g = rows[labels == (label if label.startswith("0 (") else _interval(label))]
        if not len(g):
            continue
        out.append({
            "distance": label,
            "cases": len(g),
            "problems": int(g["problem_id"].nunique()),
            "model_best10": _figures(g["model_best10"]),
            "model_top1": _figures(g["model_top1"]),
            "fixed10_best10": _figures(g["fixed10_best10"]),
        })  # fmt: skip
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--variant", default="inductor", help="a benchmarks/dev_cv.py variant")
    ap.add_argument("--outer-fold", type=int, default=0)
    ap.add_argument("--rim", type=float, default=0.1, help="the share of problems held out on each side of a feature")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default=None, help="write the summaries and per-case rows here as JSON")
    ap.add_argument("--no-record-seen", action="store_true")
    args = ap.parse_args(argv)
    if args.variant not in VARIANTS:
        ap.error(f"unknown variant {args.variant!r}")
    if not 0 < args.rim < 0.5:
        ap.error(f"--rim {args.rim}: expected a share in (0, 0.5)")

    rs = load_ranking_set(args.data)
    found = [(train, test) for fold, train, test in group_kfold(rs) if fold == args.outer_fold]
    if not found:
        ap.error(f"--outer-fold {args.outer_fold}: no such fold")
    dev = rs.subset(found[0][0])
    del rs
    table = problem_table(dev)
    print(f"dev set: {len(table)} problems of outer fold {args.outer_fold}'s training split")
    if not args.no_record_seen:
        record_seen(table.index)
    varying = [f for f in table.columns if table[f].nunique() > 1 and not f.startswith("layout_")]
    result = {"data": args.data, "variant": args.variant, "rim": args.rim, "seeds": {}}
    for seed in (int(s) for s in args.seeds.split(",")):
        cases = []
        for feature in varying:
            v = table[feature]
            for side in ("high", "low"):
                cut = v.quantile(1 - args.rim if side == "high" else args.rim)
                held = v > cut if side == "high" else v < cut
                if held.sum() < 2 or (~held).sum() < 10:
                    continue
                train_ids, test_ids = table.index[~held], table.index[held]
                scored = _fit_score(args.variant, seed, dev, train_ids, test_ids)
                scored["distance"] = distance_outside(table.loc[train_ids], table.loc[scored.index])
                cases.append(scored.assign(feature=feature, side=side).rename_axis("problem_id").reset_index())
        rows = pd.concat(cases, ignore_index=True)
        pids = np.asarray(table.index)
        inner = []
        for tr, te in GroupKFold(5, shuffle=True, random_state=seed).split(pids, groups=pids):
            scored = _fit_score(args.variant, seed, dev, pids[tr], pids[te])
            scored["distance"] = distance_outside(table.loc[pids[tr]], table.loc[scored.index])
            inner.append(scored.rename_axis("problem_id").reset_index())
        inner = pd.concat(inner, ignore_index=True)
        result["seeds"][seed] = {
            "rim_by_distance": summarize_bins(rows),
            "inner_kfold_all": {
                "problems": len(inner),
                "model_best10": _figures(inner["model_best10"]),
                "model_top1": _figures(inner["model_top1"]),
                "fixed10_best10": _figures(inner["fixed10_best10"]),
            },
            "inner_kfold_by_distance": summarize_bins(inner),
            "cases": rows.to_dict(orient="records"),
        }
        print(json.dumps({k: v for k, v in result["seeds"][seed].items() if k != "cases"} | {"seed": seed}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
