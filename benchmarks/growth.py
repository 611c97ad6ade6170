"""Does a dataset's growth help on the problems it had before? A paired comparison on the old problems alone.

A GroupKFold over the old problems only, for several fold seeds. Each fold fits the model twice: on the fold's
training part of the old problems, and on that plus every new problem. Both are scored on the same held-out old
problems, so the difference is what the new problems taught the model, apart from the new problems' own difficulty
and from which folds a grown problem list happens to give (`autoheur eval` on the grown data moves both).

    python benchmarks/growth.py --data data/inductor-nvidia-h100-80gb-hbm3 --old OLD_DATASET_DIR [--seeds 0,1,2,3,4]

OLD_DATASET_DIR is the dataset before the growth (e.g. `git archive <commit> data/<name> | tar x -C /tmp/old`). The
model is the shipped default ranker with the dataset family's parameters (rankers.FAMILY_PARAMS).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.models.evaluate import SUBSETS  # noqa: E402
from autoheur.models.metrics import evaluate, summarize  # noqa: E402

BIG = "oracle>=0.1ms"  # the subset `autoheur eval` reports apart


def _figures(pp: pd.DataFrame) -> dict:
    s, big = summarize(pp), summarize(pp[SUBSETS[BIG](pp)])
    return {
        "best10": [round(s[f"eff_best10_{k}"], 4) for k in ("geomean", "p10", "min")],
        "hit": round(s["oracle_in_top10"], 4),
        "big_problems": big["n_problems"],
        "big_best10": [round(big[f"eff_best10_{k}"], 4) for k in ("geomean", "p10", "min")],
        "big_hit": round(big["oracle_in_top10"], 4),
    }


def paired(
    rs, old: Sequence[str], new: Sequence[str], make_model: Callable[[int], object], seeds=(0,), n_splits: int = 5
) -> list[dict]:
    """Per seed and variant ("old" / "old+new"): the held-out figures on the old problems (see the module doc)."""
    old = np.asarray(list(old))
    rows = []
    for seed in seeds:
        folds = list(GroupKFold(n_splits, shuffle=True, random_state=seed).split(old, groups=old))
        for variant, extra in (("old", []), ("old+new", list(new))):
            frames = []
            for tr, te in folds:
                model = make_model(seed).fit(rs.subset([*old[tr], *extra]))
                test = rs.subset(old[te])
                frames.append(test.frame.assign(score=model.predict(test)))
            pp = evaluate(pd.concat(frames, ignore_index=True))
            rows.append({"seed": seed, "variant": variant, **_figures(pp)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the grown dataset")
    ap.add_argument("--old", required=True, help="the dataset before it grew (its problems are the old ones)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--out", help="write the rows here as JSON")
    args = ap.parse_args(argv)

    from autoheur.collect.store import DatasetStore
    from autoheur.models.data import load_ranking_set
    from autoheur.models.rankers import XGBRankerModel, family_params

    rs = load_ranking_set(args.data)
    before = DatasetStore.load(args.old).done_problems()
    old = [p for p in rs.problems if p in before]
    new = [p for p in rs.problems if p not in before]
    if len(old) != len(before):
        ap.error(f"{len(before) - len(old)} problems of --old are not in --data: is --data the grown --old?")
    params = family_params(DatasetStore.load(args.data).meta.family).get("xgb_ranker", {})
    print(f"{len(old)} old problems, {len(new)} new; ranker parameters {params}", flush=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = paired(rs, old, new, lambda seed: XGBRankerModel(random_state=seed, **params), seeds)
    for r in rows:
        print(json.dumps(r), flush=True)

    def mean(v: list[dict], key: str, i: int | None = None) -> float:
        return round(float(np.mean([r[key] if i is None else r[key][i] for r in v])), 4)

    for variant in ("old", "old+new"):
        v = [r for r in rows if r["variant"] == variant]
        print(
            f"{variant:8s} mean of {len(v)} seeds: best-of-10 geomean {mean(v, 'best10', 0)} P10 "
            f"{mean(v, 'best10', 1)}, oracle in top 10 {mean(v, 'hit')}; {BIG}: best-of-10 "
            f"{mean(v, 'big_best10', 0)}, oracle in top 10 {mean(v, 'big_hit')}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
