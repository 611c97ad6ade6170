"""`autoheur eval`: the options checked, the datasets loaded (auxiliary-only ones thinned, as `autoheur train --aux`
loads them), every model cross-validated on the splits (evaluate.py), and the report written (report.py). The CLI
parses and prints; this is the job."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from autoheur.collect.store import DatasetStore, read_problem_ids
from autoheur.models.data import AUX_ROWS, RankingSet, check_thinned, checked_store, load_ranking_set
from autoheur.models.evaluate import (
    auxiliary_only,
    boosting_rounds,
    check_aux_for,
    check_aux_new_only,
    check_aux_problems,
    check_aux_share,
    check_splits,
    cross_device_one_at_a_time,
    cross_device_pairs,
    cross_validate,
    is_boosted,
    make_model,
    only_cross_device,
    pair_params,
    summarize_splits,
    tuning_cost,
)
from autoheur.models.metrics import RELEVANCE_THRESHOLDS
from autoheur.models.rankers import RANKERS, family_params
from autoheur.models.report import write_report


def short_name(path: str | Path) -> str:
    """A dataset's name in `autoheur eval`'s split names and `--aux-for`: its directory's device, as
    'data/nvidia-h100-80gb-hbm3' -> 'h100', with a leading word that is not a device kept, as
    'data/inductor-nvidia-h200' -> 'inductor-h200' (before stop 75 both Inductor datasets were 'inductor')."""
    words = Path(path).name.replace("nvidia-", "").split("-")
    if len(words) > 1 and not any(ch.isdigit() for ch in words[0]):
        return f"{words[0]}-{words[1]}"
    return words[0]


@dataclass(frozen=True)
class LetGo:
    """What the report reads of a dataset that a run let go after use (`cross_device_one_at_a_time`): its device
    fingerprint and its count of problems without an oracle, as a RankingSet has them."""

    device: dict
    no_oracle: int


@dataclass(frozen=True)
class ReportBasis:
    """The report's tuning cost and feature importances, taken while their dataset was loaded: the tuning cost of
    dataset `name`'s problems, and `importances` of xgb_ranker's fit on every problem of it (None: no such model)."""

    name: str
    cost: pd.DataFrame
    importances: np.ndarray | None


@dataclass
class EvalRun:
    """What `eval_datasets` measured, and how (for the report)."""

    per_problem: pd.DataFrame
    summary: pd.DataFrame
    fits: list
    sets: dict[str, RankingSet | LetGo]  # short name -> ranking set (LetGo: let go after use)
    params: dict[str, dict]  # model name -> hyperparameter overrides
    thin: list[str] = field(default_factory=list)  # the datasets only trained on as auxiliary data, loaded thinned
    rows: int | None = None  # rows a problem they loaded with
    started: float = 0.0
    family: str = "triton"  # the datasets' kernel family ("triton": autoheur's kernel; "inductor": Inductor's template)
    basis: ReportBasis | None = None  # taken as the data loaded (one at a time); None: from `sets` as the report writes


def model_names(models: str) -> list[str]:
    """`--models`: "all" or comma-separated ranker names."""
    return list(RANKERS) if models == "all" else [m.strip() for m in models.split(",") if m.strip()]


def eval_datasets(
    data: Sequence[str | Path],
    models: Sequence[str],
    splits: Sequence[str],
    *,
    aux_for: Sequence[str] = (),
    aux_new_only: bool = False,
    aux_problems: str | Path | None = None,
    aux_share: float | None = None,
    aux_rows: int | None = None,
    rounds: str | None = None,
    pairs: str | None = None,
    fold_seed: int = 0,
    allow_stale_kernel: bool = False,
) -> EvalRun:
    """Check every option before the data loads (a bad one costs no minutes of loading), load the datasets and
    cross-validate `models` on `splits`. `aux_rows`: None for AUX_ROWS, 0 for every row of auxiliary-only data."""
    t0 = time.time()
    models = list(models)
    if not models:  # `--models ''` or `--models ,`: else a misleading "no fold has both problems ..." after loading
        raise ValueError("--models names no model: give ranker names, comma-separated, or all")
    twice = sorted({m for m in models if models.count(m) > 1})
    if twice:  # each would be fitted and scored twice, and the summary count every problem of it twice
        raise ValueError(f"--models names {', '.join(twice)} more than once")
    if not 0 <= fold_seed < 2**32:  # numpy's seed range; checked before minutes of loading
        raise ValueError(f"--fold-seed {fold_seed}: expected 0 to 2**32 - 1")
    check_aux_new_only(aux_new_only, aux_for)
    check_aux_problems(aux_problems, aux_for)
    listed = read_problem_ids(aux_problems) if aux_problems else None  # a bad file before loading
    check_aux_share(aux_share, bool(aux_for), "--aux-for NAME")
    if aux_share is not None and "xgb_ranker" not in models:
        raise ValueError("--aux-share: only xgb_ranker samples auxiliary rows, and --models does not name it")
    families = {DatasetStore.load(d).meta.family for d in data}
    if len(families) > 1:
        raise ValueError(f"the datasets are of different kernel families {sorted(families)}: evaluate them apart")
    family = families.pop()
    params = family_params(family)
    if aux_share is not None:
        params["xgb_ranker"] = {**params.get("xgb_ranker", {}), "aux_share": aux_share}
    boosted = boosting_rounds(models, rounds)  # refused when no named model is boosted
    for name in models if boosted else ():
        if is_boosted(name):
            params[name] = {**params.get(name, {}), **boosted}
    paired = pair_params(models, pairs)  # refused when xgb_ranker is not named
    if paired:
        params["xgb_ranker"] = {**params.get("xgb_ranker", {}), **paired}
    paths: dict[str, str | Path] = {}
    for d in data:
        name = short_name(d)
        if name in paths:
            raise ValueError(
                f"{paths[name]} and {d} both go by the short name {name!r} (split names, --aux-for): give them "
                "directories whose names tell their devices apart"
            )
        paths[name] = d
    check_splits(splits, paths)  # a mistyped split or --aux-for name, before minutes of loading (cross_validate's)
    check_aux_for(aux_for, paths)
    # a dataset only trained on as auxiliary data loads thinned, as `autoheur train --aux` loads it
    thin = auxiliary_only(list(paths), splits, aux_for)
    rows = (AUX_ROWS if aux_rows is None else aux_rows or None) if thin else None
    for name in models:  # before the data loads (a model fits on more rows a problem than too few to load)
        check_thinned(make_model(name, **params.get(name, {})), rows, f"the auxiliary data ({', '.join(thin)})")
    for d in paths.values():  # each dataset's space, kernel and problems, before minutes of loading the first one
        with warnings.catch_warnings():  # a config-subset trial is warned of as it loads: not twice
            warnings.simplefilter("ignore")
            checked_store(d, allow_stale_kernel)
    if only_cross_device(splits) and not aux_for:  # one dataset in memory at a time (the same figures)
        return _cross_device_run(paths, models, splits, params, allow_stale_kernel, t0, family)
    sets = {name: load_ranking_set(d, allow_stale_kernel, thin=rows if name in thin else None)
            for name, d in paths.items()}  # fmt: skip
    per_problem, summary, fits = cross_validate(
        sets, models, splits, params=params, aux_for=aux_for, fold_seed=fold_seed, aux_new_only=aux_new_only,
        aux_problems=listed,
    )  # fmt: skip
    return EvalRun(per_problem, summary, fits, sets, params, thin, rows, t0, family)


def _cross_device_run(
    paths: dict[str, str | Path],
    models: list[str],
    splits,
    params: dict,
    allow_stale_kernel: bool,
    t0: float,
    family: str,
) -> EvalRun:
    """`eval_datasets` where every split is cross-device: `cross_device_one_at_a_time`, so a run over two full
    datasets needs the memory of one (and the models), not of both. The report's tuning cost and importances are
    taken as the data load: of the first training side in `paths`' order, its importances from the split's own fit
    on every problem of it (what the report would fit again)."""
    facts: dict[str, LetGo] = {}
    basis: dict = {}
    first = cross_device_pairs(list(paths), splits)[0][0]

    def on_load(name: str, rs: RankingSet) -> None:
        facts[name] = LetGo(dict(rs.device), rs.no_oracle)
        if name == first:
            basis["cost"] = tuning_cost(rs, family=family)

    def on_fit(name: str, model_name: str, model) -> None:
        if name == first and model_name == "xgb_ranker":
            basis["importances"] = model.feature_importances_

    per_problem, fits = cross_device_one_at_a_time(
        lambda name: load_ranking_set(paths[name], allow_stale_kernel), list(paths), splits, models,
        params=params, on_load=on_load, on_fit=on_fit,
    )  # fmt: skip
    sets = {name: facts[name] for name in paths if name in facts}  # --data order; a dataset no split used: none
    run_basis = ReportBasis(first, basis["cost"], basis.get("importances"))
    return EvalRun(per_problem, summarize_splits(per_problem), fits, sets, params, started=t0, family=family,
                   basis=run_basis)  # fmt: skip


def write_eval_report(
    run: EvalRun,
    out: str | Path,
    models: Sequence[str],
    *,
    data: Sequence[str | Path],
    command: str,
    aux_for: Sequence[str] = (),
    aux_new_only: bool = False,
    aux_problems: str | Path | None = None,
    fold_seed: int = 0,
) -> Path:
    """The run's tables (per_problem.csv.gz, summary.csv, fits.csv) under `out`, and its markdown report with plots
    and the default ranker's feature importances (fitted on the first dataset of `data` that is not only auxiliary
    training data, whose problems the tuning cost counts too; where every split was cross-device, `run.basis`: the
    first training side's, its importances from that split's own fit; without matplotlib, report.py writes the
    report as tables and says so)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run.per_problem.to_csv(out / "per_problem.csv.gz", index=False)  # compression from the suffix
    run.summary.to_csv(out / "summary.csv", index=False)
    pd.DataFrame(run.fits).to_csv(out / "fits.csv", index=False)
    if run.basis is not None:  # taken as the data loaded, one dataset at a time
        name, cost = run.basis.name, run.basis.cost
        imp = None if run.basis.importances is None else {"xgb_ranker": run.basis.importances}
        fitted = f"as its cross-device splits fitted it on every problem of {name} (the same fit, not another)"
    else:
        name, first = next((name, rs) for name, rs in run.sets.items() if name not in run.thin)
        cost = tuning_cost(first, family=run.family)
        imp = None
        if "xgb_ranker" in models:
            from autoheur.models.rankers import XGBRankerModel

            imp = {"xgb_ranker": XGBRankerModel(**run.params.get("xgb_ranker", {})).fit(first).feature_importances_}
        fitted = f"fitted once on every problem of {name} (a fit of its own, not one of the splits' held-out fits)"
    meta = {
        "datasets": ", ".join(str(d) for d in data),
        "devices": ", ".join(rs.device["name"] for rs in run.sets.values()),
        "command": command,
        "wall seconds": round(time.time() - run.started),
        "method": eval_method(run)
        + (EVAL_AUX.format(", ".join(aux_for)) if aux_for else "")
        + (EVAL_AUX_NEW if aux_new_only else "")
        + (EVAL_AUX_LISTED.format(aux_problems) if aux_problems else "")
        + (EVAL_THIN.format(", ".join(run.thin), run.rows) if run.rows else "")
        + (EVAL_FOLD_SEED.format(fold_seed) if fold_seed else ""),
    }
    cost.attrs["basis"] = f"Dataset: {name}. {cost.attrs['basis']}"  # with two --data, which one's problems
    note = f"xgb_ranker {fitted}; gain: each feature's share of the total gain of the trees' splits on it."
    return write_report(run.per_problem, run.summary, out, title="autoheur evaluation", meta=meta, importances=imp,
                        tuning_cost=cost, importance_note=note)  # fmt: skip


