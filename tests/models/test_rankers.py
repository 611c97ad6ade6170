"""Rankers: the scikit-learn contract of every ranker, and the default ranker's fit and predict on real data (the
baselines' definitions: test_baselines.py; the config keys and the near-best cut: test_near_best.py)."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

from autoheur.features import FEATURE_NAMES
from autoheur.models import rankers as rankers_mod
from autoheur.models.data import RankingSet
from autoheur.models.metrics import evaluate, summarize
from autoheur.models.rankers import (
    ENSEMBLE_MEMBERS,
    RANKERS,
    XGBRankerModel,
    family_params,
)

SMALL = {
    "xgb_ranker": dict(objective="rank:ndcg", n_estimators=20, max_depth=4),
    "xgb_regressor": dict(n_estimators=20),
}


def make(name):
    return RANKERS[name](**SMALL.get(name, {}))


@pytest.mark.parametrize("name", sorted(RANKERS))
def test_sklearn_contract(name, h100_slice):
    model = make(name)
    init = inspect.signature(type(model).__init__).parameters
    assert set(model.get_params()) == set(init) - {"self"}  # __init__ stores hyperparameters only
    assert not [k for k in vars(model) if k.endswith("_")]  # nothing fitted yet
    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[:20]), h100_slice.subset(pids[20:])
    assert model.fit(train) is model
    assert [k for k in vars(model) if k.endswith("_")]  # fitted state ends in _
    scores = model.predict(test)
    assert scores.shape == (len(test.frame),) and np.isfinite(scores).all()


@pytest.mark.parametrize("name", sorted(RANKERS))
def test_rank_matches_predict_for_one_problem(name, h100_rows, h100_slice):
    """Inference (features from the Problem, built from its dataset row) ranks exactly as predict on the dataset rows
    does."""
    from autoheur.collect.schema import problem_from_row
    from autoheur.kernels.config import KernelConfig

    pids = h100_slice.problems
    model = make(name).fit(h100_slice.subset(pids[:20]))
    one = h100_slice.subset([pids[25]])
    problem = problem_from_row(h100_rows[h100_rows["problem_id"] == pids[25]].iloc[0])
    configs = [KernelConfig.from_id(c) for c in one.frame["config_id"]]
    np.testing.assert_allclose(model.rank(problem, configs, one.device), model.predict(one), rtol=1e-5)


def test_xgb_ranker_beats_random_on_held_out_problems(h100_slice):
    """The shipped objective (the ensemble), small. Not the lone NDCG member of SMALL: at 20 trees on 15 problems,
    under the 9 training grades it ranks below random here (0.895 against 0.920; 0.965 under the 6 metric grades)."""
    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[::2]), h100_slice.subset(pids[1::2])
    out = {}
    models = {"xgb_ranker": XGBRankerModel(n_estimators=20, max_depth=4), "random": make("random")}
    for name, model in models.items():
        f = test.frame.assign(score=model.fit(train).predict(test))
        out[name] = summarize(evaluate(f))["eff_best10_geomean"]
    assert out["xgb_ranker"] > out["random"]


def test_objective_auto_selects_on_inner_folds_only(h100_slice):
    m = XGBRankerModel(experts=(), objective="auto", n_estimators=10, max_depth=3, n_jobs=1)
    m.fit(h100_slice.subset(h100_slice.problems[:16]))
    assert set(m.selection_) == {"rank:ndcg", "rank:pairwise"}
    assert m.objective_ == max(m.selection_, key=m.selection_.get)


def test_ensemble_orders_by_standardized_sum_with_the_lead_first(h100_slice):
    """The ensemble of two members: both re-score the lead's shortlist; the shortlist is ordered by the sum of their
    per-problem standardized scores, except that the lead's own best config comes first; the rest stay below."""
    pids = h100_slice.problems
    m = XGBRankerModel(
        experts=(), n_estimators=60, max_depth=3, n_jobs=1, rerank_top=0, members=ENSEMBLE_MEMBERS
    )  # the two-member blend alone (see the rerank tests)
    m.shortlist = 40  # fewer than a problem's configs, so the shortlist matters
    m.near_best_pct = 0  # every config scored (the cut before the passes: test_near_best_cut_...)
    assert m.objective == "ensemble"
    m.fit(h100_slice.subset(pids[:20]))
    assert [mm.get_params()["objective"] for mm in m.members_] == list(ENSEMBLE_MEMBERS)
    one = h100_slice.subset([pids[25]])
    X = one.X
    scores = m.predict(one)
    lead, other = (mm.get_booster() for mm in m.members_)
    coarse = lead.inplace_predict(X, iteration_range=(0, m.coarse_trees))
    short = np.sort(np.argsort(-scores, kind="stable")[: m.shortlist])  # the configs the whole models re-scored
    outside = np.setdiff1d(np.arange(len(X)), short)
    assert coarse[short].min() >= coarse[outside].max()  # the coarse pass's best 40 (which of a tie: either)
    assert scores[short].min() > scores[outside].max()
    a, b = lead.inplace_predict(X[short]).astype(float), other.inplace_predict(X[short]).astype(float)
    blend = (a - a.mean()) / a.std() + (b - b.mean()) / b.std()
    assert np.argmax(scores) == short[np.argmax(a)]  # the lead's best first (of a tie, the earlier config)
    rest = [i for i in range(len(short)) if i != np.argmax(a)]
    # the lead's score there is its coarse trees' plus the rest's: float32 sums in another order
    np.testing.assert_allclose(scores[short[rest]], blend[rest], rtol=1e-5, atol=1e-5)


