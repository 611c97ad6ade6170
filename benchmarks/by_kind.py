"""Held-out figures by kind of problem, from the per-problem file that `autoheur eval --report DIR` writes.

Kinds (`kind`, which `dev_cv.py` labels its problems with too): `grad_a` and `grad_b` (the backward problems of
`autoheur collect --workload backward`, by their name's last part; `grad_w`, `--workload aten_backward`'s weight
gradient), `sampled/grad_a` (`--workload sampled_grad_a`), the sampled problems by layout (`sampled/2d2d`, ...),
and `public` (the public models' forward problems). Per model and kind: best-of-10 geomean / P10 / min, top-1
geomean / P10, oracle in the top 10. `--only FILE` keeps the problems of another per-problem file (e.g. an earlier
evaluation's), for a comparison on the same problems. `--aten DATASET` (an Inductor-grid evaluation): what
Inductor gets from each list, which the filter always hands it with the ATen choice (`with_aten`).

  python benchmarks/by_kind.py reports/eval-stop34/h100-gkf/per_problem.csv.gz [--only OTHER.csv.gz] [--json OUT]
  python benchmarks/by_kind.py reports/eval-stop86/inductor-h200/per_problem.csv.gz --aten data/inductor-nvidia-h200
  python benchmarks/by_kind.py DIR --dev-scores     # DIR: dev_cv.py --scores DIR; per variant, the mean of its seeds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.metrics import GEOMEAN_FLOOR  # noqa: E402
from benchmarks.common import geomean  # noqa: E402


def _geomean(eff: pd.Series) -> float:
    """Geomean of efficiencies as `metrics.summarize` takes it: a failed pick (0, e.g. a config Inductor pruned for
    the problem) counts as GEOMEAN_FLOOR, so one failure shows as a penalty instead of failing the table."""
    return geomean(eff.clip(lower=GEOMEAN_FLOOR))


def kind(problem_name: str) -> str:
    """'grad_a' / 'grad_b' for the backward workload's problems ('grad_w' for the aten_backward workload's weight
    gradient), 'sampled/grad_a' for the sampled_grad_a workload's (and 'sampled/grad_a' / 'sampled/grad_w' for
    aten_backward's of sampled forwards), 'sampled/2d2d' etc. for sampled ones, 'public' for the public models'
    forward problems."""
    parts = str(problem_name).split("/")
    if parts[-1] in ("grad_a", "grad_b", "grad_w"):
        return f"sampled/{parts[-1]}" if parts[0] == "sampled" else parts[-1]
    return f"sampled/{parts[1]}" if parts[0] == "sampled" else "public"


def table(per_problem: pd.DataFrame) -> pd.DataFrame:
    """model x kind -> the figures (rows "all" per model too)."""
    d = per_problem.assign(kind=per_problem["problem_name"].map(kind))
    rows = []
    for (model, k), g in list(d.groupby(["model", "kind"])) + [((m, "all"), g) for m, g in d.groupby("model")]:
        rows.append({
            "model": model, "kind": k, "problems": len(g),
            "best10_geomean": _geomean(g["eff_best10"]), "best10_p10": float(g["eff_best10"].quantile(0.1)),
            "best10_min": float(g["eff_best10"].min()),
            "top1_geomean": _geomean(g["eff_top1"]), "top1_p10": float(g["eff_top1"].quantile(0.1)),
            "top1_failed": int((g["eff_top1"] == 0).sum()),
            "oracle_in_top10": float(g["oracle_in_top10"].mean()),
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values(["model", "kind"]).reset_index(drop=True)


def aten_times(dataset: str) -> dict[str, float]:
    """An Inductor-grid dataset's ATen time per problem: the `aten_ms` its run logs (`runs/*.jsonl`) hold, the newest
    log's for a problem logged twice; NaN where ATen's choice failed."""
    times = {}
    for path in sorted(Path(dataset, "runs").glob("*.jsonl")):  # the logs' names start with their UTC start time
        for line in path.read_text().splitlines():
            r = json.loads(line) if line.strip() else {}
            if "aten_ms" in r:
                times[r["problem_id"]] = math.nan if r["aten_ms"] is None else float(r["aten_ms"])
    if not times:
        raise SystemExit(f"{dataset}: no run log with an ATen time (runs/*.jsonl, `aten_ms`): not an Inductor dataset?")
    return times


def with_aten(per_problem: pd.DataFrame, aten_ms: dict[str, float]) -> pd.DataFrame:
    """The figures as Inductor gets them: the filter keeps the ATen choice beside the predicted templates, so a list
    of k yields the faster of its best template and ATen, and the oracle is the faster of the best template and ATen.
    Per problem, each `eff_*` becomes min(oracle, ATen) / min(chosen, ATen), and `oracle_in_top10` is true where the
    list holds the oracle or ATen is at least as fast. A failed ATen choice (NaN) is no choice."""
    missing = sorted(set(per_problem["problem_id"]) - set(aten_ms))
    if missing:
        raise SystemExit(f"--aten: no ATen time for {len(missing)} problem(s), e.g. {missing[0]}: another dataset?")
    aten = per_problem["problem_id"].map(aten_ms).astype(float).to_numpy()
    oracle = per_problem["oracle_ms"].to_numpy(dtype=float)
    best = np.fmin(oracle, aten)
    out = per_problem.copy()
    for col in [c for c in per_problem if c.startswith("eff_")]:
        eff = per_problem[col].to_numpy(dtype=float)
        with np.errstate(divide="ignore"):
            chosen = np.where(eff > 0, oracle / eff, np.inf)  # a failed pick (0): only ATen is left
        out[col] = best / np.fmin(chosen, aten)
    out["oracle_in_top10"] = per_problem["oracle_in_top10"].to_numpy(dtype=bool) | (aten <= oracle)
    return out


def dev_scores(directory: str) -> pd.DataFrame:
    """The per-problem figures of `dev_cv.py --scores DIR`'s files (`<variant>_seed<seed>.parquet`), as an
    evaluation's per-problem file holds them, with "model" the variant and "seed" the seed."""
    from autoheur.models.metrics import evaluate

    frames = []
    for path in sorted(Path(directory).glob("*_seed*.parquet")):
        variant, seed = path.stem.rsplit("_seed", 1)
        scores = pd.read_parquet(path)
        pp = evaluate(scores).reset_index()
        names = scores.groupby("problem_id", sort=False)["problem_name"].first()
        frames.append(pp.assign(model=variant, seed=int(seed), problem_name=pp["problem_id"].map(names)))
    if not frames:
        raise SystemExit(f"{directory}: no dev_cv scores (<variant>_seed<seed>.parquet)")
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("per_problem", help="an evaluation's per_problem.csv.gz, or with --dev-scores a directory")
    ap.add_argument("--dev-scores", action="store_true",
                    help="per_problem is a `dev_cv.py --scores` directory: each variant's figures by kind, as the mean "
                         "over its seeds")  # fmt: skip
    ap.add_argument("--split", help="keep only this split of an evaluation's file (e.g. inductor-h200:group_kfold)")
    ap.add_argument("--only", help="keep only the problems of this per-problem file")
    ap.add_argument("--models", default=None, help="comma-separated models to show (default: all)")
    ap.add_argument("--aten", metavar="DATASET",
                    help="an Inductor-grid evaluation: the figures with the ATen choice beside each list, as the "
                         "filter hands Inductor (ATen times from DATASET's run logs)")  # fmt: skip
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args(argv)
    d = dev_scores(args.per_problem) if args.dev_scores else pd.read_csv(args.per_problem)
    if args.split:
        if "split" not in d:
            raise SystemExit(f"--split {args.split}: {args.per_problem} has no splits (dev_cv scores are one split)")
        d = d[d["split"] == args.split]
    if args.only:
        d = d[d["problem_id"].isin(set(pd.read_csv(args.only)["problem_id"]))]
    if args.models:
        d = d[d["model"].isin(args.models.split(","))]
    if args.aten:
        d = with_aten(d, aten_times(args.aten))
    if args.dev_scores:  # each seed's table, then the mean over seeds
        t = pd.concat([table(g) for _, g in d.groupby("seed")]).groupby(["model", "kind"], as_index=False).mean()
    else:
        t = table(d)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(t.round(4).to_string(index=False))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(t.round(4).to_dict("records"), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