def eval_method(run: EvalRun) -> str:
    """The report's "How measured" paragraph for `run`: what is held out (said apart for the cross-device splits,
    whose fits saw the same problem ids on the other device), the default ranker and its design as the datasets'
    kernel family has them, the oracle, the problems left out, and the columns."""
    inductor = run.family == "inductor"
    splits = [str(s) for s in dict.fromkeys(run.per_problem["split"])] if len(run.per_problem) else []
    cross = [s for s in splits if _split_kind(s) == "cross"]
    text = EVAL_HELD_OUT_CROSS.format(", ".join(cross)) if cross else EVAL_HELD_OUT
    text += EVAL_DESIGN_INDUCTOR if inductor else EVAL_DESIGN_TRITON
    kinds = [kind for kind in EVAL_SPLITS if any(_split_kind(s) == kind for s in splits)]
    text += "; ".join(EVAL_SPLITS[kind] for kind in kinds or EVAL_SPLITS) + ". Efficiency = oracle time / chosen time, "
    text += EVAL_ORACLE_INDUCTOR if inductor else EVAL_ORACLE_TRITON
    counts = ", ".join(f"{name} {rs.no_oracle}" for name, rs in run.sets.items())
    return text + EVAL_NO_ORACLE.format(counts) + EVAL_COLUMNS + (EVAL_TAU_INDUCTOR if inductor else EVAL_TAU_TRITON)