def test_booster_predict_is_inplace_predict_with_or_without_the_c_entry_point(h100_slice, monkeypatch):
    import xgboost.core as xc

    from autoheur.models.rankers import booster_predict

    m = XGBRankerModel(experts=(), n_estimators=30, max_depth=3, n_jobs=1, objective="rank:pairwise").fit(h100_slice)
    booster, X = m.members_[0].get_booster(), h100_slice.X[:300]
    for begin, end in [(0, 0), (0, 10), (10, 30)]:
        want = booster.inplace_predict(X, iteration_range=(begin, end)).astype(np.float64)
        np.testing.assert_array_equal(booster_predict(booster, X, begin, end), want)
        got = booster_predict(booster, X[:1], begin, end)  # one row: the runtime's case
        np.testing.assert_array_equal(got, want[:1])
    # the first trees and the rest add up to the whole model, less one base score (a constant)
    parts = booster_predict(booster, X, 0, 10) + booster_predict(booster, X, 10, 30)
    shift = parts - booster_predict(booster, X)
    np.testing.assert_allclose(shift, shift[0], atol=1e-5)
    monkeypatch.setenv("AUTOHEUR_FOREST", "0")  # XGBoost scores these rows (forest.py, tests/models/test_forest.py)
    monkeypatch.setattr(xc, "c_bst_ulong", None, raising=False)  # an xgboost whose internals differ: the wrapper
    monkeypatch.setattr(booster, "inplace_predict", lambda X, iteration_range: np.full(len(X), 7.0, np.float32))
    np.testing.assert_array_equal(booster_predict(booster, X, 0, 10), np.full(len(X), 7.0))


def test_unknown_objective_is_refused(h100_slice):
    with pytest.raises(ValueError, match="objective='rank:map'"):
        XGBRankerModel(experts=(), objective="rank:map").fit(h100_slice.subset(h100_slice.problems[:4]))


def test_a_model_saved_before_ensembles_still_predicts(h100_slice):
    """Models pickled before the ensemble had one booster in `model_` and no `members_`: they score as they did."""
    pids = h100_slice.problems
    m = XGBRankerModel(experts=(), objective="rank:pairwise", n_estimators=60, max_depth=3, n_jobs=1)
    m.fit(h100_slice.subset(pids[:20]))
    test = h100_slice.subset(pids[20:24])
    expected = m.predict(test)
    m.model_ = m.members_.pop()  # the state of an older pickle: its one booster in model_, no members_
    del m.members_
    np.testing.assert_array_equal(m.predict(test), expected)


def test_training_labels_follow_the_relevance_thresholds():
    """Labels count the thresholds a row's time / oracle is <= to; censored and failed rows get 0."""
    frame = pd.DataFrame({
        "rel_time": [1.0, 1.005, 1.01, 1.011, 1.04, 1.3, 1.6, 3.5, np.inf],
        "status": ["ok"] * 7 + ["censored", "crashed"],
    })  # fmt: skip
    assert XGBRankerModel().labels(frame).tolist() == [9, 8, 8, 7, 5, 1, 0, 0, 0]
    assert XGBRankerModel(relevance=(1.0, 1.1)).labels(frame).tolist() == [2, 1, 1, 1, 1, 0, 0, 0, 0]


@pytest.mark.parametrize("bad", [(), (0.9, 1.1), (1.0, 1.0, 1.2), (1.2, 1.1), tuple(1 + i / 100 for i in range(32))])
def test_bad_relevance_thresholds_are_refused(bad, h100_slice):
    with pytest.raises(ValueError, match="relevance="):
        XGBRankerModel(experts=(), relevance=bad).fit(h100_slice.subset(h100_slice.problems[:4]))


def test_the_ranker_learns_from_its_own_labels(h100_slice, monkeypatch):
    """fit passes `labels(frame)` to xgboost, not the dataset's metric grades."""
    import xgboost as xgb

    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(
        xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append(np.asarray(y)) or real(self, X, y, **kw)
    )
    train = h100_slice.subset(h100_slice.problems[:6])
    # one thread: the fits one after another, the member first
    XGBRankerModel(experts=(), objective="rank:ndcg", n_estimators=5, max_depth=3, per_problem=None, n_jobs=1).fit(
        train
    )
    np.testing.assert_array_equal(seen[0], XGBRankerModel().labels(train.frame))
    assert seen[0].max() == 9 and train.frame["label"].max() == 6


@pytest.mark.parametrize("mode", ["replace", "add"])
def test_rerank_reorders_the_best_rerank_top_and_keeps_the_lead_first(mode, h100_slice):
    """The near-best re-ranker touches only the ensemble's best `rerank_top` configs: they stay above the rest, the
    lead's top 1 stays first, and the others follow the re-ranker ("replace") or the sum of the standardized blend
    and the weighted re-ranker ("add")."""
    pids = h100_slice.problems
    kw = dict(n_estimators=60, max_depth=3, n_jobs=1)
    m = XGBRankerModel(experts=(), **kw, rerank_top=12, rerank_mode=mode, rerank_weight=1.5).fit(
        h100_slice.subset(pids[:20])
    )
    one = h100_slice.subset([pids[25]])
    scores = m.predict(one)
    reranker, m.reranker_ = m.reranker_, None  # the same model without its re-ranker: the blend
    blend = m.predict(one)
    order = np.argsort(-blend, kind="stable")
    top, rest = order[:12], order[12:]
    assert scores[top].min() > scores[rest].max()
    np.testing.assert_array_equal(scores[rest], blend[rest])
    assert np.argmax(scores) == top[0]
    r = reranker.get_booster().inplace_predict(one.X[top]).astype(float)
    z = lambda v: (v - v.mean()) / v.std()  # noqa: E731
    expected = z(r) if mode == "replace" else z(blend[top]) + 1.5 * z(r)
    got = scores[top[1:]]
    np.testing.assert_allclose(got - got.mean(), expected[1:] - expected[1:].mean(), rtol=1e-6, atol=1e-9)


