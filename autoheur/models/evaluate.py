"""Honest evaluation: every figure of a within-device split is measured on problems the model never saw while fitting
(or choosing itself); a cross-device split's fit saw the test device's problem ids that its own device holds, on its
own device's timings, and only its subset unseen is held out in that sense.

Splits:
  group_kfold   5 folds over whole problems, a problem's fold a hash of its id (fixed as a dataset grows)
  lomo          leave one model family out: each public model's problems are the test set in turn (the sampled and
                other families train)
  A->B          cross-device: fit on dataset A, test on every problem of dataset B (features use B's fingerprint)

Every model on a split sees the same train/test problems. Per problem: top-1 efficiency, best-of-k for k = 1, 5, 10,
oracle in the top 10, NDCG@10, Kendall tau (`metrics.py`); summaries are geomean / P10 / min over problems, for all
problems and for the subsets in SUBSETS.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from autoheur.models.data import (
    RankingSet,
    TrainingPool,
    check_thinned,
    fit_rows,
    listed_problems_only,
    new_problems_only,
)
from autoheur.models.design_seen import read_seen
from autoheur.models.metrics import evaluate, summarize
from autoheur.models.rankers import RANKERS, check_aux_share_value, check_rounds, parse_pairs, parse_rounds

# Kernels under ~0.1 ms are where timing noise between near-equal configs matters most (and where timing protocol v1
# datasets timed launch overhead, data/README.md): report them apart.
# A cross-device split fits on every problem of device A, and a problem of B with the same shape (the same id: ids
# hash the problem, not the device) was then a training problem, on A's timings: "unseen" is B's problems A lacks, the
# figure for a shape no GPU's data held. Within-device splits hold out every test problem: they have no such subset.
SEEN = "fit_saw_problem"  # per-problem column of the cross-device splits: the fit trained on this problem's id


def _unseen(pp: pd.DataFrame) -> pd.Series:
    if SEEN not in pp or pp[SEEN].isna().any():
        return pd.Series(False, index=pp.index)
    return ~pp[SEEN].astype(bool)


def _design_unseen(pp: pd.DataFrame) -> pd.Series:
    """The problems no design choice has seen (models/design-seen.txt; design_seen.py): none known without the list."""
    seen = read_seen()
    if seen is None:
        return pd.Series(False, index=pp.index)
    return ~pp["problem_id"].isin(seen)


SUBSETS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "all": lambda pp: pd.Series(True, index=pp.index),
    "oracle>=0.1ms": lambda pp: pp["oracle_ms"] >= 0.1,
    "unseen": _unseen,
    "design_unseen": _design_unseen,
}
# Where a subset of SUBSETS means something (else it is no row of the summary): unseen on the cross-device splits
# (within a device every test problem is held out), design_unseen where models/design-seen.txt exists. Where it does,
# the subset has a row even with no problem in it (n_problems 0): a cross-device pair whose A holds every problem of
# B has no unseen problem, and that is a figure to see, not a row to leave out.
SUBSET_APPLIES: dict[str, Callable[[pd.DataFrame], bool]] = {
    "unseen": lambda pp: SEEN in pp and not pp[SEEN].isna().any(),
    "design_unseen": lambda pp: read_seen() is not None,
}


def make_model(name: str, **params):
    if name not in RANKERS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(RANKERS)}")
    return RANKERS[name](**params)


def problem_folds(problem_ids: Sequence[str], n_splits: int = 5, seed: int = 0) -> np.ndarray:
    """Each problem's fold: a hash of (`seed`, its id) mod `n_splits`. A problem keeps its fold as its dataset grows,
    so a set held back from design choices (a fold's test problems) stays held back. sklearn's shuffled GroupKFold,
    used until stop 78, re-drew every fold when a problem was added: after 519 new problems 38% of the H200's
    problems kept their fold (BENCHMARKS.md, "Learned ranking", stop 78). Fold sizes are even only in expectation
    (binomial: +-2% at 9,000 problems)."""
    if n_splits < 2:
        raise ValueError(f"n_splits={n_splits}: a k-fold split needs at least 2 folds")
    digest = (hashlib.blake2b(f"{seed}:{p}".encode(), digest_size=8).digest() for p in problem_ids)
    return np.fromiter((int.from_bytes(d, "little") % n_splits for d in digest), dtype=np.int64, count=len(problem_ids))


def group_kfold(rs: RankingSet, n_splits: int = 5, seed: int = 0, log=None):
    """(fold, training problem ids, test problem ids) over whole problems, the folds of `problem_folds`; an empty fold
    (a handful of problems), or one that leaves nothing to train on (every problem in it), is skipped, and said so
    to `log` where one is given."""
    pids = rs.problems
    fold_of = problem_folds(pids, n_splits, seed)
    for fold in range(n_splits):
        test = fold_of == fold
        if test.any() and not test.all():
            yield fold, pids[~test], pids[test]
        elif log is not None:
            why = "holds none of" if not test.any() else "holds all of"
            log(f"group_kfold: fold {fold} of {n_splits} {why} the {len(pids)} problems (folds by a hash of the "
                "problem id): skipped")  # fmt: skip


UNFAMILIED = ("sampled", "unnamed")  # problems of no public model family: never held out as a family


def leave_one_family_out(rs: RankingSet, exclude: Sequence[str] = UNFAMILIED):
    fam = rs.frame.drop_duplicates("problem_id").set_index("problem_id")["family"]
    for f in sorted(set(fam) - set(exclude)):
        yield f, fam.index[fam != f].to_numpy(), fam.index[fam == f].to_numpy()


def _fitted(model, train: RankingSet, rows: np.ndarray | None, label: str, name: str, log) -> dict:
    """`model` fitted on the rows `rows` of `train` (a mask; None: all): the fit's record. `label` names the fit in the
    log line."""
    t0 = time.perf_counter()
    fit_rows(model, train, rows)
    fit_s = time.perf_counter() - t0
    ids = train.frame["problem_id"] if rows is None else train.frame["problem_id"][rows]
    log(f"  {label}: {name} fit in {fit_s:.1f} s on {ids.nunique()} problems")
    return {"fit_s": fit_s, "objective": getattr(model, "objective_", None), "hedge": getattr(model, "hedge_", None)}


def _scored(model, test: RankingSet, split: str, fold, name: str) -> pd.DataFrame:
    """A fitted `model`'s per-problem rows on `test`."""
    frame = test.frame.assign(score=model.predict(test))
    pp = evaluate(frame).reset_index()  # indexed by problem_id
    info = test.frame.drop_duplicates("problem_id").set_index("problem_id")[["problem_name", "family"]]
    pp = pp.join(info, on="problem_id")
    pp.insert(0, "model", name)
    pp.insert(0, "fold", str(fold))
    pp.insert(0, "split", split)
    pp["device"] = test.device.get("name")
    return pp


def _score(
    model, train: RankingSet, rows: np.ndarray | None, test: RankingSet, split: str, fold, name: str, log
) -> tuple[pd.DataFrame, dict]:
    """`model` fitted on the rows `rows` of `train` (a mask; None: all) and scored on `test`: (per-problem rows, the
    fit's record)."""
    extra = _fitted(model, train, rows, f"{split} fold {fold}", name, log)
    return _scored(model, test, split, fold, name), extra


def run_split(
    split: str,
    folds,
    rs_train: RankingSet,
    rs_test: RankingSet,
    models: Sequence[str],
    log=print,
    params: dict[str, dict] | None = None,
    aux: Sequence[RankingSet] = (),
    aux_leave_out_families: bool = False,
    pool: TrainingPool | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Fit and score every model on every fold: (per-problem rows, fit records). `params`: name -> overrides.

    `aux`: other devices' datasets that every fold also trains on (RankingSet.with_auxiliary), less their rows of
    the fold's test problems and, with `aux_leave_out_families` (leave-one-family-out), of the test problems' model
    families; scores are only ever taken on `rs_test`. The folds' training sets are row masks over one
    `TrainingPool` of `rs_train` and `aux`, which with auxiliary data turns `rs_train` into a view of it; `pool`:
    that pool, built already (then `aux` is its business: not given again)."""
    if pool is None:
        pool = TrainingPool.build(rs_train, aux)
    elif aux:
        raise ValueError("run_split: give the auxiliary sets or a pool built with them, not both")
    elif pool.n_own != len(rs_train.frame):
        raise ValueError(f"pool: a pool of {pool.n_own} own rows for a training set of {len(rs_train.frame)}")
    rows, fits = [], []
    for fold, train_ids, test_ids in folds:
        test = rs_test.subset(test_ids) if test_ids is not None else rs_test
        families = set(test.frame["family"]) - set(UNFAMILIED) if pool.aux and aux_leave_out_families else ()
        keep = pool.rows(train_ids, leave_out=test.problems if pool.aux else (), leave_out_families=families)
        for name in models:
            model = make_model(name, **(params or {}).get(name, {}))
            for device, thin in pool.aux:
                check_thinned(model, thin, f"the auxiliary data of {device!r}")
            pp, extra = _score(model, pool.set, keep, test, split, fold, name, log)
            rows.append(pp)
            fits.append({"split": split, "fold": str(fold), "model": name, **extra})
            model = None  # a model may hold its training rows (nearest): let it go before the next one fits
        test = None  # let this fold's test set go before the next one's is taken
    if not rows:  # e.g. a handful of problems, all in one hash fold: said, not pandas' "No objects to concatenate"
        raise ValueError(
            f"{split}: no fold has both problems to train on and problems to hold out (the training set "
            f"has {len(rs_train.problems)} problem(s)): collect more problems, or leave out this split"
        )
    return pd.concat(rows, ignore_index=True), fits


def summarize_splits(per_problem: pd.DataFrame) -> pd.DataFrame:
    """One row per (split, subset, model): geomean / P10 / min of each efficiency, means of the rest. A subset that
    applies to the split (SUBSET_APPLIES) has its row even when no problem is in it: n_problems 0, its figures NaN."""
    out = []
    for (split, model), pp in per_problem.groupby(["split", "model"], sort=False):
        for subset, pick in SUBSETS.items():
            if not SUBSET_APPLIES.get(subset, lambda _: True)(pp):
                continue
            sel = pp[pick(pp)]
            s = summarize(sel)
            out.append({"split": split, "subset": subset, "model": model, **s})
    return pd.DataFrame(out)


def cross_validate(
    datasets: dict[str, RankingSet],
    models: Sequence[str],
    splits: Sequence[str] = ("group_kfold", "lomo", "cross_device"),
    log=print,
    params: dict[str, dict] | None = None,
    aux_for: Sequence[str] = (),
    fold_seed: int = 0,
    aux_new_only: bool = False,
    aux_problems: set[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """(per-problem rows, summary, fit records) for `models` on `splits` over `datasets` (name -> RankingSet);
    `params`: model name -> hyperparameter overrides. `aux_for`: the datasets whose within-device splits also train
    on the other datasets as auxiliary data (as `autoheur train --aux` does); the cross-device splits never do, since
    the auxiliary data would hold the test device's own timings. `fold_seed`: the fold draw (`problem_folds`; 0 is
    the one `autoheur train` reports), to see how much a figure such as the min moves with the problems a fold holds
    out.
    `aux_new_only`: the auxiliary data keeps only the problems the dataset lacks (`autoheur train --aux-new-only`).
    `aux_problems`: the auxiliary data keeps only these problem ids, each of which it must hold (`autoheur train
    --aux-problems`)."""
    check_aux_new_only(aux_new_only, aux_for)
    check_aux_problems(aux_problems, aux_for)
    check_aux_for(aux_for, datasets)
    check_splits(splits, datasets)

    def wants(split: str, dname: str) -> bool:
        return split in splits or f"{dname}:{split}" in splits

    rows, fits = [], []
    for dname, rs in datasets.items():
        aux = [other for name, other in datasets.items() if name != dname] if dname in aux_for else []
        if aux and aux_problems is not None:
            aux = listed_problems_only(aux, aux_problems, "--aux-problems")
        if aux_new_only:
            aux = new_problems_only(aux, rs)
        # one pool for both within-device splits: the second one's would be built beside the first's
        pool = TrainingPool.build(rs, aux) if wants("group_kfold", dname) or wants("lomo", dname) else None
        if wants("group_kfold", dname):
            folds = group_kfold(rs, seed=fold_seed, log=log)
            r, f = run_split(f"{dname}:group_kfold", folds, rs, rs, models, log, params, pool=pool)
            rows.append(r)
            fits += f
        if wants("lomo", dname):
            r, f = run_split(
                f"{dname}:lomo", leave_one_family_out(rs), rs, rs, models, log, params, aux_leave_out_families=True,
                pool=pool,
            )  # fmt: skip
            rows.append(r)
            fits += f
        pool = None
    for a, b in cross_device_pairs(list(datasets), splits):
        # B's problems with B's fingerprint, ranked by a model fit on all of A (SEEN: which of them A holds)
        r, f = run_split(f"{a}->{b}", [("all", None, None)], datasets[a], datasets[b], models, log, params)
        r[SEEN] = r["problem_id"].isin(set(datasets[a].problems))
        rows.append(r)
        fits += f
    per_problem = pd.concat(rows, ignore_index=True)
    return per_problem, summarize_splits(per_problem), fits


def cross_device_pairs(names: Sequence[str], splits: Sequence[str]) -> list[tuple[str, str]]:
    """The (A, B) pairs of the cross-device splits `splits` asks for over the datasets `names`, in their order."""
    return [(a, b) for a in names for b in names if a != b and ("cross_device" in splits or f"{a}->{b}" in splits)]


def only_cross_device(splits: Sequence[str]) -> bool:
    """Whether every split of `splits` is a cross-device one (cross_device, or a pair's `A->B`)."""
    return all(s == "cross_device" or "->" in s for s in splits)


def cross_device_one_at_a_time(
    load: Callable[[str], RankingSet],
    names: Sequence[str],
    splits: Sequence[str],
    models: Sequence[str],
    log=print,
    params: dict[str, dict] | None = None,
    on_load: Callable[[str, RankingSet], None] | None = None,
    on_fit: Callable[[str, str, object], None] | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """The cross-device splits of `splits` over the datasets `names`, with one dataset in memory at a time: the
    (per-problem rows, fit records) `cross_validate` gives for them, in the same order, from the same fits.

    `cross_validate` takes every dataset loaded: the H200's 9,521 problems and the H100's 8,795, every row of both,
    passed the 2-core host's 24 GB (stop 87). Here `load(name)` gives a dataset's RankingSet, which is let go before
    the next one loads: a first pass over `names` fits every model on each training side A as it loads (one fit
    serves every A->B) and scores the fits made already on each B as it loads; a second pass loads again the Bs that
    come before their A in `names`. Two datasets both ways: three loads. The fitted models are kept (the baselines
    hold their training problems' efficiency matrix, the ranker its trees). `on_load(name, set)` sees each dataset
    the first time it loads; `on_fit(A, model name, model)` each fit."""
    pairs = cross_device_pairs(names, splits)
    trains = {a for a, _ in pairs}
    fitted: dict[str, list[tuple[str, object, dict]]] = {}
    held: dict[str, set] = {}  # A's problem ids (SEEN)
    scored: dict[tuple[str, str], list[pd.DataFrame]] = {}
    loaded: set[str] = set()
    for _ in range(2):
        for d in names:
            todo = [(a, b) for a, b in pairs if b == d and a in fitted and (a, b) not in scored]
            fit_here = d in trains and d not in fitted
            if not todo and not fit_here:
                continue
            rs = load(d)
            if d not in loaded and on_load is not None:
                on_load(d, rs)
            loaded.add(d)
            for a, b in todo:
                scored[(a, b)] = [_scored(m, rs, f"{a}->{b}", "all", name) for name, m, _ in fitted[a]]
                for pp in scored[(a, b)]:
                    pp[SEEN] = pp["problem_id"].isin(held[a])
            if fit_here:
                held[d] = set(rs.problems)
                fitted[d] = []
                for name in models:
                    model = make_model(name, **(params or {}).get(name, {}))
                    extra = _fitted(model, rs, None, f"{d} (every problem; its cross-device splits)", name, log)
                    fitted[d].append((name, model, extra))
                    if on_fit is not None:
                        on_fit(d, name, model)
            rs = None  # let it go before the next one loads
    rows = [pp for pair in pairs for pp in scored[pair]]
    fits = [
        {"split": f"{a}->{b}", "fold": "all", "model": name, **extra} for a, b in pairs for name, _, extra in fitted[a]
    ]
    return pd.concat(rows, ignore_index=True), fits


def check_aux_for(aux_for: Sequence[str], names) -> None:
    """Every dataset `aux_for` names is one of `names` (the datasets' short names; checked before any data loads)."""
    unknown = sorted(set(aux_for) - set(names))
    if unknown:
        raise ValueError(f"--aux-for names {unknown}, which are not among the datasets {sorted(names)}")


def check_aux_new_only(aux_new_only: bool, aux_for: Sequence[str]) -> None:
    """`aux_new_only` needs a dataset that trains on auxiliary data (checked before any data loads)."""
    if aux_new_only and not aux_for:
        raise ValueError("aux_new_only: no dataset trains on auxiliary data (--aux-for NAME)")


def check_aux_problems(aux_problems, aux_for: Sequence[str]) -> None:
    """A list of auxiliary problems (`--aux-problems`; None: none) needs a dataset that trains on auxiliary data
    (checked before any data loads)."""
    if aux_problems is not None and not aux_for:
        raise ValueError("aux_problems: no dataset trains on auxiliary data (--aux-for NAME)")


def check_aux_share(aux_share: float | None, has_aux: bool, flag: str) -> None:
    """`aux_share`, an auxiliary problem's share of the rows a fit samples per problem (XGBRankerModel.aux_share; None:
    the model's own), is a share in (0, 1] and needs auxiliary data, which `flag` gives (checked before any data
    loads)."""
    if aux_share is None:
        return
    check_aux_share_value(aux_share)
    if not has_aux:
        raise ValueError(f"aux_share: no auxiliary data to sample ({flag})")


def is_boosted(name: str) -> bool:
    """Whether model `name` takes a boosting budget (n_estimators and learning_rate): xgb_ranker, xgb_regressor."""
    return {"n_estimators", "learning_rate"} <= set(make_model(name).get_params())


def boosting_rounds(models: str | Sequence[str], rounds: tuple[int, float] | str | None) -> dict:
    """`rounds` (trees, step; or "TREESxSTEP") as the n_estimators / learning_rate overrides of a boosted model,
    checked before any data loads: {} for None; refused when no model of `models` is boosted."""
    if rounds is None:
        return {}
    trees, step = parse_rounds(rounds) if isinstance(rounds, str) else rounds
    check_rounds(trees, step)
    names = [models] if isinstance(models, str) else list(models)
    if not any(is_boosted(n) for n in names):
        raise ValueError(f"rounds: no boosted model to give them among {names} (xgb_ranker and xgb_regressor are)")
    return {"n_estimators": int(trees), "learning_rate": float(step)}


def pair_params(models: str | Sequence[str], pairs: str | None) -> dict:
    """`pairs` ("METHOD:COUNT", rankers.parse_pairs) as xgb_ranker's pair_method / pairs overrides, checked before
    any data loads: {} for None; refused when `models` does not name xgb_ranker (the one model fitted on pairs)."""
    if pairs is None:
        return {}
    method, count = parse_pairs(pairs)
    names = [models] if isinstance(models, str) else list(models)
    if "xgb_ranker" not in names:
        raise ValueError(f"pairs: no model fitted on pairs among {names} (xgb_ranker is)")
    return {"pair_method": method, "pairs": count}


def auxiliary_only(names: Sequence[str], splits: Sequence[str], aux_for: Sequence[str]) -> list[str]:
    """The datasets of `names` that `splits` use only as auxiliary training data: no split of their own, no
    cross-device split naming them, and another dataset of `aux_for` with a split of its own that trains on them.
    `autoheur eval` loads these thinned, as `autoheur train --aux` loads its auxiliary data (data.AUX_ROWS)."""
    if any(s in splits for s in ("group_kfold", "lomo", "cross_device")):
        return []  # every dataset has a split of its own
    used = {name for s in splits for name in (s.split("->") if "->" in s else [s.split(":")[0]])}
    return [n for n in names if n not in used and any(a != n and a in used for a in aux_for)]


def check_splits(splits: Sequence[str], datasets) -> None:
    """Split names: group_kfold, lomo and cross_device for every dataset (pair), or one dataset's within-device split
    (`h200:lomo`) or one pair's cross-device split (`h100->h200`), to rerun part of an evaluation."""
    names = list(datasets)
    known = {"group_kfold", "lomo", "cross_device"}
    known |= {f"{d}:{s}" for d in names for s in ("group_kfold", "lomo")}
    known |= {f"{a}->{b}" for a in names for b in names if a != b}
    if set(splits) == {"cross_device"} and len(names) < 2:  # nothing to run (the default list has more); or named twice
        raise ValueError("the cross_device split needs two datasets (--data twice), one device each")
    bad = [s for s in splits if s not in known]
    if bad or not splits:
        hint = ""
        if any(s.endswith("-") for s in bad):  # `--splits h100->h200` unquoted: the shell took `>h200` as a redirect
            hint = "; quote a cross-device split in a shell ('h100->h200'), or its '>' redirects the output to a file"
        raise ValueError(f"unknown splits {bad or list(splits)}: expected some of {sorted(known)}{hint}")


FLUSH_LAUNCH_MS = 0.1  # tuning_cost: the L2 flush and launch a timed run adds to the kernel's time
TOPK_RUNS = 6  # tuning_cost: the runs each of the top k takes in a brief autotune (1 check + 5 reps)


def tuning_cost(
    rs: RankingSet, k: int = 10, compile_core_s: float = 0.68, cores: int = 16, family: str = "triton"
) -> pd.DataFrame:
    """Configs compiled and timed, and estimated seconds, for a top-k autotune vs the whole space, per problem (mean);
    the estimate's basis, in words, in the frame's attrs["basis"].

    Timing: each config of the whole space runs (1 check + reps) times at its measured time, each of the top k
    TOPK_RUNS times at the problem's best time, plus FLUSH_LAUNCH_MS per run; compiling: `compile_core_s` CPU-seconds
    per config (93 s for 2,182 configs on 16 cores, BENCHMARKS.md) spread over `cores`. `family` "inductor": the
    seconds are NaN, since its configs are Inductor's grid choices, compiled and benchmarked by Inductor's own
    autotuner, which this model of autoheur's kernel does not describe; the configs still count.
    """
    f = rs.frame
    t = f["median_ms"].fillna(0).to_numpy()
    runs = 1 + f["reps"].to_numpy()
    whole = pd.Series((t + FLUSH_LAUNCH_MS) * runs / 1e3).groupby(f["problem_id"].to_numpy()).sum()
    n = f.groupby("problem_id", observed=True).size()
    best = f.groupby("problem_id", observed=True)["median_ms"].min()
    listed = np.minimum(n, k)  # a problem of k configs or fewer autotunes them all: its whole space
    topk_time = listed * (best + FLUSH_LAUNCH_MS) * TOPK_RUNS / 1e3  # the top k run near the best
    whole_s = whole + n * compile_core_s / cores
    topk_s = (topk_time + np.ceil(listed / cores) * compile_core_s).where(n > k, whole_s)
    rows = [
        {"method": f"top-{k}", "configs": float(listed.mean()), "est_seconds": float(topk_s.mean())},
        {"method": "whole space", "configs": float(n.mean()), "est_seconds": float(whole_s.mean())},
    ]
    out = pd.DataFrame(rows)
    out["note"] = ["brief autotune of the predicted list", "exhaustive autotune (collection protocol)"]
    configs = (
        f"Configs: per problem, the mean over the dataset's {len(n)} problems (a problem of {k} rows or fewer "
        "autotunes them all, at the whole space's cost)"
    )
    if family == "inductor":
        out["est_seconds"] = np.nan
        out.attrs["basis"] = (
            f"{configs}. The seconds estimate of autoheur's Triton kernel does not apply here: these configs are the "
            "choices of Inductor's template grid that Inductor offered, compiled and benchmarked by Inductor's own "
            "autotuner, so only the counts compare."
        )
    else:
        out.attrs["basis"] = (
            f"An estimate, not a measurement. {configs}. Compiling: {compile_core_s} CPU-seconds a config (93 s for "
            f"2,182 configs on 16 cores, BENCHMARKS.md) spread over {cores} cores, the top {k} in "
            f"{int(np.ceil(k / cores))} wave(s). Timing: each config of the whole space runs 1 + reps times (the "
            f"collection's check and timed runs) at its measured time, each of the top {k} {TOPK_RUNS} times at the "
            f"problem's best time, every run plus {FLUSH_LAUNCH_MS} ms of L2 flush and launch."
        )
    return out
