"""Evaluation splits: whole problems held out, every model on the same split, families held out whole."""

from __future__ import annotations

import numpy as np

from autoheur.models.evaluate import (
    SUBSETS,
    group_kfold,
    leave_one_family_out,
    run_split,
    summarize_splits,
    tuning_cost,
)


def test_group_kfold_holds_out_whole_problems(h100_slice):
    seen = []
    for _, train, test in group_kfold(h100_slice, 5):
        assert not set(train) & set(test)
        seen += list(test)
    assert sorted(seen) == sorted(h100_slice.problems)


def test_lomo_holds_out_each_family_whole(h100_slice):
    fam = h100_slice.frame.drop_duplicates("problem_id").set_index("problem_id")["family"]
    folds = list(leave_one_family_out(h100_slice))
    assert [f for f, _, _ in folds] == sorted(set(fam) - {"sampled"})
    for f, train, test in folds:
        assert set(fam[test]) == {f} and f not in set(fam[train])


def test_every_model_is_scored_on_the_same_problems(h100_slice):
    folds = list(group_kfold(h100_slice, 3))
    pp, fits = run_split("g", folds, h100_slice, h100_slice, ["fixed_best", "random"], log=lambda s: None)
    per_model = pp.groupby("model")["problem_id"].apply(lambda s: tuple(sorted(s)))
    assert per_model["fixed_best"] == per_model["random"]
    assert len(per_model["random"]) == len(h100_slice.problems)
    summary = summarize_splits(pp)
    assert set(summary["subset"]) <= set(SUBSETS)
    row = summary[(summary.model == "random") & (summary.subset == "all")].iloc[0]
    assert row["n_problems"] == len(h100_slice.problems)
    assert 0 < row["eff_best10_geomean"] <= 1 and len(fits) == 6


def test_tuning_cost_top10_is_far_cheaper(h100_slice):
    cost = tuning_cost(h100_slice).set_index("method")
    assert cost.loc["top-10", "configs"] == 10
    assert cost.loc["whole space", "configs"] == h100_slice.frame.groupby("problem_id").size().mean()
    assert cost.loc["whole space", "est_seconds"] > cost.loc["top-10", "est_seconds"]
    assert np.isfinite(cost["est_seconds"]).all()
