"""A trained model file scored on a dataset's problems, as they are: no refit. For problems the model never trained
on (a newer collection, or a kind its data lacked), this is a held-out figure of that very model file.

Rows: the model (its `rank` order), and its own fallback list (`fixed_list` in its metadata, the list the run time
uses without a model). The table is `by_kind.py`'s; `--out` writes the per-problem file in `autoheur eval`'s
columns, for `by_kind.py --only` comparisons.

  python benchmarks/score_model.py --model FILE --data data/nvidia-h100-80gb-hbm3 [--kinds grad_a,grad_b] [--out F]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.artifact import TrainedModel  # noqa: E402
from autoheur.models.data import load_ranking_set  # noqa: E402
from autoheur.models.metrics import evaluate  # noqa: E402
from benchmarks.by_kind import kind, table  # noqa: E402


def score(model: TrainedModel, rs) -> pd.DataFrame:
    """Per-problem figures of the model's ranking and of its fallback list, with `autoheur eval`'s columns."""
    names = rs.frame.groupby("problem_id", sort=False)["problem_name"].first()
    listed = {c: float(len(model.fixed_list) - i) for i, c in enumerate(model.fixed_list)}
    fixed = rs.frame["config_id"].map(listed).fillna(-np.inf).to_numpy()
    out = []
    for name, scores in (("model", model.ranker.predict(rs)), ("its fixed list", fixed)):
        pp = evaluate(rs.frame.assign(score=scores)).reset_index()
        out.append(pp.assign(model=name, problem_name=pp["problem_id"].map(names)))
    return pd.concat(out, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--kinds", help="comma-separated kinds of by_kind.kind to keep (default: every problem)")
    ap.add_argument("--out", help="write the per-problem figures here (.csv.gz)")
    args = ap.parse_args(argv)
    model = TrainedModel.load(args.model)
    rs = load_ranking_set(args.data)
    if args.kinds:
        names = rs.frame.groupby("problem_id", sort=False)["problem_name"].first()
        rs = rs.subset(names.index[names.map(kind).isin(args.kinds.split(","))])
    pp = score(model, rs)
    with pd.option_context("display.width", 200):
        print(table(pp).round(4).to_string(index=False))
    if args.out:
        pp.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