EVAL_HELD_OUT = "Every figure is on problems the model did not see while fitting. "
EVAL_HELD_OUT_CROSS = (
    "The within-device splits' figures are on problems the model did not see while fitting; the cross-device splits' "
    "({}) are not all: A's fit trained, on A's timings, on every problem id of B that A holds too (column "
    "fit_saw_problem of per_problem.csv.gz), and only subset unseen (B's problems A lacks; 0 problems where A holds "
    "them all) is held out in that sense. "
)
EVAL_DESIGN_TRITON = (
    "The default xgb_ranker is a rank:pairwise model with a near-best re-ranker over its best 48, one per layout kind "
    "(rankers.py); its design (its members, re-ranker, rows, bins and 128-config shortlist) was chosen on an inner "
    "5-fold CV of the training problems of h100:group_kfold's first fold, never on these figures; but those problems "
    "are the test problems of its other four folds, some later choices between recipes (trees, auxiliary data) "
    "compared these splits' figures, and until stop 78 the folds were re-drawn whenever a dataset grew, so a later "
    "fold 0 holds problems earlier dev CVs used: no fold of the shipped datasets is free of design choices "
    "(BENCHMARKS.md, stop 78, reads the problems added after the last choice apart). Since stop 78 a problem's fold "
    "is a hash of its id, fixed as a dataset grows, so the test problems of fold 0 can stay out of the next choices, "
    "and subset design_unseen is the problems models/design-seen.txt does not list: those no choice has seen (none "
    "of the data of stop 78). "
)
EVAL_DESIGN_INDUCTOR = (
    "On Inductor's template family the default xgb_ranker has no re-ranker. It is one model for the 2D x 3D problems "
    "(the forward, and a training step's input gradient) and, where the data hold them, a second for the 2D x 2D "
    "weight gradients (the layout experts of rankers.FAMILY_PARAMS, chosen on a dev CV of fold 0's training "
    "problems, BENCHMARKS.md stop 85); a dataset of the forward alone gets one model. Each model's objective an inner "
    "2-fold CV picks on each fold's training problems, kept because the ensemble measured below it on this family's "
    "held-out figures: that one choice between two procedures was made on them. Its hedge, the last 4 of the 10 slots "
    "filled from the training problems' best fixed list or none, an inner 5-fold CV picks on each fold's training "
    "problems too (chosen on a dev CV of fold 0's training problems, BENCHMARKS.md stop 81). Subset design_unseen is "
    "the problems models/design-seen.txt does not list. "
)
# what each kind of split holds out, said for the kinds a run has (all of them where it has none: a bare report)
EVAL_SPLITS = {
    "group_kfold": "group_kfold: 5 folds over whole problems",
    "lomo": "lomo: each public model family held out in turn",
    "cross": "A->B: fit on all of device A's problems, ranked on device B's problems with B's fingerprint; a problem "
    "id names a shape, not a device, so A's fit trained (on A's timings) on every problem of B that A holds too, and "
    "subset unseen is B's problems A lacks",
}


