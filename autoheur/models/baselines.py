"""The baselines the default ranker is measured against, on the rankers' interface (base.Ranker): the best single
fixed config, the best fixed list of k, the nearest training problem's configs, and random scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from autoheur.features.core import N_PROBLEM
from autoheur.models.base import Ranker
from autoheur.models.data import RankingSet

EFF_FLOOR = 0.01  # efficiency of an unusable config (a 100x slowdown) in the list baselines' objectives
# fixed_best (and fixed_list after its list) ranks a config by its geomean efficiency over the training problems where
# it was a row; a config that was a row of fewer than MIN_SUPPORT of them (or of fewer than all, on a set of fewer
# problems) ranks after every config that was, by the same geomean. Why: on Inductor's template family a config is
# a row only where Inductor offered it (data.offered_rows: about a third of its grid a problem), and a geomean over
# one or two problems ranks a config by luck; over five, one failed problem (0.01) still holds the geomean of a
# config that is the oracle elsewhere to 0.40. On autoheur's own kernel a config is a row of every problem it can
# run (the problem's feasible space): nearly all of them (in the H100 dataset 1,234 of the 2,182 configs are no row of
# 23 of its 8,795 problems, whose operands TMA cannot read), and there a config is no longer counted a failure where
# the tuner would skip it, which moves fixed_best's order a little; the greedy cover (fixed_list, the fallback list)
# is the same either way (FixedList).
MIN_SUPPORT = 5


def _efficiency_matrix(train: RankingSet) -> tuple[np.ndarray, list[str], list[str]]:
    """(problems x configs efficiency = oracle / time, floored, NaN where the config is not a row of the problem;
    problem ids; config ids)."""
    f = train.frame
    eff = np.maximum(1.0 / f["rel_time"].to_numpy(), EFF_FLOOR)
    table = pd.DataFrame({"p": f["problem_id"].to_numpy(), "c": f["config_id"].to_numpy(), "e": eff})
    wide = table.pivot_table(index="p", columns="c", values="e", aggfunc="first")
    return wide.to_numpy(dtype=float), list(wide.index), list(wide.columns)


def supported_log_geomean(E: np.ndarray, min_support: int = MIN_SUPPORT) -> tuple[np.ndarray, np.ndarray]:
    """(each config's log geomean efficiency over the problems where it was a row, whether that is at least
    `min_support` problems, or all of them on a set of fewer) of an efficiency matrix with NaN where a config was not
    a row. Where every config is a row of every problem (autoheur's own kernel) it is the log geomean over all.

    Why not the floor where a config is not a row: on Inductor's template family a config is a row only where
    Inductor offered it, and counting the others as failures put the configs offered most often first, whatever they
    were worth where offered (fixed_best's best-of-10 fell below the random ranker's)."""
    rows = ~np.isnan(E)
    support = rows.sum(axis=0)
    mean = np.log(np.where(rows, E, 1.0)).sum(axis=0) / np.maximum(support, 1)
    return mean, support >= min(min_support, E.shape[0])


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
        log_g, supported = supported_log_geomean(E)
        g = np.exp(log_g)
        self.scores_ = dict(zip(configs, np.where(supported, g, g - 1.0).tolist(), strict=True))  # g - 1 <= 0 < 0.01
        return self


class FixedList(_ListRanker):
    """Greedy cover: each next config adds the most to sum over problems of log(best efficiency in the list), then
    the other configs as fixed_best ranks them.

    A config that is not a row of a problem (Inductor did not offer it there) adds nothing to that problem: its
    efficiency counts as the floor, which is where each problem's best starts, so max(floor, best) is the best
    already. That is what a list does at run time (an absent config is skipped), so the cover needs no support rule;
    its first pick is the config of the highest floored geomean, fixed_best's own pick wherever every config is a
    row of every problem."""

    name = "fixed_list"

    def __init__(self, k: int = 10):
        self.k = k

    def fit(self, train: RankingSet) -> FixedList:
        E, _, configs = _efficiency_matrix(train)
        log_g, supported = supported_log_geomean(E)
        after = np.where(supported, log_g, log_g - 1e3)  # after the list: as fixed_best ranks them
        L = np.log(np.nan_to_num(E, nan=EFF_FLOOR))
        chosen: list[int] = []
        best = np.full(E.shape[0], np.log(EFF_FLOOR))
        for _ in range(min(self.k, E.shape[1])):
            gain = np.maximum(L, best[:, None]).sum(axis=0)
            gain[chosen] = -np.inf
            j = int(np.argmax(gain))
            chosen.append(j)
            best = np.maximum(best, L[:, j])
        scores = {c: float(v) - 1e6 for c, v in zip(configs, after, strict=True)}
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
        # A feature no training problem varies (std 0: e.g. the device's fields, for another GPU's problem) is scaled
        # by 1: it adds the same distance to every neighbour. Scaled by ~0 it swamped the others in float64.
        std = P.std(axis=0)
        self.mean_, self.scale_ = P.mean(axis=0), np.where(std > 0, std, 1.0)
        self.P_ = (P - self.mean_) / self.scale_
        self.logE_ = np.log(np.nan_to_num(E, nan=EFF_FLOOR))  # a config the neighbour lacks: as its failures
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
