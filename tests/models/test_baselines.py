"""The baselines: their definitions on hand-made data, and the nearest problem on real data (their scikit-learn
contract is tested with every ranker's, in test_rankers.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoheur.models.baselines import EFF_FLOOR, MIN_SUPPORT, FixedBest, FixedList, NearestProblem
from autoheur.models.data import RankingSet, family


def _toy(times: dict[str, dict[str, float]]) -> RankingSet:
    """A RankingSet by hand: problem -> config -> time (features are not used by the list baselines)."""
    rows = [{"problem_id": p, "problem_name": f"fam{p}/x", "config_id": c, "median_ms": t, "status": "ok"}
            for p, cs in times.items() for c, t in cs.items()]  # fmt: skip
    f = pd.DataFrame(rows)
    best = f.groupby("problem_id")["median_ms"].transform("min")
    f["rel_time"] = f["median_ms"] / best
    f["label"] = 0
    f["family"] = f["problem_name"].map(family)
    return RankingSet(f, np.zeros((len(f), 1), dtype=np.float32), {"name": "toy"})


def test_fixed_best_is_the_best_geomean_config():
    rs = _toy({"p1": {"a": 1.0, "b": 1.1, "c": 3.0}, "p2": {"a": 2.0, "b": 1.0, "c": 1.0}})
    # geomean efficiency: a = sqrt(1 * 0.5) = .707, b = sqrt(1/1.1 * 1) = .953, c = sqrt(1/3 * 1) = .577
    m = FixedBest().fit(rs)
    assert sorted(m.scores_, key=m.scores_.get, reverse=True) == ["b", "a", "c"]


def test_fixed_list_is_a_greedy_cover():
    rs = _toy({"p1": {"a": 1.0, "b": 1.05, "c": 5.0}, "p2": {"a": 5.0, "b": 1.05, "c": 1.0}})
    m = FixedList(k=2).fit(rs)
    assert m.list_[0] == "b"  # the best single config over both problems
    assert m.list_[1] in ("a", "c")  # then what adds the most: either oracle
    scores = m.predict(rs)
    top2 = set(rs.frame.loc[np.argsort(-scores)[:2], "config_id"]) | set()
    assert "b" in top2


def test_nearest_uses_the_closest_problem(h100_slice):
    pids = h100_slice.problems
    m = NearestProblem().fit(h100_slice)
    one = h100_slice.subset([pids[3]])
    s = m.predict(one)  # its own nearest problem is itself: its oracle config ranks first
    assert one.frame["rel_time"].to_numpy()[np.argmax(s)] == 1.0


def test_nearest_reads_a_feature_constant_in_training_as_the_same_for_every_neighbour(h100_slice):
    """A problem feature that no training problem varies (e.g. the device's `log2_ridge`, another GPU's problem in a
    cross-device split) adds the same distance to every neighbour: the nearest stays the nearest. Scaled by its
    std + 1e-9 it added ~1e17 to every distance, and float64 lost the other features' differences under it."""
    m = NearestProblem().fit(h100_slice)
    constant = np.flatnonzero(h100_slice.X[:, : m.P_.shape[1]].std(axis=0) == 0)
    assert len(constant)  # the slice is one device's: its fields, at least, are constant
    for pid in h100_slice.problems[:8]:
        one = h100_slice.subset([pid])
        moved = RankingSet(one.frame, one.X.copy(), one.device)
        moved.X[:, constant] += 0.5  # the same shift for every training problem: no neighbour is nearer
        np.testing.assert_array_equal(m.predict(moved), m.predict(one))


def _floored_efficiency(rs: RankingSet) -> pd.DataFrame:
    """The problems x configs efficiency table as the baselines built it before the support rule: a config that is
    not a row of a problem filled in as a failure (EFF_FLOOR)."""
    f = rs.frame
    eff = np.maximum(1.0 / f["rel_time"].to_numpy(), EFF_FLOOR)
    table = pd.DataFrame({"p": f["problem_id"].to_numpy(), "c": f["config_id"].to_numpy(), "e": eff})
    return table.pivot_table(index="p", columns="c", values="e", aggfunc="first", fill_value=EFF_FLOOR)


