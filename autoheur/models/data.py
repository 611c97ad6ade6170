"""Training and evaluation data: a collected dataset as ranking queries (one query = one problem).

`RankingSet` holds the dataset rows sorted by problem (the order learning-to-rank needs), the feature matrix, each
row's time relative to its problem's oracle (the fastest "ok" config) and its graded relevance label. Subsets by
problem keep all three aligned. Problems with no ok config, and problems whose calls never launch the kernel (an
empty output: `problem.launches_kernel`), are left out: there is nothing to learn or score in them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from autoheur.features import feature_matrix
from autoheur.models.metrics import USABLE_STATUSES, relevance
from autoheur.problem import launches_kernel

COLUMNS = ["problem_id", "problem_name", "layout", "dtype", "a_major", "b_major", "groups", "total", "m", "n", "k",
           "size_mean", "size_max", "size_min", "size_std", "empty_groups", "sizes", "config_id", "block_m", "block_n",
           "block_k", "num_stages", "num_warps", "group_m", "load", "warp_specialize", "median_ms", "reps", "censored",
           "status"]  # fmt: skip


def family(name: str) -> str:
    """The model family of a problem name ('deepseek-v3/gate_up/...' -> 'deepseek-v3'); 'sampled' for the rest."""
    head = str(name).split("/", 1)[0]
    return head or "unnamed"


@dataclass
class RankingSet:
    frame: pd.DataFrame  # dataset rows, grouped by problem (contiguous), with rel_time, label, family
    X: np.ndarray  # features, row-aligned with frame
    device: dict  # the fingerprint the features were computed with

    @classmethod
    def from_frame(cls, df: pd.DataFrame, device: Mapping) -> RankingSet:
        df = df.sort_values(["problem_id", "config_id"], kind="stable").reset_index(drop=True)
        usable = df["status"].isin(USABLE_STATUSES).to_numpy()
        ok = (df["status"] == "ok").to_numpy()
        t = np.where(usable, df["median_ms"].to_numpy(dtype=float), np.inf)
        oracle = pd.Series(np.where(ok, t, np.inf)).groupby(df["problem_id"].to_numpy()).transform("min").to_numpy()
        keep = np.isfinite(oracle)  # a problem with no ok config has no oracle: nothing to learn or score
        per_problem = df.drop_duplicates("problem_id").set_index("problem_id")
        launching = {pid: launches_kernel(r.layout, r.total) for pid, r in per_problem.iterrows()}
        keep &= df["problem_id"].map(launching).to_numpy(dtype=bool)  # no launch, no config to learn or score
        df, t, oracle = df[keep].reset_index(drop=True), t[keep], oracle[keep]
        df["rel_time"] = t / oracle
        labels = np.zeros(len(df), dtype=np.int64)
        times, statuses = df["median_ms"].to_numpy(dtype=float), df["status"].to_numpy(dtype=object)
        for _, idx in df.groupby("problem_id", sort=False).indices.items():
            labels[idx] = relevance(times[idx], statuses[idx])
        df["label"] = labels
        df["family"] = df["problem_name"].map(family)
        X = np.ascontiguousarray(feature_matrix(df, df, device))
        return cls(df, X, dict(device))

    @property
    def problems(self) -> np.ndarray:
        return self.frame["problem_id"].unique()

    def subset(self, problem_ids: Iterable[str]) -> RankingSet:
        mask = self.frame["problem_id"].isin(set(problem_ids)).to_numpy()
        return RankingSet(self.frame[mask].reset_index(drop=True), self.X[mask], self.device)

    def query_sizes(self) -> np.ndarray:
        """Rows per problem in frame order (XGBoost's `group`)."""
        codes = pd.factorize(self.frame["problem_id"], sort=False)[0]
        return np.bincount(codes)

    def data_hash(self) -> str:
        """Fingerprint of the training data: problem ids, configs and times."""
        h = hashlib.sha256()
        h.update(pd.util.hash_pandas_object(self.frame[["problem_id", "config_id", "median_ms", "status"]]).values)
        return h.hexdigest()[:16]


def check_kernel(meta, path: str | Path) -> None:
    """Refuse a dataset of autoheur's kernel whose timings were taken on another version of that kernel's source.

    The timings rank configs of the kernel that ran; an edited kernel (a new schedule, a new epilogue) moves them, so
    a model trained or scored on them would describe a kernel that is no longer installed."""
    from autoheur.collect.schema import kernel_source_hash

    if meta.family != "triton":  # Inductor's template: its own source hash, checked with its grid
        return
    installed = kernel_source_hash()
    if meta.kernel_hash != installed:
        raise ValueError(
            f"{path} was timed on kernel source {meta.kernel_hash or '(unrecorded)'}, but the installed "
            f"autoheur/kernels/grouped_gemm.py hashes to {installed}: its timings describe another kernel. "
            f"Re-collect it (autoheur collect --out {path} --new-dataset, see BENCHMARKS.md 'Collection'), or pass "
            "--allow-stale-kernel to train or evaluate on the old timings knowingly"
        )


def load_dataset(path: str | Path, allow_stale_kernel: bool = False) -> tuple[pd.DataFrame, dict, str]:
    """(rows, device fingerprint, space hash) of a dataset directory, validated part by part; a dataset timed on
    another version of the kernel is refused unless `allow_stale_kernel`."""
    from autoheur.collect.store import DatasetStore

    store = DatasetStore.load(Path(path))
    if not allow_stale_kernel:
        check_kernel(store.meta, path)
    return store.read(COLUMNS), dict(store.meta.device), store.meta.space_hash


def load_ranking_set(path: str | Path, allow_stale_kernel: bool = False) -> RankingSet:
    df, device, _ = load_dataset(path, allow_stale_kernel)
    return RankingSet.from_frame(df, device)


__all__ = ["COLUMNS", "RankingSet", "check_kernel", "family", "load_dataset", "load_ranking_set"]