def test_rerank_learns_the_fastest_rows_under_its_own_grades(h100_slice, monkeypatch):
    """The re-ranker is fit on each problem's `rerank_rows` fastest ok configs, labelled by `rerank_relevance`."""
    import xgboost as xgb

    from autoheur.models.rankers import RERANK_RELEVANCE

    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(
        xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append((np.asarray(y), kw["qid"])) or real(self, X, y, **kw)
    )
    train = h100_slice.subset(h100_slice.problems[:6])
    XGBRankerModel(experts=(), n_estimators=5, max_depth=3, rerank_top=8, rerank_rows=10, n_jobs=1).fit(train)
    y, qid = seen[-1]  # one thread: the fits one after another, the member (the lead alone) first, the re-ranker last
    assert len(seen) == 2 and np.bincount(qid).tolist() == [10] * 6
    f = train.frame
    for q, (_, g) in enumerate(f.groupby("problem_id", sort=False)):
        fastest = np.sort(g.loc[g["status"] == "ok", "rel_time"].to_numpy())[:10]
        grades = [sum(r <= t for t in RERANK_RELEVANCE) for r in fastest]
        assert sorted(y[qid == q].tolist()) == sorted(grades)
    assert y.max() == len(RERANK_RELEVANCE)


@pytest.mark.parametrize(
    "bad", [dict(rerank_mode="swap"), dict(rerank_objective="rank:map"), dict(rerank_relevance=(1.1, 1.0))]
)
def test_bad_rerank_settings_are_refused(bad, h100_slice):
    with pytest.raises(ValueError, match="rerank"):
        XGBRankerModel(experts=(), rerank_top=8, **bad).fit(h100_slice.subset(h100_slice.problems[:4]))


def test_rerank_regression_fits_the_capped_log_relative_time(h100_slice, monkeypatch):
    """rerank_objective='reg:squarederror': a regressor of -log(time / oracle), capped at the coarsest grade, over the
    same fastest rows, with the re-ranker's own boosting budget."""
    import xgboost as xgb

    seen = []
    real = xgb.XGBRegressor.fit
    monkeypatch.setattr(
        xgb.XGBRegressor, "fit", lambda self, X, y, **kw: seen.append((self, np.asarray(y))) or real(self, X, y, **kw)
    )
    train = h100_slice.subset(h100_slice.problems[:6])
    kw = dict(rerank_top=8, rerank_rows=10, rerank_relevance=(1.0, 1.01, 1.05), rerank_estimators=7)
    m = XGBRankerModel(experts=(), n_estimators=5, max_depth=3, rerank_objective="reg:squarederror", **kw).fit(train)
    ((model, y),) = seen
    assert model is m.reranker_ and model.n_estimators == 7 and len(y) == 60
    expected = []
    for _, g in train.frame.groupby("problem_id", sort=False):
        fastest = np.sort(g.loc[g["status"] == "ok", "rel_time"].to_numpy())[:10]
        expected += (-np.minimum(np.log(fastest), np.log(1.05))).tolist()
    np.testing.assert_allclose(np.sort(y), np.sort(expected), rtol=1e-12)
    assert y.min() == pytest.approx(-np.log(1.05)) and y.max() == 0.0
    assert np.isfinite(m.predict(h100_slice.subset(h100_slice.problems[6:8]))).all()


def test_members_repeat_an_objective_under_another_seed(h100_slice, monkeypatch):
    """members=(pairwise, ndcg, pairwise): three boosters, the repeat seeded one up; `pairs` reaches each."""
    import xgboost as xgb

    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append(self) or real(self, X, y, **kw))
    members = ("rank:pairwise", "rank:ndcg", "rank:pairwise")
    train = h100_slice.subset(h100_slice.problems[:6])
    m = XGBRankerModel(
        experts=(), n_estimators=5, max_depth=3, rerank_top=0, members=members, pairs=4, random_state=3, n_jobs=1
    )
    m.fit(train)
    assert len(m.members_) == 3 and [s.objective for s in seen] == list(members)
    assert [s.random_state for s in seen] == [3, 3, 4] and {
        s.get_params()["lambdarank_num_pair_per_sample"] for s in seen
    } == {4}


@pytest.mark.parametrize("method", [None, "topk", "mean"])
def test_pair_method_reaches_every_lambdamart_fit(method, h100_slice, monkeypatch):
    """pair_method sets XGBoost's lambdarank_pair_method on the members and the re-ranker alike; None keeps each
    objective's own (topk for NDCG, mean for pairwise)."""
    import xgboost as xgb

    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append(self) or real(self, X, y, **kw))
    m = XGBRankerModel(
        experts=(), n_estimators=3, max_depth=3, members=("rank:pairwise", "rank:ndcg"), pair_method=method, n_jobs=1
    )
    m.fit(h100_slice.subset(h100_slice.problems[:6]))
    got = [(s.objective, s.get_params()["lambdarank_pair_method"]) for s in seen]
    default = {"rank:pairwise": "mean", "rank:ndcg": "topk"}
    assert len(got) == 3  # two members and the re-ranker
    assert got == [(o, method or default[o]) for o, _ in got]


@pytest.mark.parametrize(
    "bad", [dict(members=()), dict(members=("rank:map",)), dict(pairs=0), dict(pair_method="random")]
)
def test_bad_member_settings_are_refused(bad, h100_slice):
    with pytest.raises(ValueError, match="members|pairs|pair_method"):
        XGBRankerModel(experts=(), **bad).fit(h100_slice.subset(h100_slice.problems[:4]))


