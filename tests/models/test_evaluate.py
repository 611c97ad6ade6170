"""Evaluation splits: whole problems held out, every model on the same split, families held out whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoheur.models.data import rows_of
from autoheur.models.evaluate import (
    SUBSETS,
    auxiliary_only,
    group_kfold,
    leave_one_family_out,
    run_split,
    summarize_splits,
    tuning_cost,
)
from autoheur.models.rankers import XGBRankerModel


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
    slow = summary[(summary.model == "random") & (summary.subset == "oracle>=0.1ms")]["n_problems"]
    assert slow.tolist() == [int((pp[pp.model == "random"]["oracle_ms"] >= 0.1).sum())]  # the subset is what it says
    row = summary[(summary.model == "random") & (summary.subset == "all")].iloc[0]
    assert row["n_problems"] == len(h100_slice.problems)
    assert 0 < row["eff_best10_geomean"] <= 1 and len(fits) == 6


def test_tuning_cost_top10_is_far_cheaper(h100_slice):
    cost = tuning_cost(h100_slice).set_index("method")
    assert cost.loc["top-10", "configs"] == 10
    assert cost.loc["whole space", "configs"] == h100_slice.frame.groupby("problem_id").size().mean()
    assert cost.loc["whole space", "est_seconds"] > cost.loc["top-10", "est_seconds"]
    assert np.isfinite(cost["est_seconds"]).all()
    basis = cost.attrs["basis"]
    assert "0.68 CPU-seconds a config" in basis and "16 cores" in basis and "0.1 ms of L2 flush" in basis


def test_tuning_cost_gives_no_seconds_for_inductors_template_and_counts_a_short_problems_rows(h100_slice):
    # a problem of fewer than 10 rows (as Inductor offers for some shapes) autotunes them all: the mean counts it so
    pids = h100_slice.problems
    f = h100_slice.frame
    short = f["problem_id"].eq(pids[0]) & (f.groupby("problem_id", observed=True).cumcount() >= 4)
    rs = rows_of(h100_slice, np.flatnonzero(~short.to_numpy()))
    cost = tuning_cost(rs, family="inductor").set_index("method")
    assert cost.loc["top-10", "configs"] == (10 * (len(pids) - 1) + 4) / len(pids)
    assert cost["est_seconds"].isna().all() and "does not apply" in cost.attrs["basis"]
    one = tuning_cost(rs.subset(pids[:1])).set_index("method")  # 4 configs: its top 10 is those 4, no dearer
    assert one.loc["top-10", "configs"] == one.loc["whole space", "configs"] == 4
    assert one.loc["top-10", "est_seconds"] <= one.loc["whole space", "est_seconds"]


def test_a_split_with_no_fold_to_hold_out_says_so(h100_slice):
    from autoheur.models.evaluate import run_split

    two = h100_slice.subset(h100_slice.problems[:2])
    with pytest.raises(ValueError, match="group_kfold: no fold has both problems to train on and problems to hold"):
        run_split("group_kfold", iter([]), two, two, ["fixed_list"], log=lambda s: None)


def _other_device(rs, name="NVIDIA H200"):
    """The same rows as if timed on another device (the mechanics of auxiliary data need no second dataset)."""
    from autoheur.models.data import RankingSet

    return RankingSet(rs.frame.copy(), rs.X.copy(), {**rs.device, "name": name})


class _Recorder:
    """A ranker that records what it was fit on and scores at random."""

    name = "recorder"
    seen: list = []

    def fit(self, train):
        _Recorder.seen.append(train)
        return self

    def predict(self, data):
        return np.random.default_rng(0).random(len(data.frame))


def test_auxiliary_rows_of_test_problems_and_held_out_families_never_train(h100_slice, monkeypatch):
    from autoheur.models import evaluate as ev
    from autoheur.models.data import AUX_PREFIX

    monkeypatch.setitem(ev.RANKERS, "recorder", _Recorder)
    aux = _other_device(h100_slice)
    fam = h100_slice.frame.drop_duplicates("problem_id").set_index("problem_id")["family"]
    for folds, by_family in ((list(group_kfold(h100_slice, 3)), False), (list(leave_one_family_out(h100_slice)), True)):
        _Recorder.seen = []
        pp, _ = run_split("s", folds, h100_slice, h100_slice, ["recorder"], log=lambda s: None, aux=[aux],
                          aux_leave_out_families=by_family)  # fmt: skip
        for (_, train_ids, test_ids), train in zip(folds, _Recorder.seen, strict=True):
            ids = train.problems
            own = [p for p in ids if not p.startswith(AUX_PREFIX)]
            borrowed = [p.split(":", 2)[2] for p in ids if p.startswith(AUX_PREFIX)]
            assert sorted(own) == sorted(train_ids)
            assert borrowed and not set(borrowed) & set(test_ids)  # the same problem on the other GPU stays out
            if by_family:  # and the held-out family's problems altogether
                assert not set(fam[borrowed]) & set(fam[test_ids])
                assert sorted(borrowed) == sorted(train_ids)
            else:
                assert sorted(borrowed) == sorted(set(h100_slice.problems) - set(test_ids))
            assert train.device == h100_slice.device and len(train.frame) == len(train.X)
        assert not pp["problem_id"].str.startswith(AUX_PREFIX).any()  # scored on the test device's problems only


def test_leave_one_family_out_keeps_the_families_other_problems_out_of_the_auxiliary_data(h100_slice, monkeypatch):
    """The auxiliary device holds problems of the held-out family that the own data lacks: leaving out the test
    problems' ids alone would borrow those; the family's name keeps them out."""
    from autoheur.models import evaluate as ev
    from autoheur.models.data import AUX_PREFIX

    monkeypatch.setitem(ev.RANKERS, "recorder", _Recorder)
    fam = h100_slice.frame.drop_duplicates("problem_id").set_index("problem_id")["family"]
    extra = {f: ids[-1] for f, ids in fam.groupby(fam).groups.items() if f != "sampled" and len(ids) > 1}
    assert extra  # each public family keeps problems of its own, and lends one more through the other device
    own = h100_slice.subset([p for p in h100_slice.problems if p not in set(extra.values())])
    folds = list(leave_one_family_out(own))
    _Recorder.seen = []
    run_split("s", folds, own, own, ["recorder"], log=lambda s: None, aux=[_other_device(h100_slice)],
              aux_leave_out_families=True)  # fmt: skip
    for (family, _, _), train in zip(folds, _Recorder.seen, strict=True):
        borrowed = {p.split(":", 2)[2] for p in train.problems if p.startswith(AUX_PREFIX)}
        assert extra[family] not in borrowed and not set(fam[sorted(borrowed)]) & {family}
        assert set(extra.values()) - {extra[family]} <= borrowed  # the other families' extra problems are borrowed


def test_with_auxiliary_keeps_features_aligned_and_refuses_the_same_device(h100_slice):
    import pytest

    aux = _other_device(h100_slice)
    aux.X[:] += 1.0  # distinguishable rows
    pid = h100_slice.problems[0]
    both = h100_slice.with_auxiliary([aux], leave_out=[pid])
    extra = both.frame.index[len(h100_slice.frame) :]
    src = aux.frame[aux.frame["problem_id"] != pid]
    assert len(extra) == len(src)
    np.testing.assert_array_equal(both.X[extra], aux.X[src.index])
    borrowed = ("aux:NVIDIA H200:" + src["problem_id"].astype(str)).to_numpy()
    assert (both.frame.loc[extra, "problem_id"].to_numpy() == borrowed).all()
    assert isinstance(both.frame["problem_id"].dtype, pd.CategoricalDtype)  # stacked, the ids stay categorical
    assert h100_slice.with_auxiliary([]) is h100_slice
    with pytest.raises(ValueError, match="merge"):
        h100_slice.with_auxiliary([h100_slice])


def test_with_auxiliary_of_some_problems_is_their_subset_with_auxiliary(h100_slice):
    """`problems=` stacks the fold's rows and the auxiliary ones at once; the set is the subset's, row for row."""
    aux = _other_device(h100_slice)
    aux.X[:] += 1.0
    ids = list(h100_slice.problems[1:3])
    left_out = [h100_slice.problems[0]]
    one = h100_slice.with_auxiliary([aux], leave_out=left_out, problems=ids)
    two = h100_slice.subset(ids).with_auxiliary([aux], leave_out=left_out)
    pd.testing.assert_frame_equal(one.frame, two.frame, check_exact=True)
    np.testing.assert_array_equal(one.X, two.X)
    assert one.X.dtype == h100_slice.X.dtype and one.device == h100_slice.device
    assert set(one.frame["problem_id"]) == set(ids) | {f"aux:NVIDIA H200:{p}" for p in aux.problems} - {
        f"aux:NVIDIA H200:{left_out[0]}"
    }
    pd.testing.assert_frame_equal(
        h100_slice.with_auxiliary([], problems=ids).frame, h100_slice.subset(ids).frame, check_exact=True
    )


def test_cross_validate_names_unknown_aux_datasets(h100_slice):
    import pytest

    from autoheur.models.evaluate import cross_validate

    with pytest.raises(ValueError, match="h300"):
        cross_validate({"h100": h100_slice}, ["random"], ("group_kfold",), log=lambda s: None, aux_for=["h300"])


def test_cross_validate_runs_only_the_named_splits(h100_slice):
    import pytest

    from autoheur.models.evaluate import cross_validate

    sets = {"h100": h100_slice, "h200": _other_device(h100_slice)}
    pp, _, _ = cross_validate(sets, ["random"], ("h200:lomo", "h100->h200"), log=lambda s: None)
    assert sorted(pp["split"].unique()) == ["h100->h200", "h200:lomo"]
    pp, _, _ = cross_validate(sets, ["random"], ("group_kfold",), log=lambda s: None)
    assert sorted(pp["split"].unique()) == ["h100:group_kfold", "h200:group_kfold"]
    for bad in (("h300:lomo",), ("h100->h100",), ("kfold",), ()):
        with pytest.raises(ValueError, match="unknown splits"):
            cross_validate(sets, ["random"], bad, log=lambda s: None)
    with pytest.raises(ValueError, match="quote a cross-device split"):  # what an unquoted `h100->h200` leaves
        cross_validate(sets, ["random"], ("h200:lomo", "h100-"), log=lambda s: None)
    pp, _, _ = cross_validate(sets, ["random"], ("cross_device",), log=lambda s: None)
    assert sorted(pp["split"].unique()) == ["h100->h200", "h200->h100"]  # both ways, never a device onto itself
    with pytest.raises(ValueError, match="needs two datasets"):  # not an empty result's concat error
        cross_validate({"h100": h100_slice}, ["random"], ("cross_device",), log=lambda s: None)
    pp, _, _ = cross_validate({"h100": h100_slice}, ["random"], ("lomo", "cross_device"), log=lambda s: None)
    assert list(pp["split"].unique()) == ["h100:lomo"]  # the default list on one dataset: what it can run


def test_cross_validate_fold_seed_draws_other_folds_of_the_same_problems(h100_slice):
    from autoheur.models.evaluate import cross_validate

    def folds(seed):
        sets = {"h100": h100_slice}
        pp, _, _ = cross_validate(sets, ["random"], ("group_kfold",), log=lambda s: None, fold_seed=seed)
        return pp.set_index("problem_id")["fold"].sort_index()

    default, again, other = folds(0), folds(0), folds(1)
    assert default.index.is_unique and other.index.is_unique  # each problem held out exactly once
    assert sorted(other.index) == sorted(h100_slice.problems) == sorted(default.index)
    assert default.equals(again)
    assert not default.equals(other)  # the seed reaches the split: another draw
    n = len(default)
    for draw in (default, other):  # five folds, each near a fifth (binomial: within 5 sigma)
        assert draw.nunique() == 5 and (abs(draw.value_counts() - n / 5) < 5 * (n * 0.16) ** 0.5).all()


def test_a_problem_keeps_its_fold_as_the_dataset_grows():
    """Folds are a hash of the problem id: adding problems moves no other problem to another fold (sklearn's shuffled
    GroupKFold re-drew them all: a held-back fold of one size was trained on at the next). 10,000 ids, 500 added."""
    from autoheur.models.evaluate import problem_folds

    rng = np.random.default_rng(0)
    ids = [f"{x:016x}" for x in rng.integers(0, 2**62, 10_500)]
    old, grown = problem_folds(ids[:10_000]), problem_folds(sorted(ids))
    by_id = dict(zip(sorted(ids), grown, strict=True))
    assert [by_id[p] for p in ids[:10_000]] == old.tolist()
    assert (np.bincount(grown, minlength=5) > 0.18 * len(ids)).all()
    assert (problem_folds(ids[:10_000], 5, seed=1) != old).mean() > 0.7  # another seed, another draw
    with pytest.raises(ValueError, match="at least 2 folds"):
        problem_folds(ids, 1)


def test_an_empty_fold_of_a_small_dataset_is_said_not_skipped_silently():
    """A dataset of a few problems (one's own first collection) leaves some hash folds empty: each is skipped with a
    line saying so, and the folds that remain cover every problem once."""
    from types import SimpleNamespace

    from autoheur.models.evaluate import group_kfold, problem_folds

    ids = np.array([f"p{i}" for i in range(3)])
    said: list[str] = []
    folds = list(group_kfold(SimpleNamespace(problems=ids), 5, log=said.append))
    empty = 5 - len(set(problem_folds(ids, 5)))
    assert empty > 0 and len(said) == empty and len(folds) == 5 - empty
    assert all("holds none of the 3 problems" in line and "skipped" in line for line in said)
    assert sorted(np.concatenate([test for _, _, test in folds]).tolist()) == ids.tolist()
    assert len(list(group_kfold(SimpleNamespace(problems=ids), 5))) == len(folds)  # no log: the same folds
    said.clear()  # one problem: its fold would train on nothing (train failed with "max() arg is an empty sequence")
    assert list(group_kfold(SimpleNamespace(problems=ids[:1]), 5, log=said.append)) == []
    assert sum("holds all of the 1 problems" in line for line in said) == 1 and len(said) == 5


def test_auxiliary_only_names_the_datasets_the_splits_only_train_on():
    names = ["h100", "h200"]
    assert auxiliary_only(names, ["h200:lomo"], ["h200"]) == ["h100"]
    assert auxiliary_only(names, ["h200:lomo", "h200:group_kfold"], ["h200"]) == ["h100"]
    assert auxiliary_only(names, ["h200:lomo", "h100->h200"], ["h200"]) == []  # h100 trains a cross-device model
    assert auxiliary_only(names, ["h200:lomo", "h100:group_kfold"], ["h200"]) == []  # a split of its own
    assert auxiliary_only(names, ["lomo"], ["h200"]) == []  # every dataset's
    assert auxiliary_only(names, ["h200:lomo"], []) == []  # no auxiliary data
    assert auxiliary_only(names, ["h200:lomo"], ["h100"]) == []  # h100 would train on h200, but has no split


def test_a_pool_holds_the_own_rows_once_and_its_masks_are_the_folds_training_sets(h100_slice):
    """TrainingPool: the own set becomes a view of the pool's first rows, equal to what it was; each mask's rows are
    the set with_auxiliary gives for the same fold, row for row."""
    from autoheur.models.data import RankingSet, TrainingPool, rows_of

    own = RankingSet(h100_slice.frame.copy(), h100_slice.X.copy(), h100_slice.device)
    before = RankingSet(own.frame.copy(), own.X.copy(), own.device)
    aux = _other_device(h100_slice)
    aux.X[:] += 1.0  # distinguishable rows
    pool = TrainingPool.build(own, [aux])
    pd.testing.assert_frame_equal(own.frame, before.frame, check_exact=True)  # categories included
    np.testing.assert_array_equal(own.X, before.X)
    assert np.shares_memory(own.X, pool.set.X) and pool.aux == (("NVIDIA H200", None),)
    fam = before.frame.drop_duplicates("problem_id").set_index("problem_id")["family"]
    ids, left_out = list(before.problems[2:]), list(before.problems[:2])
    families = [sorted(set(fam) - {"sampled"})[0]]  # a public family, so the last case leaves out more rows
    for kw in ({}, {"problems": ids}, {"problems": ids, "leave_out": left_out},
               {"problems": ids, "leave_out": left_out, "leave_out_families": families}):  # fmt: skip
        want = before.with_auxiliary([aux], **kw)
        mask = pool.rows(**kw)
        got = pool.set if mask is None else rows_of(pool.set, np.flatnonzero(mask))
        pd.testing.assert_frame_equal(got.frame, want.frame, check_exact=True)
        np.testing.assert_array_equal(got.X, want.X)
    by_family = pool.rows(problems=ids, leave_out=left_out, leave_out_families=families)
    assert by_family.sum() < pool.rows(problems=ids, leave_out=left_out).sum()  # the family case is not the one before
    assert pool.rows() is None  # every row: no mask
    alone = TrainingPool.build(before)  # no auxiliary data: the set itself, a fold a mask of its rows
    assert alone.set is before and alone.rows() is None
    np.testing.assert_array_equal(alone.rows(ids), before.frame["problem_id"].isin(ids).to_numpy())


def test_run_split_on_a_pool_is_run_split_on_the_copies(h100_slice):
    """The default ranker fitted in place on a fold's mask scores every problem as one fitted on the fold's rows
    copied out (with_auxiliary, as before the pool): the same model."""
    from autoheur.models.data import RankingSet, TrainingPool
    from autoheur.models.evaluate import _score

    small = {"xgb_ranker": {"n_estimators": 8, "max_depth": 3, "rerank_estimators": 4, "n_jobs": 1}}
    own = RankingSet(h100_slice.frame.copy(), h100_slice.X.copy(), h100_slice.device)
    aux = _other_device(h100_slice)
    folds = list(group_kfold(own, 3))
    pp, _ = run_split("s", folds, own, own, ["xgb_ranker"], log=lambda s: None, params=small, aux=[aux])
    copied = []
    for fold, train_ids, test_ids in folds:
        train = h100_slice.with_auxiliary([aux], leave_out=test_ids, problems=train_ids)
        model = XGBRankerModel(**small["xgb_ranker"])
        copied.append(_score(model, train, None, h100_slice.subset(test_ids), "s", fold, "xgb_ranker", print)[0])
    pd.testing.assert_frame_equal(pp, pd.concat(copied, ignore_index=True), check_exact=True)
    with pytest.raises(ValueError, match="not both"):
        run_split("s", folds, own, own, ["xgb_ranker"], aux=[aux], pool=TrainingPool.build(own, [aux]))


def test_cross_device_figures_say_which_problems_the_fit_trained_on(h100_slice):
    """Ids hash the problem, not the device: A's fit has trained on B's problems that A holds too. The cross-device
    rows say which, and the summary's "unseen" subset is B's problems A lacks; within-device splits have no such
    subset (every test problem is held out there)."""
    from autoheur.models.evaluate import SEEN, cross_validate

    pids = h100_slice.problems
    other = _other_device(h100_slice)
    sets = {"h100": h100_slice.subset(pids[:20]), "h200": other.subset(pids[10:])}
    pp, summary, _ = cross_validate(sets, ["fixed_list"], ("h100->h200", "h200:group_kfold"), log=lambda s: None)
    cross = pp[pp["split"] == "h100->h200"]
    assert set(cross.loc[cross[SEEN], "problem_id"]) == set(pids[10:20])
    assert set(cross.loc[~cross[SEEN].astype(bool), "problem_id"]) == set(pids[20:])
    got = summary.set_index(["split", "subset"])["n_problems"]
    assert got["h100->h200", "all"] == len(pids) - 10 and got["h100->h200", "unseen"] == len(pids) - 20
    assert ("h200:group_kfold", "unseen") not in got.index


def test_cross_device_one_dataset_at_a_time_is_cross_validate_with_one_set_held(h100_slice):
    """`cross_device_one_at_a_time` gives the rows and fit records `cross_validate` gives for the cross-device splits
    (same order, same fits), while each dataset it loaded is let go before the next one loads; two datasets both
    ways take three loads."""
    import gc
    import weakref

    from autoheur.models.data import RankingSet
    from autoheur.models.evaluate import cross_device_one_at_a_time, cross_validate

    pids = h100_slice.problems
    sets = {"h100": h100_slice.subset(pids[:20]), "h200": _other_device(h100_slice).subset(pids[10:])}
    models = ["fixed_list", "nearest", "fixed_best", "xgb_ranker"]
    params = {"xgb_ranker": {"n_estimators": 20, "max_depth": 3, "n_jobs": 1}}
    want, _, want_fits = cross_validate(sets, models, ("cross_device",), log=lambda s: None, params=params)
    live, loads, seen, fitted = [], [], [], []

    def load(name):
        gc.collect()
        assert [ref() for ref in live] == [None] * len(live), "a dataset loaded before is still held"
        rs = sets[name]
        copy = RankingSet(rs.frame.copy(), rs.X.copy(), dict(rs.device))
        live.append(weakref.ref(copy))
        loads.append(name)
        return copy

    got, fits = cross_device_one_at_a_time(
        load, list(sets), ("cross_device",), models, log=lambda s: None, params=params,
        on_load=lambda name, rs: seen.append(name), on_fit=lambda name, model, _: fitted.append((name, model)),
    )  # fmt: skip
    assert loads == ["h100", "h200", "h100"] and seen == ["h100", "h200"]
    assert fitted == [(d, m) for d in ("h100", "h200") for m in models]  # one fit a training side, not a split
    pd.testing.assert_frame_equal(got, want)
    assert [{k: v for k, v in f.items() if k != "fit_s"} for f in fits] == [
        {k: v for k, v in f.items() if k != "fit_s"} for f in want_fits
    ]
    # one pair: one load a side, and nothing the pair does not need
    loads.clear()
    got, _ = cross_device_one_at_a_time(load, list(sets), ("h200->h100",), ["fixed_list"], log=lambda s: None)
    assert loads == ["h200", "h100"] and set(got["split"]) == {"h200->h100"}


def test_a_cross_device_split_with_no_unseen_problem_says_so(tmp_path):
    """Where device A holds every problem of B (as the Inductor H100 set holds the H200's), subset unseen is empty:
    the summary has its row of 0 problems, and the report says so, instead of leaving the subset out unremarked."""
    from autoheur.models.evaluate import SEEN
    from autoheur.models.report import write_report

    pp = pd.DataFrame({
        "split": ["a->b"] * 2 + ["b:group_kfold"] * 2, "fold": ["all"] * 2 + ["0"] * 2, "model": ["m"] * 4,
        "problem_id": ["p", "q"] * 2, "oracle_ms": [0.2] * 4, "n_configs": [10] * 4, "eff_top1": [1.0, 0.5] * 2,
        "eff_best10": [1.0, 0.9] * 2, "oracle_in_top10": [True, False] * 2, "ndcg10": [1.0] * 4,
        "kendall_tau": [0.5] * 4, SEEN: [True, True, np.nan, np.nan],
    })  # fmt: skip
    got = summarize_splits(pp).set_index(["split", "subset"])["n_problems"]
    assert got["a->b", "all"] == 2 and got["a->b", "unseen"] == 0
    assert ("b:group_kfold", "unseen") not in got.index  # held out within a device: no such subset
    text = write_report(pp, summarize_splits(pp), tmp_path, title="t", meta={}).read_text()
    assert "**Subset: unseen**: 0 problems" in text


def _method(family: str, splits: list[str], no_oracle: int = 0) -> str:
    from autoheur.models.data import RankingSet
    from autoheur.models.eval_datasets import EvalRun, eval_method

    sets = {"h100": RankingSet(pd.DataFrame(), np.zeros((0, 1)), {"name": "x"}, no_oracle=no_oracle)}
    return eval_method(EvalRun(pd.DataFrame({"split": splits}), pd.DataFrame(), [], sets, {}, family=family))


def test_the_method_says_what_each_split_held_out_and_what_was_left_out():
    held = "Every figure is on problems the model did not see while fitting."
    within = _method("triton", ["h100:group_kfold"])
    assert held in within and "are not all" not in within
    cross = _method("triton", ["h100:group_kfold", "h100->h200"])
    assert held not in cross and "cross-device splits' (h100->h200) are not all" in cross and "unseen" in cross
    assert 'no "ok" config' in within and "by dataset: h100 0." in within
    assert "by dataset: h100 3." in _method("triton", ["h100:group_kfold"], no_oracle=3)


def test_the_method_describes_the_splits_the_run_has():
    """It described group_kfold, lomo and the cross-device pairs whatever the run held."""
    kfold = _method("triton", ["h100:group_kfold"])
    assert "group_kfold: 5 folds over whole problems. Efficiency" in kfold
    assert "lomo:" not in kfold and "A->B" not in kfold
    both = _method("inductor", ["h200:group_kfold", "h200:lomo"])
    assert "group_kfold: 5 folds over whole problems; lomo: each public model family held out in turn. " in both
    assert "A->B" not in both
    cross = _method("triton", ["h100->h200"])
    assert "A->B: fit on all of device A's problems" in cross and "group_kfold:" not in cross


def test_the_method_describes_the_familys_ranker_and_oracle_and_defines_the_columns():
    triton, inductor = _method("triton", ["s"]), _method("inductor", ["s"])
    assert "re-ranker over its best 48, one per layout kind" in triton and "polished rows" in triton
    assert "store.align_session" in triton
    assert "one layout kind" not in inductor and "no re-ranker" in inductor and "polished" not in inductor
    assert "Inductor's max-autotune benchmarker" in inductor
    assert "Its hedge, the last 4 of the 10 slots" in inductor and "hedge" not in triton
    for text in (triton, inductor):
        assert "gain 2^label - 1" in text and "1.00, 1.02, 1.05, 1.10, 1.25, 1.50" in text
        assert "tau-b" in text and "censored ones tied last" in text and "tau is not the headline" in text


def test_eval_refuses_a_mistyped_split_or_aux_dataset_before_any_data_loads(monkeypatch):
    """`autoheur eval --splits ...` or `--aux-for NAME` naming no split or dataset of its --data is refused before
    the datasets load (minutes and most of a 24 GB host for the H100 and H200 sets), not after."""
    from autoheur.models import eval_datasets as eval_job
    from autoheur.models.artifact import MODELS_DIR

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(eval_job, "load_ranking_set", no_load)
    data = [MODELS_DIR.parent / "data" / "inductor-nvidia-h200"]
    for splits, aux_for, match in (
        (["bogus"], (), "unknown splits"),
        (["h200:lomo"], (), "unknown splits"),
        (["cross_device"], (), "needs two datasets"),
        (["cross_device", "cross_device"], (), "needs two datasets"),  # was an IndexError of the one-at-a-time path
        (["group_kfold"], ["h300"], "h300"),
    ):
        with pytest.raises(ValueError, match=match):
            eval_job.eval_datasets(data, ["fixed_best"], splits, aux_for=aux_for)


def test_eval_refuses_no_model_or_a_model_named_twice(monkeypatch):
    """`--models ''` read as no model ended in "no fold has both problems to train on ..." after the data loaded;
    `--models fixed_best,fixed_best` scored every problem twice, the summary counting each twice (126 problems of 63,
    another P10). Both are refused before anything loads."""
    from autoheur.models import eval_datasets as eval_job
    from autoheur.models.artifact import MODELS_DIR

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(eval_job, "load_ranking_set", no_load)
    data = [MODELS_DIR.parent / "data" / "inductor-nvidia-h200"]
    for text, match in (("", "names no model"), (",", "names no model"), ("fixed_best, fixed_best", "more than once")):
        with pytest.raises(ValueError, match=match):
            eval_job.eval_datasets(data, eval_job.model_names(text), ["group_kfold"])


def test_the_report_names_the_dataset_of_its_importances_and_tuning_cost(h100_slice, tmp_path, monkeypatch):
    """With two --data, the feature importances and the tuning cost are of one dataset's problems (the importances of
    a fit of their own on all of them): the report says which, where it had left both numbers unexplained."""
    from autoheur.models import rankers
    from autoheur.models.eval_datasets import EvalRun, write_eval_report

    class Fit:  # xgb_ranker's fit on all of a dataset, as the report makes it, without the minutes
        def __init__(self, **kw):
            pass

        def fit(self, rs):
            self.feature_importances_ = {"f0": 0.75, "f1": 0.25}
            return self

    monkeypatch.setattr(rankers, "XGBRankerModel", Fit)
    pids = h100_slice.problems
    sets = {"h100": h100_slice.subset(pids[:20]), "h200": _other_device(h100_slice).subset(pids[10:])}
    pp = pd.DataFrame({"split": ["h100->h200"], "fold": ["all"], "model": ["xgb_ranker"], "problem_id": ["p"],
                       "oracle_ms": [0.2], "eff_top1": [1.0], "eff_best10": [1.0], "oracle_in_top10": [True],
                       "ndcg10": [1.0], "kendall_tau": [0.5]})  # fmt: skip
    run = EvalRun(pp, summarize_splits(pp), [], sets, {})
    text = write_eval_report(run, tmp_path / "r", ["xgb_ranker"], data=["d/h100", "d/h200"], command="c").read_text()
    importances = text.split("## Feature importances", 1)[1].split("## Tuning cost")[0]
    assert "xgb_ranker fitted once on every problem of h100" in importances
    assert "Dataset: h100. " in text.split("## Tuning cost", 1)[1] and "the dataset's 20 problems" in text
