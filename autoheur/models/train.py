"""`autoheur train`: fit the default ranker on a whole dataset and save it with its metadata and held-out figures.

The held-out figures come from a GroupKFold over the dataset's problems in which every fold refits the same model
from scratch (any inner selection included, on that fold's training problems only), so they are what the saved
model's procedure achieves on problems it never saw. The saved model is then fitted on every problem.
"""

from __future__ import annotations

import time
from pathlib import Path

from autoheur.collect.store import DatasetStore
from autoheur.models.artifact import TrainedModel, build_meta
from autoheur.models.data import load_ranking_set
from autoheur.models.evaluate import group_kfold, make_model, run_split, summarize_splits
from autoheur.models.rankers import DEFAULT, FixedList, family_params


def train(
    data: str | Path,
    model: str = DEFAULT,
    heldout_folds: int = 5,
    log=print,
    params: dict | None = None,
    allow_stale_kernel: bool = False,
) -> TrainedModel:
    """Held-out figures (GroupKFold, `heldout_folds` folds; 0: none), then the model fitted on every problem.
    `params` override the ranker's default hyperparameters (tests use small models), which the dataset family's
    (rankers.FAMILY_PARAMS) override first."""
    meta = DatasetStore.load(data).meta
    family = meta.family
    params = {**family_params(family).get(model, {}), **(params or {})}
    t0 = time.perf_counter()
    rs = load_ranking_set(data, allow_stale_kernel)
    log(f"loaded {data}: {len(rs.problems)} problems, {len(rs.frame)} rows in {time.perf_counter() - t0:.1f} s")
    heldout = []
    if heldout_folds:
        per_problem, _ = run_split(
            "group_kfold", group_kfold(rs, heldout_folds), rs, rs, [model], log=log, params={model: params}
        )
        heldout = summarize_splits(per_problem).drop(columns=["split"]).round(4).to_dict("records")
    fixed = FixedList(10).fit(rs).list_
    t1 = time.perf_counter()
    ranker = make_model(model, **params).fit(rs)
    fit_s = time.perf_counter() - t1
    log(f"fitted {model} on all {len(rs.problems)} problems in {fit_s:.1f} s")
    meta = build_meta(ranker, rs, str(data), fit_s, heldout, fixed, family=family, kernel_hash=meta.kernel_hash)
    return TrainedModel(ranker, meta)