def test_a_model_saved_before_the_reranker_still_predicts(h100_slice):
    """Models pickled before the re-ranker have no `reranker_`: they score as the blend."""
    pids = h100_slice.problems
    m = XGBRankerModel(experts=(), n_estimators=20, max_depth=3, n_jobs=1, rerank_top=0).fit(
        h100_slice.subset(pids[:20])
    )
    test = h100_slice.subset(pids[20:24])
    expected = m.predict(test)
    del m.reranker_
    np.testing.assert_array_equal(m.predict(test), expected)


def test_fits_side_by_side_are_the_fits_one_after_another(h100_slice):
    """With 2 threads the members and the re-ranker are fit side by side, one thread each; the model is the same as
    fitted one after another on one thread (XGBoost's trees do not depend on the thread count), and its boosters
    predict with the model's own thread setting."""
    import json

    train, test = h100_slice.subset(h100_slice.problems[:12]), h100_slice.subset(h100_slice.problems[12:16])
    kw = dict(n_estimators=25, max_depth=4, rerank_top=16, rerank_rows=24)
    one, two, auto = (XGBRankerModel(experts=(), **kw, n_jobs=n).fit(train) for n in (1, 2, None))
    for m in (two, auto):
        np.testing.assert_array_equal(m.predict(test), one.predict(test))
        assert m.feature_importances_ == one.feature_importances_
    for m, want in ((one, "1"), (two, "2"), (auto, "0")):
        for b in [*m.members_, m.reranker_]:
            assert json.loads(b.get_booster().save_config())["learner"]["generic_param"]["nthread"] == want
            assert b.n_jobs == m.n_jobs


def test_ignored_features_are_never_read(h100_slice):
    """ignore_features zeroes those columns in fit and predict: the model is the one fitted on data whose columns are
    zero, it gives them no importance, and any value there leaves its scores alone."""
    from autoheur.features import FEATURE_NAMES
    from autoheur.features.derived import CRIT_FEATURES

    cols = [FEATURE_NAMES.index(f) for f in CRIT_FEATURES]
    train, test = h100_slice.subset(h100_slice.problems[:12]), h100_slice.subset(h100_slice.problems[12:16])
    kw = dict(n_estimators=20, max_depth=4, rerank_top=16, rerank_rows=24, n_jobs=1)
    m = XGBRankerModel(experts=(), **kw, ignore_features=CRIT_FEATURES).fit(train)
    assert all(m.feature_importances_[f] == 0 for f in CRIT_FEATURES)
    zeroed = train.X.copy()
    zeroed[:, cols] = 0.0
    plain = XGBRankerModel(experts=(), **kw).fit(RankingSet(train.frame, zeroed, train.device))
    np.testing.assert_array_equal(
        m.predict(test), plain.predict(RankingSet(test.frame, _zero(test.X, cols), test.device))
    )
    noisy = test.X.copy()
    noisy[:, cols] = np.random.default_rng(0).normal(size=(len(noisy), len(cols)))
    np.testing.assert_array_equal(m.predict(RankingSet(test.frame, noisy, test.device)), m.predict(test))
    np.testing.assert_array_equal(m.predict_X(noisy[:50], None), m.predict_X(test.X[:50], None))
    assert train.X[:, cols].any(), "the slice must carry non-zero values in those columns, or this checks nothing"
    with pytest.raises(ValueError, match="unknown features"):
        XGBRankerModel(experts=(), **kw, ignore_features=("no_such_feature",)).fit(train)


def _zero(X: np.ndarray, cols: list[int]) -> np.ndarray:
    X = X.copy()
    X[:, cols] = 0.0
    return X


def test_query_weights_weigh_each_problem_by_its_features(h100_slice, monkeypatch):
    """query_weights gives XGBoost one weight per query, in query order: the product of the weights of the features
    that are nonzero for that problem; without them no weight is passed; bad weights and names are refused."""
    import xgboost as xgb

    from autoheur.features import FEATURE_NAMES

    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(
        xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append(kw.get("sample_weight")) or real(self, X, y, **kw)
    )
    train = h100_slice.subset(h100_slice.problems[:12])
    col = FEATURE_NAMES.index("a_k_major")
    per_problem = pd.Series(train.X[:, col] != 0).groupby(train.frame["problem_id"].to_numpy(), sort=False).first()
    assert per_problem.any() and not per_problem.all(), "the slice must mix both values, or this checks nothing"
    kw = dict(objective="rank:ndcg", n_estimators=5, max_depth=3, per_problem=None, n_jobs=1, rerank_top=8)
    XGBRankerModel(experts=(), **kw, query_weights=(("a_k_major", 3.0), ("layout_3d3d", 5.0))).fit(train)
    assert len(seen) == 2  # the member and the re-ranker, each weighted
    for w in seen:
        np.testing.assert_array_equal(w, np.where(per_problem.to_numpy(), 3.0, 1.0))  # no 3D x 3D in the slice
    seen.clear()
    XGBRankerModel(experts=(), **kw).fit(train)
    assert seen == [None, None]
    with pytest.raises(ValueError, match="positive"):
        XGBRankerModel(experts=(), **kw, query_weights=(("a_k_major", 0.0),)).fit(train)
    with pytest.raises(ValueError, match="unknown features"):
        XGBRankerModel(experts=(), **kw, query_weights=(("no_such_feature", 2.0),)).fit(train)
    with pytest.raises(ValueError, match="ignore_features zeroes"):
        XGBRankerModel(experts=(), **kw, query_weights=(("a_k_major", 2.0),), ignore_features=("a_k_major",)).fit(train)


def _by_layout(rs: RankingSet, two_d_two_d: bool) -> RankingSet:
    col = rs.X[:, FEATURE_NAMES.index("layout_2d2d")] != 0
    return rs.subset(rs.frame.loc[col == two_d_two_d, "problem_id"].unique())


