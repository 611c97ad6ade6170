"""Two held-out per-problem files of the same problems, paired: what changed between two models or list policies.

Each file is what `autoheur train --heldout-problems CSV` or `autoheur eval --report DIR` (per_problem.csv.gz) writes:
one row per held-out problem and model. The problems of both files are matched by problem_id (each file's rows of
one model, `--model`); the figures are best-of-10 geomean / P10 / min, top-1 geomean / P10, oracle in the top 10,
the problems under 0.95 and 0.97 best-of-10, and how many problems each side did better on (by more than `--tol`),
with the largest loss.

    python benchmarks/paired.py benchmarks/results/h100_heldout_stop60.csv benchmarks/results/h100_heldout_stop63.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.metrics import summarize  # noqa: E402
from benchmarks.common import print_json  # noqa: E402
from benchmarks.list_fill import list_row  # noqa: E402


def read(path: str, model: str) -> pd.DataFrame:
    """One model's per-problem rows of `path`, indexed by problem_id (refused when a problem appears twice)."""
    df = pd.read_csv(path)
    df = df[df["model"] == model]
    if df.empty:
        raise SystemExit(f"{path}: no rows of model {model!r}")
    if df["problem_id"].duplicated().any():
        raise SystemExit(f"{path}: a problem appears twice for model {model!r} (one split's file, please)")
    return df.set_index("problem_id")


def side(pp: pd.DataFrame) -> dict:
    """list_fill's figures of one way of filling the top 10, and the top-1 geomean / P10."""
    s = summarize(pp)
    return {**list_row(pp), "top1": [round(s[f"eff_top1_{q}"], 4) for q in ("geomean", "p10")]}


def paired(a: pd.DataFrame, b: pd.DataFrame, tol: float = 1e-4) -> dict:
    """Figures of `a` and `b` on the problems both hold, and the per-problem best-of-10 changes from a to b."""
    common = a.index.intersection(b.index)
    a, b = a.loc[common], b.loc[common]
    delta = b["eff_best10"] - a["eff_best10"]
    worst = delta.idxmin()
    return {
        "problems": int(len(common)),
        "a": side(a),
        "b": side(b),
        "b_better": int((delta > tol).sum()),
        "b_worse": int((delta < -tol).sum()),
        "largest_loss": {"problem": str(b.loc[worst, "problem_name"]), "best10": [
            round(float(a.loc[worst, "eff_best10"]), 4), round(float(b.loc[worst, "eff_best10"]), 4)]},
        "top1_changed": int(((b["eff_top1"] - a["eff_top1"]).abs() > tol).sum()),
    }  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--model", default="xgb_ranker")
    ap.add_argument("--tol", type=float, default=1e-4, help="a change smaller than this counts as none")
    ap.add_argument("--out", help="write the figures here as JSON too")
    args = ap.parse_args(argv)
    a, b = read(args.a, args.model), read(args.b, args.model)
    out = paired(a, b, args.tol)
    out["only_a"], out["only_b"] = len(a.index.difference(b.index)), len(b.index.difference(a.index))
    return print_json(out, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
