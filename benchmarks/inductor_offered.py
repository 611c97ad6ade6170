"""Stop 75's check: does an Inductor-grid ranker gain from training on Inductor's pruned grid points too?

Until stop 75 the Inductor datasets' pruned points ("invalid": never offered for the shape) were training rows of
label 0 and were scored 0 when picked; its choice filter only ever ranks the offered choices, so they now leave the
data as it loads (models/data.py, `offered_rows`). This fits the family's ranker both ways on the same GroupKFold
folds (the offered set's, as `autoheur train` draws them) and scores both on the offered rows only, as the filter
meets them. CPU, a minute a dataset:

    python benchmarks/inductor_offered.py data/inductor-nvidia-h100-80gb-hbm3 data/inductor-nvidia-h200 --out J.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from autoheur.collect.store import DatasetStore
from autoheur.models.data import COLUMNS, RankingSet, load_ranking_set
from autoheur.models.evaluate import group_kfold, make_model
from autoheur.models.metrics import evaluate, summarize
from autoheur.models.rankers import family_params


def compare(path: str, seed: int = 0) -> dict:
    offered = load_ranking_set(path)
    store = DatasetStore.load(Path(path))  # every row, the pruned points too: the frame before `offered_rows`
    every = RankingSet.from_frame(store.read(COLUMNS), store.meta.device)
    params = family_params("inductor")["xgb_ranker"]
    out = {}
    for name, train_set in (("offered rows (shipped)", offered), ("every grid point", every)):
        rows = []
        for _, train_ids, test_ids in group_kfold(offered, seed=seed):
            model = make_model("xgb_ranker", **params)
            model.fit(train_set.subset(train_ids))
            test = offered.subset(test_ids)
            rows.append(evaluate(test.frame.assign(score=model.predict(test))))
        pp = pd.concat(rows)
        s = summarize(pp)
        out[name] = {
            "problems": s["n_problems"],
            "best_of_10": [s["eff_best10_geomean"], s["eff_best10_p10"], s["eff_best10_min"]],
            "top1": [s["eff_top1_geomean"], s["eff_top1_p10"]],
            "oracle_in_top10": s["oracle_in_top10"],
        }
        print(path, name, json.dumps(out[name]), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    res = {p: compare(p, args.seed) for p in args.data}
    if args.out:
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