def test_layout_experts_are_each_kinds_own_model(h100_slice):
    """The default routes 2D x 2D problems to a model fitted on them alone and the rest to one fitted on the rest:
    its scores are exactly those of the two single models fitted apart (XGBoost is deterministic here), both in
    `predict` over many problems and in `predict_X` (inference's path) for one."""
    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[::2]), h100_slice.subset(pids[1::2])
    kw = dict(n_estimators=6, max_depth=3, n_jobs=1, rerank_top=8)
    m = XGBRankerModel(**kw).fit(train)
    assert m.experts == ("layout_2d2d",) and sorted(m.experts_) == [0, 1]
    for two_d_two_d, e in ((True, 0), (False, 1)):
        part, part_test = _by_layout(train, two_d_two_d), _by_layout(test, two_d_two_d)
        assert len(part.problems) and len(part_test.problems), "the slice must hold both kinds, or this checks nothing"
        alone = XGBRankerModel(experts=(), **kw).fit(part)
        want = alone.predict(part_test)
        mask = test.frame["problem_id"].isin(set(part_test.problems)).to_numpy()
        np.testing.assert_array_equal(m.predict(test)[mask], want)
        one = part_test.subset(part_test.problems[:1])
        np.testing.assert_array_equal(m.predict_X(one.X, None), alone.predict_X(one.X, None))
        assert m.experts_[e].experts == () and m.experts_[e].experts_ is None
    total = sum(m.feature_importances_.values())
    assert np.isclose(total, 1.0, atol=1e-4)  # a problem-weighted mean of the experts' (each sums to 1)


def test_experts_fitted_side_by_side_are_the_experts_fitted_one_fit_after_another(h100_slice):
    """With 2 threads each expert's fits (the two members and the re-ranker here) run side by side (one thread
    each); the model is the one fitted one fit after another on one thread, expert by expert."""
    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[::2]), h100_slice.subset(pids[1::2])
    kw = dict(n_estimators=8, max_depth=3, rerank_top=8, rerank_rows=16, members=ENSEMBLE_MEMBERS)
    one, two = (XGBRankerModel(**kw, n_jobs=n).fit(train) for n in (1, 2))
    assert sorted(two.experts_) == [0, 1]
    np.testing.assert_array_equal(two.predict(test), one.predict(test))
    assert two.feature_importances_ == one.feature_importances_
    for e in one.experts_:
        assert two.experts_[e].reranker_ is not None and len(two.experts_[e].members_) == 2
    # where the time went: each expert's wall and each of its fits', by name
    fits = [f"member {o} seed 0" for o in ENSEMBLE_MEMBERS] + ["reranker"]
    for m in (one, two):
        want = [f"{name}: {job}" for name in ("layout_2d2d", "the rest") for job in ("all", *fits)]
        assert sorted(m.fit_seconds_) == sorted(want) and all(t > 0 for t in m.fit_seconds_.values())
        for name in ("layout_2d2d", "the rest"):
            assert m.fit_seconds_[f"{name}: all"] >= max(m.fit_seconds_[f"{name}: {job}"] for job in fits)


def test_a_kind_no_expert_saw_goes_to_the_largest(h100_slice):
    """Trained without 2D x 2D problems, the model has one expert, and a 2D x 2D problem is ranked by it rather
    than refused: inference must rank whatever problem it is given."""
    kw = dict(n_estimators=5, max_depth=3, n_jobs=1, rerank_top=0)
    train = _by_layout(h100_slice, False)
    m = XGBRankerModel(**kw).fit(train)
    assert list(m.experts_) == [1] and m.fallback_ == 1
    test = _by_layout(h100_slice, True)
    np.testing.assert_array_equal(m.predict(test), XGBRankerModel(experts=(), **kw).fit(train).predict(test))


def test_an_expert_with_its_own_rounds_is_that_model_fitted_alone(h100_slice):
    """`expert_rounds` gives the named expert its own trees and step: its scores are those of the single model
    fitted alone with that budget; the other expert keeps the model's budget."""
    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[::2]), h100_slice.subset(pids[1::2])
    kw = dict(n_estimators=6, learning_rate=0.1, max_depth=3, n_jobs=1, rerank_top=8)
    m = XGBRankerModel(**kw, expert_rounds=(("layout_2d2d", 9, 0.3),)).fit(train)
    assert (m.experts_[0].n_estimators, m.experts_[0].learning_rate) == (9, 0.3)
    assert (m.experts_[1].n_estimators, m.experts_[1].learning_rate) == (6, 0.1)
    for two_d_two_d, own in ((True, dict(n_estimators=9, learning_rate=0.3)), (False, {})):
        part, part_test = _by_layout(train, two_d_two_d), _by_layout(test, two_d_two_d)
        want = XGBRankerModel(experts=(), **{**kw, **own}).fit(part).predict(part_test)
        mask = test.frame["problem_id"].isin(set(part_test.problems)).to_numpy()
        np.testing.assert_array_equal(m.predict(test)[mask], want)
    other = XGBRankerModel(**kw, expert_rounds=(("rest", 9, 0.3),)).fit(train)
    assert (other.experts_[1].n_estimators, other.experts_[0].n_estimators) == (9, 6)


@pytest.mark.parametrize(
    "bad, match",
    [
        ((("layout_3d3d", 9, 0.3),), "expected \\(expert, trees, step\\)"),
        ((("layout_2d2d", 9),), "expected \\(expert, trees, step\\)"),
        ((("layout_2d2d", 0, 0.3),), "positive count"),
        ((("layout_2d2d", 9, 1.5),), "learning rate in"),
    ],
)
def test_expert_rounds_are_checked_before_any_fit(h100_slice, bad, match):
    train = h100_slice.subset(h100_slice.problems[:4])
    with pytest.raises(ValueError, match=match):
        XGBRankerModel(expert_rounds=bad).fit(train)
    with pytest.raises(ValueError, match="no experts"):
        XGBRankerModel(experts=(), expert_rounds=(("rest", 9, 0.3),)).fit(train)