def _split_kind(split: str) -> str:
    """A split's kind, a key of EVAL_SPLITS: "h100:group_kfold" -> "group_kfold", "h100->h200" -> "cross"."""
    return "cross" if "->" in split else split.rsplit(":", 1)[-1]


EVAL_ORACLE_TRITON = (
    "where the oracle is the fastest config of the exhaustive collection, its retimed and refined rows included, and "
    "its polished rows too, each problem's rescaled by the median ratio of their times to the earlier ones "
    "(store.align_session; data/README.md); "
)
EVAL_ORACLE_INDUCTOR = (
    "where the oracle is the fastest of the choices Inductor offered for the problem, as Inductor's max-autotune "
    "benchmarker timed them (data/README.md); "
)
EVAL_NO_ORACLE = (
    'problems whose calls never launch the kernel (an empty output) are left out, and so are problems with no "ok" '
    "config (every config failed or was censored: no oracle to measure against), which the summaries' n_no_oracle "
    "does not see since they never reach scoring; left out for that, by dataset: {}. best-of-10 = the best of the "
    "predicted top 10 (the brief autotune's result). Subset oracle>=0.1ms: the problems whose best config takes at "
    "least 0.1 ms, where timing noise between near-equal configs is smallest (on a dataset collected under timing "
    "protocol v1, data/README.md, only these are free of its launch-overhead flaw)."
)
EVAL_COLUMNS = (
    " NDCG@10: the discounted gain of the predicted top 10 (gain 2^label - 1, discount 1 / log2(rank + 1)) over that "
    "of the best order, where a config's label counts the thresholds "
    + ", ".join(f"{t:.2f}" for t in RELEVANCE_THRESHOLDS)
    + " that its time over the oracle's is within (so 6 for the oracle, 0 beyond 1.5x, failed or censored). Kendall "
    "tau: tau-b between the predicted order and the timed order over every usable (ok or censored) config of a "
    "problem, the censored ones tied last; 1 is the same order."
)
EVAL_TAU_TRITON = (
    " A ranker trained to order the top, as the default xgb_ranker is (its fit keeps each problem's fastest rows and "
    "a sample of the rest; its 128-config shortlist and re-ranker order the best few), can have a low tau over the "
    "whole space while its top-10 figures are better: tau is not the headline, best-of-10 and the oracle in the top "
    "10 are."
)
EVAL_TAU_INDUCTOR = (
    " A ranker trained to order the top can have a low tau over all the choices while its top-10 figures are better: "
    "tau is not the headline, best-of-10 and the oracle in the top 10 are."
)

EVAL_FOLD_SEED = (
    " group_kfold's folds are drawn with seed {} here, not 0 (the draw `autoheur train` reports): the same procedure "
    "on another split of the same problems."
)
EVAL_THIN = (
    " The auxiliary-only datasets ({}) loaded thinned to {} rows a problem (its fastest quarter and a seeded sample of "
    "the rest), as `autoheur train --aux` loads them."
)
EVAL_AUX_NEW = " The auxiliary data keeps only the problems the dataset lacks (`--aux-new-only`)."
EVAL_AUX_LISTED = " The auxiliary data keeps only the problems listed in `{}` (`--aux-problems`)."
EVAL_AUX = (
    " Auxiliary data ({}): on that dataset's group_kfold and lomo splits every model also trains on the other "
    "datasets' problems as queries of their own, less their rows of the fold's test problems (and, in lomo, of the "
    "held-out family), as `autoheur train --aux` fits the shipped model; its cross-device split does not."
)