def test_list_baselines_are_unchanged_where_every_config_is_a_row(h100_slice):
    # autoheur's own kernel: every config a row of every problem (the slice: 30 problems x 240 configs), where the
    # support rule must give the scores and lists the floored table gave (the baselines' figures before it)
    assert h100_slice.frame.groupby("problem_id", observed=True).size().eq(240).all()
    wide = _floored_efficiency(h100_slice)
    L = np.log(wide.to_numpy())
    best = FixedBest().fit(h100_slice)
    assert best.scores_ == dict(zip(wide.columns, np.exp(L.mean(axis=0)).tolist(), strict=True))
    fixed = FixedList(k=10).fit(h100_slice)
    chosen, cover = [], np.full(len(wide), np.log(EFF_FLOOR))
    for _ in range(10):  # the greedy cover over the floored table, as FixedList.fit wrote it
        gain = np.maximum(L, cover[:, None]).sum(axis=0)
        gain[chosen] = -np.inf
        chosen.append(int(np.argmax(gain)))
        cover = np.maximum(cover, L[:, chosen[-1]])
    scores = {c: float(v) - 1e6 for c, v in zip(wide.columns, L.mean(axis=0), strict=True)}
    scores.update({wide.columns[j]: 1e6 - r for r, j in enumerate(chosen)})
    assert fixed.list_ == [wide.columns[j] for j in chosen]
    assert fixed.scores_ == scores
    assert fixed.list_[0] == max(best.scores_, key=best.scores_.get)  # its top-1 is fixed_best's here
    np.testing.assert_array_equal(NearestProblem().fit(h100_slice).logE_, L)


def _offered(eff: dict[str, dict[str, float]]) -> RankingSet:
    """A toy set from problem -> config -> efficiency (1 / relative time; 0: a failed row), each problem's best at 1."""
    return _toy({p: {c: 1.0 / e if e else np.inf for c, e in cs.items()} for p, cs in eff.items()})


def test_fixed_best_scores_a_config_where_it_was_a_row():
    # Inductor's template family: a config is a row only where it was offered. "often" is offered everywhere and
    # middling; "good" is the oracle on the 6 problems it was offered; "rare", on 2, below MIN_SUPPORT
    eff = {f"p{i}": {"often": 0.5, "top": 1.0} for i in range(10)}
    for i in range(6):
        eff[f"p{i}"]["good"] = 0.95
    for i in range(2):
        eff[f"p{i}"]["rare"] = 0.99
    m = FixedBest().fit(_offered(eff))
    order = sorted(m.scores_, key=m.scores_.get, reverse=True)
    # floored, "good" scored 0.95**0.6 * 0.01**0.4 = 0.15 and fell below "often"
    assert order == ["top", "good", "often", "rare"]
    assert m.scores_["good"] == pytest.approx(0.95)
    assert MIN_SUPPORT > 2 and m.scores_["rare"] < 0 < m.scores_["often"]
    fixed = FixedList(k=1).fit(_offered(eff))  # after its list, the other configs as fixed_best ranks them
    assert sorted(fixed.scores_, key=fixed.scores_.get, reverse=True) == order


def test_fixed_list_skips_a_config_that_was_not_offered_as_it_would_a_failure():
    # the greedy cover counts a config absent from a problem as the floor, where each problem's cover starts: the
    # same list as with the config there as a failed row
    rng = np.random.default_rng(1)
    eff = {f"p{i}": {f"c{j}": float(rng.uniform(0.2, 1.0)) for j in range(12) if rng.random() < 0.4} for i in range(20)}
    eff = {p: {**cs, "c0": 1.0} for p, cs in eff.items()}  # an oracle row in each
    failed = {p: {**cs, **{f"c{j}": 0.0 for j in range(12) if f"c{j}" not in cs}} for p, cs in eff.items()}
    absent, there = FixedList(k=6).fit(_offered(eff)), FixedList(k=6).fit(_offered(failed))
    assert absent.list_ == there.list_