def test_experts_must_name_a_known_feature_the_model_reads(h100_slice):
    train = h100_slice.subset(h100_slice.problems[:4])
    with pytest.raises(ValueError, match="unknown features"):
        XGBRankerModel(experts=("no_such_feature",)).fit(train)
    with pytest.raises(ValueError, match="route by another feature"):
        XGBRankerModel(experts=("layout_2d2d",), ignore_features=("layout_2d2d",)).fit(train)


def _with_other_device(rs: RankingSet, own: int, other: int) -> RankingSet:
    """The first `own` problems of `rs`, with the next `other` as another device's auxiliary data."""
    pids = rs.problems
    aux = rs.subset(pids[own : own + other])
    aux = RankingSet(aux.frame, aux.X, {**aux.device, "name": "Other GPU"})
    return rs.subset(pids[:own]).with_auxiliary([aux])


def test_aux_share_samples_fewer_rows_of_auxiliary_problems_in_every_fit(h100_slice, monkeypatch):
    """An auxiliary problem keeps `aux_share` of the member rows (its fastest share of `top` among them) and of the
    re-ranker's rows; the device's own problems keep exactly the rows they keep without it."""
    import xgboost as xgb

    from autoheur.models.data import AUX_PREFIX, sample_rows

    train = _with_other_device(h100_slice, 4, 4)
    seen = []
    real = xgb.XGBRanker.fit
    monkeypatch.setattr(xgb.XGBRanker, "fit", lambda self, X, y, **kw: seen.append(kw["qid"]) or real(self, X, y, **kw))
    model = XGBRankerModel(experts=(), n_estimators=5, max_depth=3, per_problem=40, top=8, aux_share=0.5,
                           rerank_top=8, rerank_rows=10, n_jobs=1)  # fmt: skip
    model.fit(train)
    member, rerank = (np.bincount(q).tolist() for q in seen)  # the lead member, then the re-ranker
    assert member == [40] * 4 + [20] * 4 and rerank == [10] * 4 + [5] * 4

    half = sample_rows(train, 40, 8, 0, aux_share=0.5).frame
    full = sample_rows(train, 40, 8, 0).frame
    is_aux = half["problem_id"].str.startswith(AUX_PREFIX)
    pd.testing.assert_frame_equal(half[~is_aux], full[~full["problem_id"].str.startswith(AUX_PREFIX)], check_exact=True)
    for pid, g in half[is_aux].groupby("problem_id"):
        fastest = np.sort(train.frame.loc[train.frame["problem_id"] == pid, "rel_time"].to_numpy())[:4]
        assert np.isin(fastest, g["rel_time"].to_numpy()).all()


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_bad_aux_share_is_refused(share, h100_slice):
    with pytest.raises(ValueError, match="aux_share"):
        XGBRankerModel(experts=(), aux_share=share).fit(h100_slice.subset(h100_slice.problems[:4]))


def test_max_bin_reaches_every_booster_and_changes_the_fit(h100_slice):
    """`max_bin` is passed to each XGBoost fit (members, re-ranker, and the regressor baseline), and fewer bins give
    other trees; a bad value is refused before any fit."""
    train, test = h100_slice.subset(h100_slice.problems[:12]), h100_slice.subset(h100_slice.problems[12:16])
    kw = dict(experts=(), n_estimators=10, max_depth=4, rerank_top=16, rerank_rows=24, n_jobs=1)
    coarse, fine = XGBRankerModel(**kw, max_bin=8).fit(train), XGBRankerModel(**kw).fit(train)
    for b in [*coarse.members_, coarse.reranker_]:
        assert b.get_params()["max_bin"] == 8
    assert all(b.get_params()["max_bin"] == 64 for b in [*fine.members_, fine.reranker_])  # the ranker's default
    assert not np.array_equal(coarse.predict(test), fine.predict(test))
    reg = RANKERS["xgb_regressor"](n_estimators=5, max_bin=8).fit(train)
    assert reg.model_.get_params()["max_bin"] == 8
    assert RANKERS["xgb_regressor"]().max_bin == 256 and family_params("inductor")["xgb_ranker"]["max_bin"] == 256
    for bad in (1, 0, 2.5, True, "64"):
        with pytest.raises(ValueError, match="max_bin"):
            XGBRankerModel(**kw, max_bin=bad).fit(train)
        with pytest.raises(ValueError, match="max_bin"):
            RANKERS["xgb_regressor"](max_bin=bad).fit(train)


