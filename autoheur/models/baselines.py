"""The baselines the default ranker is measured against, on the rankers' interface (base.Ranker): the best single
fixed config, the best fixed list of k, the nearest training problem's configs, and random scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from autoheur.features.core import N_PROBLEM
from autoheur.models.base import Ranker
from autoheur.models.data import RankingSet

EFF_FLOOR = 0.01  # efficiency of an unusable config (a 100x slowdown) in the list baselines' objectives


def _efficiency_matrix(train: RankingSet) -> tuple[np.ndarray, list[str], list[str]]:
    """(problems x configs efficiency = oracle / time, floored; problem ids; config ids)."""
    f = train.frame
    eff = np.maximum(1.0 / f["rel_time"].to_numpy(), EFF_FLOOR)
    table = pd.DataFrame({"p": f["problem_id"].to_numpy(), "c": f["config_id"].to_numpy(), "e": eff})
    wide = table.pivot_table(index="p", columns="c", values="e", aggfunc="first", fill_value=EFF_FLOOR)
    return wide.to_numpy(dtype=float), list(wide.index), list(wide.columns)


class _ListRanker(Ranker):
    """A ranker that scores configs by id, the same for every problem."""

    uses_features = False

    def predict(self, data: RankingSet) -> np.ndarray:
        return self.predict_X(None, data.frame["config_id"].to_numpy())

    def predict_X(self, X, config_ids):
        return np.array([self.scores_.get(c, -np.inf) for c in config_ids], dtype=float)


class FixedBest(_ListRanker):
    name = "fixed_best"

    def __init__(self):  # no hyperparameters
        pass

    def fit(self, train: RankingSet) -> FixedBest:
        E, _, configs = _efficiency_matrix(train)
        g = np.exp(np.log(E).mean(axis=0))
        self.scores_ = dict(zip(configs, g.tolist(), strict=True))
        return self


class FixedList(_ListRanker):
    """Greedy cover: each next config adds the most to sum over problems of log(best efficiency in the list)."""

    name = "fixed_list"

    def __init__(self, k: int = 10):
        self.k = k

    def fit(self, train: RankingSet) -> FixedList:
        E, _, configs = _efficiency_matrix(train)
        L = np.log(E)
        chosen: list[int] = []
        best = np.full(E.shape[0], np.log(EFF_FLOOR))
        for _ in range(min(self.k, E.shape[1])):
            gain = np.maximum(L, best[:, None]).sum(axis=0)
            gain[chosen] = -np.inf
            j = int(np.argmax(gain))
            chosen.append(j)
            best = np.maximum(best, L[:, j])
        g = L.mean(axis=0)  # after the list: by geomean efficiency
        scores = {c: float(v) - 1e6 for c, v in zip(configs, g, strict=True)}
        for rank, j in enumerate(chosen):
            scores[configs[j]] = 1e6 - rank
        self.scores_ = scores
        self.list_ = [configs[j] for j in chosen]
        return self


class NearestProblem(Ranker):
    """The configs of the nearest training problem, fastest first (distance over standardized problem features)."""

    name = "nearest"

    def __init__(self, neighbors: int = 1):
        self.neighbors = neighbors

    def fit(self, train: RankingSet) -> NearestProblem:
        E, pids, configs = _efficiency_matrix(train)
        first = train.frame.drop_duplicates("problem_id").index.to_numpy()
        P = train.X[first, :N_PROBLEM].astype(float)
        order = pd.Index(train.frame["problem_id"].to_numpy()[first]).get_indexer(pids)
        P = P[order]
        self.mean_, self.scale_ = P.mean(axis=0), P.std(axis=0) + 1e-9
        self.P_ = (P - self.mean_) / self.scale_
        self.logE_ = np.log(E)
        self.col_ = {c: i for i, c in enumerate(configs)}
        return self

    def _scores(self, pvec: np.ndarray, config_ids) -> np.ndarray:
        d = ((self.P_ - (pvec - self.mean_) / self.scale_) ** 2).sum(axis=1)
        near = np.argsort(d, kind="stable")[: self.neighbors]
        mean = self.logE_[near].mean(axis=0)
        return np.array([mean[self.col_[c]] if c in self.col_ else -np.inf for c in config_ids])

    def predict(self, data: RankingSet) -> np.ndarray:
        out = np.empty(len(data.frame))
        cids = data.frame["config_id"].to_numpy()
        for idx in data.frame.groupby("problem_id", sort=False).indices.values():
            out[idx] = self._scores(data.X[idx[0], :N_PROBLEM].astype(float), cids[idx])
        return out

    def predict_X(self, X, config_ids):
        return self._scores(X[0, :N_PROBLEM].astype(float), config_ids)


class RandomRanker(Ranker):
    name = "random"
    uses_features = False

    def __init__(self, random_state: int = 0):
        self.random_state = random_state

    def fit(self, train: RankingSet) -> RandomRanker:
        self.fitted_ = True
        return self

    def predict(self, data: RankingSet) -> np.ndarray:
        return np.random.default_rng(self.random_state).random(len(data.frame))

    def predict_X(self, X, config_ids):
        return np.random.default_rng(self.random_state).random(len(config_ids))  # the ids give the count
