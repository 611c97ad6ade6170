"""The baselines: their definitions on hand-made data, and the nearest problem on real data (their scikit-learn
contract is tested with every ranker's, in test_rankers.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from autoheur.models.baselines import FixedBest, FixedList, NearestProblem
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