@pytest.mark.parametrize("trees", [60, 20])  # two passes after the coarse one; a model of no more than coarse_trees
def test_near_best_cut_scores_the_configs_cut_below_the_others(trees, h100_slice):
    """With near_best_pct set, a config no training problem had within that percent of its oracle (and that the
    training data timed) scores below every kept one; with it 0, or on a model fitted before the cut, nothing changes
    (the default is 2)."""
    pids = h100_slice.problems
    m = XGBRankerModel(experts=(), n_estimators=trees, max_depth=3, n_jobs=1, rerank_top=12)
    m.shortlist = 16  # the slice's problems have ~2,000 configs: 16 and more stay after the cut
    m.fit(h100_slice.subset(pids[:20]))
    test = h100_slice.subset(pids[20:24])
    m.near_best_pct = 0
    plain = m.predict(test)
    m.near_best_pct = 2
    cut = m.predict(test)
    assert XGBRankerModel.near_best_pct == 2  # the default
    from autoheur.models.near_best import config_keys

    keys = config_keys(test.X)
    near = set(m.near_keys_[m.near_rel_ <= 1.02].tolist())
    kept = np.isin(keys, list(near)) | ~np.isin(keys, m.seen_keys_)
    assert 0 < kept.sum() < len(kept)
    for idx in test.frame.groupby("problem_id", sort=False).indices.values():
        k, out = idx[kept[idx]], idx[~kept[idx]]
        assert cut[k].min() > cut[out].max()
        # the configs cut keep their problem order among themselves (one score), the kept ones are ranked
        assert len(np.unique(cut[out])) == 1 and len(np.unique(cut[k])) > 1
    np.testing.assert_array_equal(m.predict(test), cut)  # again: each problem's mask from the cache
    other = XGBRankerModel(experts=(), n_estimators=trees, max_depth=3, n_jobs=1, rerank_top=12)
    other.shortlist = 16
    np.testing.assert_array_equal(other.fit(h100_slice.subset(pids[:20])).predict(test), cut)
    m.fit(h100_slice.subset(pids[4:24]))  # a refit of the same object: its own near-best set, not the cached masks
    refit = set(m.near_keys_[m.near_rel_ <= 1.02].tolist())
    assert refit != near
    kept = np.isin(config_keys(test.X), list(refit)) | ~np.isin(config_keys(test.X), m.seen_keys_)
    again = m.predict(test)
    for idx in test.frame.groupby("problem_id", sort=False).indices.values():
        assert again[idx[kept[idx]]].min() > again[idx[~kept[idx]]].max()
    m.fit(h100_slice.subset(pids[:20]))
    m.near_best_pct = 0
    np.testing.assert_array_equal(m.predict(test), plain)
    m.shortlist = 10**6  # fewer configs would stay than the shortlist: every config is scored, as without the cut
    whole = m.predict(test)
    m.near_best_pct = 2
    np.testing.assert_array_equal(m.predict(test), whole)
    m.shortlist = 16
    np.testing.assert_array_equal(m.predict(test), cut)
    del m.near_keys_  # a model fitted before the cut existed scores every config
    np.testing.assert_array_equal(m.predict(test), plain)


def test_sample_rows_draws_the_rest_from_the_eligible_rows_first(h100_slice):
    """`eligible`: each problem keeps its `top` fastest rows, and its other rows come from the eligible ones while
    it has enough of them, topped up from the rest where it has too few; the row count per problem is unchanged."""
    from autoheur.models.data import problem_rows, sample_rows

    rs = h100_slice.subset(h100_slice.problems[:6])
    rng = np.random.default_rng(1)
    eligible = rng.random(len(rs.frame)) < 0.3
    for _pid, idx in list(problem_rows(rs, None))[:2]:  # two problems with too few eligible rows to fill the sample
        eligible[idx] = False
        eligible[idx[:5]] = True
    plain = sample_rows(rs, 40, 8, 0)
    picked = sample_rows(rs, 40, 8, 0, eligible=eligible)
    assert picked.frame.groupby("problem_id").size().to_dict() == plain.frame.groupby("problem_id").size().to_dict()
    where = {pid: idx for pid, idx in problem_rows(rs, None)}
    pos = pd.Series(np.arange(len(rs.frame)), index=pd.MultiIndex.from_frame(rs.frame[["problem_id", "config_id"]]))
    for pid, g in picked.frame.groupby("problem_id"):
        rows = pos.loc[list(zip(g["problem_id"], g["config_id"], strict=True))].to_numpy()
        idx = where[pid]
        fastest = idx[np.argsort(rs.frame["rel_time"].to_numpy()[idx], kind="stable")[:8]]
        assert set(fastest) <= set(rows)
        rest = np.setdiff1d(rows, fastest)
        pool = np.setdiff1d(idx[eligible[idx]], fastest)
        if len(pool) >= 32:
            assert eligible[rest].all()
        else:
            assert set(pool) <= set(rest) and len(rest) == 32


def test_train_near_pct_samples_near_best_configs(h100_slice):
    """`train_near_pct`: apart from a problem's `top` fastest, the lead's rows are configs near-best (at that percent)
    in the training data; without it, many are not."""
    import xgboost as xgb

    from autoheur.models.near_best import config_keys

    train = h100_slice.subset(h100_slice.problems[:8])
    real = xgb.XGBRanker.fit

    def far_rows_per_problem(**settings):
        seen = []
        model = XGBRankerModel(experts=(), n_estimators=3, max_depth=3, per_problem=40, top=8, rerank_top=0, n_jobs=1,
                               **settings)  # fmt: skip
        try:
            xgb.XGBRanker.fit = lambda self, X, y, **kw: seen.append((X, kw["qid"])) or real(self, X, y, **kw)
            model.fit(train)
        finally:
            xgb.XGBRanker.fit = real
        (X, qid), *_ = seen
        near = np.isin(config_keys(X), model.near_keys_[model.near_rel_ <= 1.02])
        return np.bincount(qid[~near], minlength=qid.max() + 1)

    assert far_rows_per_problem().max() <= 8  # the default, 2
    assert far_rows_per_problem(train_near_pct=0).max() > 8


def test_near_rows_without_a_near_best_config_are_none(h100_slice):
    """A training set where no config came near any problem's best (every row failed) leaves no row eligible for
    `train_near_pct`, instead of indexing an empty table."""
    model = XGBRankerModel()
    model.near_keys_, model.near_rel_ = np.array([], dtype=np.int64), np.array([], dtype=np.float32)
    assert not model._near_rows(h100_slice.X[:5], 2, None).any()


