"""The rankers' base class: one query per problem, the scikit-learn contract (rankers.py's docstring)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autoheur.features import problem_config_matrix
from autoheur.models.data import RankingSet


class Ranker:
    """Base: `rank` for one new problem, by way of `predict` on a one-problem set."""

    name = "ranker"
    uses_features = True
    uses_ids = True  # whether predict_X reads the config ids (building them costs ~2 ms per 2,000 configs)

    def get_params(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    def fit(self, train: RankingSet) -> Ranker:
        raise NotImplementedError

    def predict(self, data: RankingSet) -> np.ndarray:
        raise NotImplementedError

    def predict_X(self, X: np.ndarray, config_ids: Sequence[str]) -> np.ndarray:
        """Scores from a feature matrix (rows = configs of one problem) and their config ids."""
        raise NotImplementedError

    def rank(self, problem, configs: Sequence, device) -> np.ndarray:
        """Scores of `configs` (KernelConfig) for `problem` on `device` (a fingerprint mapping)."""
        X = problem_config_matrix(problem, configs, device) if self.uses_features else None
        return self.predict_X(X, [c.config_id for c in configs] if self.uses_ids else None)
