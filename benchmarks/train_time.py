"""Fit time of the default ranker on a shipped dataset, on this machine (issue 4: the shipped H100 model trains in
under 2 minutes on 2 CPU cores). Run it on an otherwise idle machine.

Loads the dataset (not timed), then fits `XGBRankerModel()` as `autoheur train` does (timed: `fit_s`), then again
step by step to show where the time goes (unless --no-steps): per layout expert, the row subsample, each ensemble
member, the near-best re-ranker (one after another here; `fit` runs each expert's fits side by side). The
record names the CPU model: the lent 2-core machines differ between sessions.

  python benchmarks/train_time.py [--data data/nvidia-h100-80gb-hbm3] [--out result.json] [--no-steps]
  python benchmarks/train_time.py --no-steps --rows 128,96   # the fit at other rows per problem (top: a quarter)
  python benchmarks/train_time.py --no-steps --max-bins 128,64   # the fit with fewer histogram bins (speed only)
  python benchmarks/train_time.py --no-steps --rounds 450x0.1,350x0.13   # the fit at other boosting rounds x step
  python benchmarks/train_time.py --no-steps --aux data/nvidia-h200 --aux-new-only   # the fit with auxiliary data, as
      # `autoheur train --aux ... --aux-new-only` fits it (`fit_s`), beside the fit on the dataset alone (`fit_s_own`);
      # add `--aux-share 0.5` for the shipped H100 recipe's fit (and --aux-problems FILE for its pinned borrowed list)
  python benchmarks/train_time.py --no-steps --rounds 350x0.13 --pairs mean:8,topk:16   # the fit at other pair
      # constructions (`autoheur train --pairs`), each at the first --rounds budget
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.collect.store import read_problem_ids  # noqa: E402
from autoheur.models.data import (  # noqa: E402
    listed_problems_only,
    load_auxiliary,
    load_ranking_set,
    new_problems_only,
    sample_rows,
)
from autoheur.models.rankers import ENSEMBLE, XGBRankerModel, parse_pairs, parse_rounds  # noqa: E402
from benchmarks.common import cpu_model  # noqa: E402


def _steps(train) -> tuple[dict, int]:
    """Each step of the default fit, one after another on all cores: per layout expert, its row subsample, each
    ensemble member, its re-ranker. Returns their seconds and the subsampled rows."""
    steps = {}
    m = XGBRankerModel()
    assert m.objective == ENSEMBLE
    route = m._route(train.X)
    names = [*m.experts, "the rest"]
    sub_rows = 0
    for e in sorted(set(route.tolist())):
        within = route == e
        t0 = time.perf_counter()
        sub = sample_rows(train, m.per_problem, m.top, m.random_state, within, m.aux_share)
        steps[f"{names[e]}: subsample"] = time.perf_counter() - t0
        sub_rows += len(sub.frame)
        for obj in m.members:
            t0 = time.perf_counter()
            m._fit_one(sub, obj, seed=m.random_state)
            steps[f"{names[e]}: member {obj}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        m._fit_reranker(train, within=within)
        steps[f"{names[e]}: reranker"] = time.perf_counter() - t0
    return steps, sub_rows


def _ints(text: str | None) -> list[int]:
    return [int(v) for v in text.split(",")] if text else []


def _rounds(text: str | None) -> list[tuple[str, int, float]]:
    """Parse "450x0.1,350x0.13" into [("450x0.1", 450, 0.1), ("350x0.13", 350, 0.13)]."""
    out = []
    for item in text.split(",") if text else []:
        try:
            out.append((item, *parse_rounds(item)))
        except ValueError as exc:
            raise SystemExit(f"--{exc}") from None
    return out


def _fit_s(model: XGBRankerModel, train) -> float:
    """Seconds `model.fit(train)` takes, to 0.1 s."""
    t0 = time.perf_counter()
    model.fit(train)
    return round(time.perf_counter() - t0, 1)


def load_train_set(data: str, aux: list[str], aux_new_only: bool = False, aux_problems: str | None = None):
    """(the set the fit trains on, the dataset's own set): with `aux`, the auxiliary sets loaded thinned and joined
    as `autoheur train --aux` joins them (only the problems the dataset lacks with `aux_new_only`, only those
    `aux_problems` lists with it); without, both are the dataset's own."""
    if (aux_new_only or aux_problems) and not aux:
        raise SystemExit("--aux-new-only, --aux-problems: no auxiliary dataset (--aux DATA)")
    listed = read_problem_ids(aux_problems) if aux_problems else None
    own = load_ranking_set(data)
    if not aux:
        return own, own
    extra = load_auxiliary(aux, data)
    if listed is not None:
        extra = listed_problems_only(extra, listed, aux_problems)
    if aux_new_only:
        extra = new_problems_only(extra, own)
    return own.with_auxiliary(extra), own


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/nvidia-h100-80gb-hbm3")
    ap.add_argument("--out", help="write the figures here as JSON")
    ap.add_argument("--no-steps", action="store_true", help="time the fit only, not its steps one by one")
    ap.add_argument(
        "--rows", help="comma-separated rows per problem to time the fit at, each with a quarter of them the top ones"
    )
    ap.add_argument("--max-bins", help="comma-separated XGBoost histogram bins to time the default fit at")
    ap.add_argument(
        "--rounds", help="comma-separated TREESxSTEP (e.g. 450x0.1) to time the fit at, at the fit_s fit's --aux-share"
    )
    ap.add_argument("--aux", action="append", default=[], help="auxiliary dataset, as `autoheur train --aux`")
    ap.add_argument("--aux-new-only", action="store_true", help="as `autoheur train --aux-new-only`")
    ap.add_argument("--aux-share", type=float, default=1.0, help="as `autoheur train --aux-share` (the fit_s fit's)")
    ap.add_argument("--aux-problems", help="as `autoheur train --aux-problems`")
    ap.add_argument(
        "--pairs", help="comma-separated METHOD:COUNT (e.g. topk:16) to time the fit at, at the first --rounds budget"
    )
    args = ap.parse_args()
    try:
        pair_specs = [(p, *parse_pairs(p)) for p in args.pairs.split(",")] if args.pairs else []
    except ValueError as exc:
        raise SystemExit(f"--{exc}") from None
    budget = (
        dict(zip(("n_estimators", "learning_rate"), _rounds(args.rounds)[0][1:], strict=True)) if args.rounds else {}
    )
    t0 = time.perf_counter()
    train, own = load_train_set(args.data, args.aux, args.aux_new_only, args.aux_problems)
    load_s = time.perf_counter() - t0
    model = XGBRankerModel(aux_share=args.aux_share)
    t0 = time.perf_counter()
    model.fit(train)
    fit_s = time.perf_counter() - t0
    fit_s_own = _fit_s(XGBRankerModel(), own) if args.aux else None
    by_rows = {r: _fit_s(XGBRankerModel(per_problem=r, top=r // 4), train) for r in _ints(args.rows)}
    by_bins = {b: _fit_s(XGBRankerModel(max_bin=b), train) for b in _ints(args.max_bins)}
    by_rounds = {
        r: _fit_s(XGBRankerModel(aux_share=args.aux_share, n_estimators=t, learning_rate=lr), train)
        for r, t, lr in _rounds(args.rounds)
    }
    by_pairs = {
        p: _fit_s(XGBRankerModel(aux_share=args.aux_share, pair_method=m, pairs=k, **budget), train)
        for p, m, k in pair_specs
    }

    steps, sub_rows = ({}, None) if args.no_steps else _steps(train)
    res = {
        "data": args.data,
        "aux": args.aux,
        "aux_new_only": args.aux_new_only,
        "aux_share": args.aux_share,
        "problems": int(train.frame["problem_id"].nunique()),
        "own_problems": len(own.problems),
        "rows": len(train.frame),
        "subsample_rows": sub_rows,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_s": round(load_s, 1),
        "fit_s": round(fit_s, 1),
        # each expert's wall, and each of its side-by-side fits'
        "fit_seconds": {k: round(v, 1) for k, v in model.fit_seconds_.items()},
        "fit_s_own": fit_s_own,
        "rows_per_problem": model.per_problem,
        "fit_s_at_rows": by_rows,
        "fit_s_at_max_bin": by_bins,
        "fit_s_at_rounds": by_rounds,
        "fit_s_at_pairs": by_pairs,  # at the first --rounds budget
        "steps_s": {k: round(v, 1) for k, v in steps.items()},
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