def test_distinct_tail_fills_the_last_slots_with_the_next_configs_that_are_no_twins(h100_slice, twin_id):
    """With distinct_after = j (default 0: off), each problem's top 10 is the model's best j, then its next configs
    whose twin key no listed config has; every other config keeps its score. j >= distinct_len: the plain order."""
    pids = h100_slice.problems
    m = XGBRankerModel(experts=(), n_estimators=20, max_depth=3, n_jobs=1, rerank_top=12)
    m.fit(h100_slice.subset(pids[:20]))
    test = h100_slice.subset(pids[20:])
    assert m.distinct_after == 0 and m.distinct_len == 10  # the defaults
    plain = m.predict(test)
    m.distinct_after = 10
    np.testing.assert_array_equal(m.predict(test), plain)
    changed = 0
    for j in (8, 5):
        m.distinct_after = j
        tail = m.predict(test)
        ids = test.frame["config_id"].to_numpy()
        for idx in test.frame.groupby("problem_id", sort=False).indices.values():
            order = idx[np.argsort(-plain[idx], kind="stable")]
            want = list(order[:j])
            for i in order[j:]:
                if len(want) == 10:
                    break
                if twin_id(ids[i]) not in {twin_id(ids[w]) for w in want}:
                    want.append(i)
            got = idx[np.argsort(-tail[idx], kind="stable")]
            assert list(got[:10]) == want
            rest = np.setdiff1d(idx, want)
            np.testing.assert_array_equal(tail[rest], plain[rest])
            changed += want != list(order[:10])
    assert changed  # some list of the slice had a twin to skip


@pytest.mark.parametrize("bad", [-1, 2.5, True, "8"])
def test_distinct_after_must_be_a_count_of_slots(bad, h100_slice):
    with pytest.raises(ValueError, match="distinct_after"):
        XGBRankerModel(experts=(), n_estimators=2, distinct_after=bad).fit(h100_slice.subset(h100_slice.problems[:4]))


def test_a_hedge_fills_the_last_slots_from_the_fixed_list(h100_slice):
    """hedge = h: each problem's top 10 is the model's best 10 - h, then the training set's fixed list of 10 (in its
    order) less the configs already listed; every other config keeps its score. 0: the plain order."""
    from autoheur.models.baselines import FixedList

    pids = h100_slice.problems
    train, test = h100_slice.subset(pids[:20]), h100_slice.subset(pids[20:])
    m = XGBRankerModel(experts=(), n_estimators=20, max_depth=3, n_jobs=1, hedge=0).fit(train)
    assert m.hedge_ == 0 and m.hedge_keys_ == []
    plain = m.predict(test)
    listed = FixedList(10).fit(train).list_
    m.hedge_keys_ = rankers_mod.hedge_keys(train)
    assert len(m.hedge_keys_) == 10 == len(set(m.hedge_keys_))
    changed = 0
    for h in (4, 9):
        m.hedge_ = h
        hedged = m.predict(test)
        ids = test.frame["config_id"].astype(str).to_numpy()
        for idx in test.frame.groupby("problem_id", sort=False).indices.values():
            order = idx[np.argsort(-plain[idx], kind="stable")]
            want = list(order[: 10 - h])
            for c in listed:
                rows = [i for i in idx if ids[i] == c]
                if len(want) < 10 and rows and rows[0] not in want:
                    want.append(rows[0])
            got = idx[np.argsort(-hedged[idx], kind="stable")]
            assert list(got[: len(want)]) == want
            rest = np.setdiff1d(idx, want)
            np.testing.assert_array_equal(hedged[rest], plain[rest])
            changed += want != list(order[: len(want)])
    assert changed  # the list and the model disagree somewhere in the slice


def test_hedge_auto_takes_the_inner_cvs_best(h100_slice, monkeypatch):
    seen = []

    def fake(model, train, objective, folds=5):
        seen.append(set(train.problems))
        return {0: (0.95, 0.90), 4: (0.96, 0.80)}  # geomean first, then P10

    monkeypatch.setattr(rankers_mod, "select_hedge", fake)
    train = h100_slice.subset(h100_slice.problems[:12])
    m = XGBRankerModel(experts=(), objective="rank:ndcg", hedge="auto", n_estimators=5, max_depth=3, n_jobs=1)
    m.fit(train)
    assert m.hedge_ == 4 and len(m.hedge_keys_) == 10 and seen == [set(train.problems)]


def test_hedge_auto_picks_on_inner_folds_and_bad_hedges_are_refused(h100_slice):
    train = h100_slice.subset(h100_slice.problems[:16])
    m = XGBRankerModel(experts=(), objective="rank:ndcg", hedge="auto", n_estimators=10, max_depth=3, n_jobs=1)
    m.fit(train)
    assert set(m.hedge_selection_) == set(rankers_mod.HEDGES)
    assert m.hedge_ == max(m.hedge_selection_, key=m.hedge_selection_.get)
    assert (m.hedge_keys_ != []) == (m.hedge_ != 0)
    for bad in (-1, 10, 2.5, 4.0, True, "4"):
        with pytest.raises(ValueError, match="hedge="):
            XGBRankerModel(experts=(), n_estimators=2, hedge=bad).fit(train)
    for n in (1, 3):  # fewer problems than inner folds (an Inductor fit of a handful): fits, a fold a problem at most
        small = XGBRankerModel(experts=(), objective="rank:ndcg", hedge="auto", n_estimators=5, max_depth=3, n_jobs=1)
        small.fit(h100_slice.subset(h100_slice.problems[:n]))
        assert small.hedge_ in rankers_mod.HEDGES and (n > 1) == (
            set(small.hedge_selection_) == set(rankers_mod.HEDGES)
        )
    experts = XGBRankerModel(objective="rank:ndcg", hedge=4, n_estimators=5, max_depth=3, n_jobs=1).fit(h100_slice)
    assert experts.experts_ and experts.hedge_ == 4 and all(e.hedge_ == 4 for e in experts.experts_.values())
