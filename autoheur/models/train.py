"""`autoheur train`: fit the default ranker on a whole dataset and save it with its metadata and held-out figures.

The held-out figures come from a k-fold split over whole problems (a problem's fold a hash of its id,
`evaluate.problem_folds`) in which every fold refits the same model
from scratch (any inner selection included, on that fold's training problems only), so they are what the saved
model's procedure achieves on problems it never saw. The saved model is then fitted on every problem.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from autoheur.collect.store import DatasetStore, read_problem_ids
from autoheur.models.artifact import TrainedModel, build_meta
from autoheur.models.baselines import FixedList
from autoheur.models.data import (
    AUX_ROWS,
    TrainingPool,
    check_space,
    check_thinned,
    listed_problems_only,
    load_auxiliary,
    load_ranking_set,
    new_problems_only,
)
from autoheur.models.evaluate import (
    boosting_rounds,
    check_aux_share,
    group_kfold,
    make_model,
    pair_params,
    run_split,
    summarize_splits,
)
from autoheur.models.rankers import DEFAULT, family_params


def train(
    data: str | Path,
    model: str = DEFAULT,
    heldout_folds: int = 5,
    log=print,
    params: dict | None = None,
    allow_stale_kernel: bool = False,
    aux: Sequence[str | Path] = (),
    aux_rows: int | None = AUX_ROWS,
    heldout_problems: str | Path | None = None,
    aux_new_only: bool = False,
    aux_share: float | None = None,
    rounds: tuple[int, float] | str | None = None,
    aux_problems: str | Path | None = None,
    pairs: str | None = None,
) -> TrainedModel:
    """Held-out figures (`group_kfold`, `heldout_folds` folds; 0: none), then the model fitted on every problem.
    `params` override the ranker's default hyperparameters (tests use small models), which the dataset family's
    (rankers.FAMILY_PARAMS) override first. `aux`: datasets of other devices (same kernel family and space) to
    train on as well (RankingSet.with_auxiliary); each held-out fold leaves out their rows of its test problems, and
    the figures are on this dataset's problems only; each auxiliary problem keeps `aux_rows` of its rows (None: all;
    data.AUX_ROWS says why). `heldout_problems`: also write the held-out figures of each problem there (CSV, the
    columns of `autoheur eval --report`'s per-problem files), e.g. to name the problems behind the min.
    `aux_new_only`: keep only the auxiliary problems this dataset lacks (another device's copies of its own problems
    left out), as `benchmarks/dev_cv.py --aux-new-only` measured it. `aux_share`: an auxiliary problem's share of the
    rows the fit samples per problem (the ranker's `aux_share`; None: its default, 1.0), e.g. 0.5 for a shorter fit.
    `rounds`: (trees, step) or "TREESxSTEP", the boosted model's n_estimators and learning_rate (None: its defaults,
    or its family's), e.g. (350, 0.13) for the H100 model's fit under 2 minutes (README.md). `aux_problems`: a file of
    problem ids (`autoheur data ids` prints them); the auxiliary data keeps only those, each of which it must hold,
    so that a model's borrowed problems stay what they were as the other dataset grows (README.md: the shipped H100
    model's list). `pairs`: "METHOD:COUNT", the ranker's pair construction (rankers.parse_pairs; None: its
    default), e.g. "topk:16" for the H100 model (README.md)."""
    ranker = make_model(model)  # an unknown name before the data loads (minutes for a whole dataset)
    if heldout_folds != 0 and not (type(heldout_folds) is int and heldout_folds >= 2):
        raise ValueError(f"heldout_folds={heldout_folds!r}: 0 (no held-out figures) or at least 2 folds")
    check_aux_share(aux_share, bool(aux), "--aux DATA")
    if aux_share is not None and "aux_share" not in ranker.get_params():
        raise ValueError(f"aux_share: model {model!r} does not sample auxiliary rows (xgb_ranker does)")
    rounds_params = boosting_rounds(model, rounds)
    pairs_params = pair_params(model, pairs)
    if aux_new_only and not aux:
        raise ValueError("aux_new_only: no auxiliary dataset to keep the new problems of (--aux DATA)")
    if aux_problems is not None and not aux:
        raise ValueError("aux_problems: no auxiliary dataset to keep the listed problems of (--aux DATA)")
    listed = None if aux_problems is None else read_problem_ids(aux_problems)  # a bad file before the data loads
    if aux_rows is not None and aux_rows < 4:
        raise ValueError(f"aux_rows={aux_rows!r}: expected at least 4 rows a problem, or None (0 in the CLI) for all")
    meta = DatasetStore.load(data).meta
    for path, m in [(data, meta), *((p, DatasetStore.load(p).meta) for p in aux)]:
        check_space(m, path)  # before any data loads (load_ranking_set checks it too)
    family = meta.family
    params = {**family_params(family).get(model, {}), **(params or {})}
    if aux_share is not None:
        params["aux_share"] = aux_share
    params.update(rounds_params)
    params.update(pairs_params)
    t0 = time.perf_counter()
    if aux:
        check_thinned(make_model(model, **params), aux_rows)  # before the data loads
    rs = load_ranking_set(data, allow_stale_kernel)
    aux_sets = load_auxiliary(aux, data, allow_stale_kernel, aux_rows)
    if listed is not None:
        aux_sets = listed_problems_only(aux_sets, listed, str(aux_problems))
    if aux_new_only:
        aux_sets = new_problems_only(aux_sets, rs)
    log(f"loaded {data}: {len(rs.problems)} problems, {len(rs.frame)} rows in {time.perf_counter() - t0:.1f} s")
    for path, a in zip(aux, aux_sets, strict=True):
        log(f"  auxiliary {path}: {len(a.problems)} problems of {a.device.get('name')}")
    borrowed = [
        {"dataset": str(path), "device": a.device.get("name"), "problems": int(len(a.problems)),
         "rows": int(len(a.frame)), "rows_per_problem": a.thin, "data_hash": a.data_hash(), "new_only": aux_new_only}
        for path, a in zip(aux, aux_sets, strict=True)
    ]  # fmt: skip
    # Every training row once: the folds' sets are masks over it, and the final fit reads all of it (TrainingPool);
    # `rs` becomes a view of its first rows, and the auxiliary sets, copied into it, go.
    pool = TrainingPool.build(rs, aux_sets)
    aux_sets = a = None  # (`a`: the log's loop above)
    heldout = []
    folds = list(group_kfold(rs, heldout_folds, log=log)) if heldout_folds else []
    if heldout_folds and not folds:  # every problem in one hash fold (one problem, or a few): nothing to hold out
        raise ValueError(f"{data} holds {len(rs.problems)} problem(s), all in one of the {heldout_folds} hash folds: "
                         "held-out figures need problems in two folds at least (a fold trains on the others); train "
                         "with --heldout-folds 0, or collect more problems")  # fmt: skip
    if heldout_folds:
        per_problem, _ = run_split(
            "group_kfold", iter(folds), rs, rs, [model], log=log, params={model: params}, pool=pool
        )  # fmt: skip
        summary = summarize_splits(per_problem)
        summary = summary[summary["n_problems"] > 0]  # a subset with no problem (design_unseen): no figures, no NaN
        heldout = summary.drop(columns=["split"]).round(4).to_dict("records")
        if heldout_problems:
            Path(heldout_problems).parent.mkdir(parents=True, exist_ok=True)
            per_problem.to_csv(heldout_problems, index=False)
            log(f"wrote the held-out figures of {len(per_problem)} problems to {heldout_problems}")
    fixed = FixedList(10).fit(rs).list_  # the device's own fallback list
    train_set = pool.set
    t1 = time.perf_counter()
    ranker = make_model(model, **params).fit(train_set)
    fit_s = time.perf_counter() - t1
    log(f"fitted {model} on all {len(train_set.problems)} problems in {fit_s:.1f} s")
    if getattr(ranker, "fit_seconds_", None):  # where the fit's time went (XGBRankerModel)
        log("  " + ", ".join(f"{k} {v:.1f} s" for k, v in ranker.fit_seconds_.items()))
    meta = build_meta(
        ranker, train_set, str(data), fit_s, heldout, fixed, family=family, kernel_hash=meta.kernel_hash,
        space_hash=meta.space_hash,
    )  # fmt: skip
    meta["auxiliary"] = [
        {**b, "share": getattr(ranker, "aux_share", None),
         "problems_file": None if aux_problems is None else str(aux_problems)}
        for b in borrowed
    ]  # fmt: skip
    meta["own_problems"] = int(len(rs.problems))
    return TrainedModel(ranker, meta)
