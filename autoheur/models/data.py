"""Training and evaluation data: a collected dataset as ranking queries (one query = one problem).

`RankingSet` holds the dataset rows sorted by problem (the order learning-to-rank needs), the feature matrix, each
row's time relative to its problem's oracle (the fastest "ok" config) and its graded relevance label. Subsets by
problem keep all three aligned. Problems with no ok config, and problems whose calls never launch the kernel (an
empty output: `problem.launches_kernel`), are left out: there is nothing to learn or score in them.

A dataset of Inductor's own template (`collect --family inductor`) keeps only the choices Inductor offered for each
problem (`offered_rows`): the grid points it pruned for a shape (status "invalid") are never offered, so its choice
filter (autoheur.inductor.filter) never ranks them, and neither training nor the held-out figures do.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from autoheur.features import feature_matrix
from autoheur.models.metrics import USABLE_STATUSES, relevance
from autoheur.problem import launches_kernel

AUX_PREFIX = "aux:"  # the problem ids of auxiliary (other-device) training queries: see RankingSet.with_auxiliary
# An auxiliary dataset is thinned as it loads (load_auxiliary): each problem keeps AUX_ROWS rows, its fastest quarter
# of them and a uniform sample of the rest, as sample_rows picks a fit's rows. Why: a fit reads at most a few hundred
# rows of a problem (the ranker's 48, the regressor baseline's 384, of 2,182), and the H100 set whole (19.2 M rows)
# beside the H200's own (8.0 M) is more than the 24 GB host holds; thinned, it is 4.5 M. A fit's sample of a thinned
# problem is a sample of the whole problem as well (its fastest rows are all kept), though not the same draw.
AUX_ROWS = 512

COLUMNS = ["problem_id", "problem_name", "layout", "dtype", "a_major", "b_major", "groups", "total", "m", "n", "k",
           "size_mean", "size_max", "size_min", "size_std", "empty_groups", "sizes", "config_id", "block_m", "block_n",
           "block_k", "num_stages", "num_warps", "group_m", "load", "warp_specialize", "median_ms", "reps", "censored",
           "status"]  # fmt: skip
# Text columns a RankingSet holds as pandas categoricals: a few thousand distinct values over millions of rows. As
# strings they were 3.2 of the H100 set's 9.4 GB (frame and features, 7,999 problems); as category codes, 0.2 GB.
CATEGORICAL = ("problem_id", "problem_name", "layout", "dtype", "a_major", "b_major", "config_id", "load", "status",
               "family")  # fmt: skip


def family(name: str) -> str:
    """The model family of a problem name ('deepseek-v3/gate_up/...' -> 'deepseek-v3'); 'sampled' for the rest."""
    head = str(name).split("/", 1)[0]
    return head or "unnamed"


@dataclass
class RankingSet:
    frame: pd.DataFrame  # dataset rows, grouped by problem (contiguous), with rel_time, label, family; text as category
    X: np.ndarray  # features, row-aligned with frame
    device: dict  # the fingerprint the features were computed with
    thin: int | None = None  # rows kept a problem where loaded thinned (load_ranking_set's `thin`); None: every row
    # Problems left out as the set was built for having no "ok" config (no oracle to measure against: every config
    # failed or was censored). Counted by `from_frame`, summed by `merge_by_problem`; a subset of the set does not
    # carry it. No shipped dataset has one; `autoheur eval` reports the count (eval_datasets.EVAL_NO_ORACLE).
    no_oracle: int = 0

    @classmethod
    def from_frame(cls, df: pd.DataFrame, device: Mapping) -> RankingSet:
        df = df.sort_values(["problem_id", "config_id"], kind="stable").reset_index(drop=True)
        usable = df["status"].isin(USABLE_STATUSES).to_numpy()
        ok = (df["status"] == "ok").to_numpy()
        t = np.where(usable, df["median_ms"].to_numpy(dtype=float), np.inf)
        oracle = pd.Series(np.where(ok, t, np.inf)).groupby(df["problem_id"].to_numpy()).transform("min").to_numpy()
        keep = np.isfinite(oracle)  # a problem with no ok config has no oracle: nothing to learn or score
        no_oracle = int(df["problem_id"][~keep].nunique())
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
        # Each row's group sizes are one array object per row (2,182 per problem): 0.6 GB on the H200 set, read by
        # nothing after the features, which hold their statistics.
        return cls(_categorical(df.drop(columns=["sizes"], errors="ignore")), X, dict(device), no_oracle=no_oracle)

    @property
    def problems(self) -> np.ndarray:
        return np.asarray(self.frame["problem_id"].unique(), dtype=object)

    def subset(self, problem_ids: Iterable[str]) -> RankingSet:
        mask = self.frame["problem_id"].isin(set(problem_ids)).to_numpy()
        return RankingSet(self.frame[mask].reset_index(drop=True), self.X[mask], self.device, self.thin)

    def with_auxiliary(
        self,
        aux: Sequence[RankingSet],
        leave_out: Iterable[str] = (),
        leave_out_families: Iterable[str] = (),
        problems: Iterable[str] | None = None,
    ) -> RankingSet:
        """This set (or its rows of `problems`: `self.subset(problems).with_auxiliary(...)` without the copy in
        between) plus the rows of other devices' sets, as queries of their own, to train on.

        An auxiliary problem's id becomes `aux:<device name>:<id>` (the same problem timed on two devices is two
        queries, each ranked against its own oracle); its features were computed with its own device's fingerprint,
        so a model learns what the devices share and, through the device features, where they differ. Left out:
        the auxiliary rows of the problems in `leave_out` (a fold's test problems: the same problem on another GPU
        would tell the model its ranking) and of the families in `leave_out_families` (a held-out model family).
        `device` stays this set's. Scoring is never done on the result: only fitting.
        """
        own = None if problems is None else self.frame["problem_id"].isin(set(problems)).to_numpy()
        parts: list[tuple[RankingSet, np.ndarray | None, str]] = [(self, own, "")]
        skip, skip_fam = set(leave_out), set(leave_out_families)
        for a in aux:
            _check_other_device(a, self)
            f = a.frame
            keep = ~f["problem_id"].isin(skip).to_numpy() & ~f["family"].isin(skip_fam).to_numpy()
            parts.append((a, keep, f"{AUX_PREFIX}{a.device.get('name')}:"))
        if len(parts) == 1:
            return self if own is None else self.subset(problems)
        return _stack(parts, self.device)

    def query_sizes(self) -> np.ndarray:
        """Rows per problem in frame order (XGBoost's `group`)."""
        codes = pd.factorize(self.frame["problem_id"], sort=False)[0]
        return np.bincount(codes)

    def data_hash(self) -> str:
        """Fingerprint of the training data: problem ids, configs and times."""
        h = hashlib.sha256()
        h.update(pd.util.hash_pandas_object(self.frame[["problem_id", "config_id", "median_ms", "status"]]).values)
        return h.hexdigest()[:16]


def rows_of(rs: RankingSet, rows: np.ndarray) -> RankingSet:
    """The set of `rs`'s rows at the indices `rows`."""
    return RankingSet(rs.frame.iloc[rows].reset_index(drop=True), rs.X[rows], rs.device)


def problem_rows(rs: RankingSet, within: np.ndarray | None) -> list[tuple[str, np.ndarray]]:
    """Each problem's (id, row indices), in frame order; only the problems whose rows `within` (a row mask, or None:
    all) holds. Problems, not rows: a layout expert's rows are whole problems.

    A set's problems are contiguous (RankingSet.frame), so each one's rows are read off where the id changes: a
    pass over the codes of the id column instead of pandas' groupby, which took 0.4-0.9 s a call on the 20 million
    rows of the H100 fit (four calls a fit; BENCHMARKS.md, "Learned ranking", stop 67). A frame whose problems are not
    contiguous takes the groupby, which gives the same (ids in order of first appearance, rows ascending)."""
    col = rs.frame["problem_id"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, ids = col.cat.codes.to_numpy(), col.cat.categories
    else:
        codes, ids = pd.factorize(col, sort=False)
    if not len(codes):
        return []
    starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    starts = np.concatenate([[0], starts])
    if np.bincount(codes[starts]).max() > 1:  # a problem in two runs: not contiguous
        groups = rs.frame.groupby("problem_id", sort=False, observed=True).indices.items()
        return [(pid, idx) for pid, idx in groups if within is None or within[idx[0]]]
    ends = np.append(starts[1:], len(codes))
    if within is not None:
        keep = within[starts]
        starts, ends = starts[keep], ends[keep]
    names = ids[codes[starts]]
    return [(pid, np.arange(a, b)) for pid, a, b in zip(names, starts.tolist(), ends.tolist(), strict=True)]


def aux_scaled(count: int, pid: str, aux_share: float) -> int:
    """The rows a problem keeps: `count`, or `aux_share` of it for another device's problem (with_auxiliary)."""
    if aux_share == 1.0 or not str(pid).startswith(AUX_PREFIX):
        return count
    return max(1, round(count * aux_share))


def problem_seed(problem_id: str) -> int:
    """A seed of a problem's own, from its id (stable across processes, unlike hash())."""
    return int.from_bytes(hashlib.sha256(str(problem_id).encode()).digest()[:8], "little")


def sample_rows(
    rs: RankingSet,
    per_problem: int | None,
    top: int,
    seed: int | None,
    within=None,
    aux_share: float = 1.0,
    eligible: np.ndarray | None = None,
) -> RankingSet:
    """Keep each problem's `top` fastest rows and a random share of the rest, `per_problem` rows in all (an auxiliary
    problem: `aux_share` of both); only the problems of `within` (a row mask; None: all). The result is the same as
    that of the problems taken out first, without copying them out of a large set. `eligible` (a row mask): the rest
    is drawn from its rows first, and from the others only where a problem has too few of them. `seed` None: each
    problem draws from a generator seeded by its own id (problem_seed), so what it keeps does not depend on the other
    problems of the set (a thinned load: load_ranking_set)."""
    if per_problem is None:
        return rs if within is None else rows_of(rs, np.flatnonzero(within))
    shared = None if seed is None else np.random.default_rng(seed)
    keep = []
    rel = rs.frame["rel_time"].to_numpy()
    for pid, idx in problem_rows(rs, within):
        n, t = aux_scaled(per_problem, pid, aux_share), aux_scaled(top, pid, aux_share)
        if len(idx) <= n:
            keep.append(idx)
            continue
        rng = shared if shared is not None else np.random.default_rng(problem_seed(pid))
        order = idx[np.argsort(rel[idx], kind="stable")]
        if eligible is None:
            rest = rng.choice(order[t:], size=n - t, replace=False)
        else:
            pool = order[t:][eligible[order[t:]]]
            if len(pool) >= n - t:
                rest = rng.choice(pool, size=n - t, replace=False)
            else:
                other = order[t:][~eligible[order[t:]]]
                rest = np.concatenate([pool, rng.choice(other, size=n - t - len(pool), replace=False)])
        keep.append(np.sort(np.concatenate([order[:t], rest])))
    return rows_of(rs, np.concatenate(keep))


def _check_other_device(aux: RankingSet, own: RankingSet) -> None:
    """Refuse auxiliary data of the training data's own device: such datasets are merged, not borrowed."""
    if aux.device.get("name") == own.device.get("name"):
        raise ValueError(
            f"an auxiliary dataset of {aux.device.get('name')!r}, the device of the training data itself: "
            "merge such datasets (autoheur data merge) instead of adding one as auxiliary data"
        )


def _stack(
    parts: Sequence[tuple[RankingSet, np.ndarray | None, str]], device: dict, consume_first: bool = False
) -> RankingSet:
    """The rows of each (set, mask or None for all, prefix for its problem ids) as one set, built column by column.

    Why not subset each set and concatenate: that holds every part's selected rows twice (the copies, then the
    result). With the H100 set as the H200's auxiliary data, a leave-one-family-out fold's training set is about
    8 GB, and that double copy took the evaluation past the 24 GB of the 2-core host. `consume_first`: the first
    part's columns and features are taken out of it as they are placed (TrainingPool.build, which then makes it a
    view of the result), so its frame is not held twice; it is left without columns or features."""
    sizes = [len(rs.frame) if m is None else int(m.sum()) for rs, m, _ in parts]
    first = parts[0][0]
    columns = {}
    for col in list(first.frame.columns):
        pieces = []
        for i, (rs, m, prefix) in enumerate(parts):
            piece = (
                (rs.frame.pop(col) if consume_first and i == 0 else rs.frame[col]) if m is None else rs.frame[col][m]
            )
            if col == "problem_id" and prefix:
                piece = _prefixed(piece, prefix)
            pieces.append(piece)
        columns[col] = _concat(pieces)
        del pieces
    X = np.empty((sum(sizes), first.X.shape[1]), dtype=first.X.dtype)
    at = 0
    for (rs, m, _), n in zip(parts, sizes, strict=True):
        if m is None:
            X[at : at + n] = rs.X
        else:
            np.compress(m, rs.X, axis=0, out=X[at : at + n])
        at += n
    if consume_first:
        first.X = None
    return RankingSet(pd.DataFrame(columns, copy=False), X, device)


@dataclass
class TrainingPool:
    """Every row a run of fits trains on, stacked once: a set's own rows first, then each auxiliary set's with its
    ids prefixed (as `RankingSet.with_auxiliary` gives them). A fold's training set is a row mask over it (`rows`),
    which a model that fits on a mask (`fits_rows`: XGBRankerModel, whose fits read a sample of each problem's rows)
    reads in place; another model gets the masked rows copied (`fit_rows`).

    Why: `with_auxiliary` copied each fold's training rows (four fifths of the own set, and the auxiliary rows) beside
    the sets they came from, and the final fit copied them all: `autoheur train` of the H200 model peaked at 20.9 GB
    on the 2-core host's 24 at stop 73, 2 GB more for each thousand problems collected. Built, the pool holds the own
    rows once: the own set becomes a view of its first rows (`build`)."""

    set: RankingSet
    n_own: int
    raw_ids: pd.Series  # each row's problem id without its auxiliary prefix (categorical)
    aux: tuple[tuple[str, int | None], ...] = ()  # each auxiliary set's (device name, rows kept a problem: `thin`)

    @classmethod
    def build(cls, own: RankingSet, aux: Sequence[RankingSet] = ()) -> TrainingPool:
        """The pool of `own` and `aux` (each of another device than `own`, as `with_auxiliary` refuses otherwise).
        With auxiliary sets `own` is changed in place into a view of the pool's first rows, equal to what it was
        (its categoricals keep their categories): its own arrays are let go, so a caller that keeps no other
        reference to them holds those rows once. The auxiliary sets are copied and left as they were."""
        for a in aux:
            _check_other_device(a, own)
        if not aux:
            return cls(own, len(own.frame), own.frame["problem_id"])
        raw = _concat([own.frame["problem_id"], *(a.frame["problem_id"] for a in aux)])
        n = len(own.frame)
        categories = {c: s.cat.categories for c, s in own.frame.items() if isinstance(s.dtype, pd.CategoricalDtype)}
        parts = [(own, None, ""), *((a, None, f"{AUX_PREFIX}{a.device.get('name')}:") for a in aux)]
        stacked = _stack(parts, own.device, consume_first=True)
        head = stacked.frame.iloc[:n]
        for col, cats in categories.items():  # the view's categoricals as they were (the pool's: the parts' union)
            head[col] = head[col].cat.set_categories(cats)
        own.frame, own.X = head, stacked.X[:n]
        return cls(stacked, n, raw, tuple((a.device.get("name"), a.thin) for a in aux))

    def rows(
        self,
        problems: Iterable[str] | None = None,
        leave_out: Iterable[str] = (),
        leave_out_families: Iterable[str] = (),
    ) -> np.ndarray | None:
        """Row mask of the training set `with_auxiliary` gives for the same arguments: the own rows of `problems`
        (None: all) and the auxiliary rows less those of the problems in `leave_out` and of the families in
        `leave_out_families`; None where that is every row."""
        own = np.zeros(len(self.set.frame), dtype=bool)
        own[: self.n_own] = True
        mask = own.copy()
        if problems is not None:
            mask &= self.raw_ids.isin(set(problems)).to_numpy()
        skip, skip_fam = set(leave_out), set(leave_out_families)
        borrowed = ~own
        if skip:
            borrowed &= ~self.raw_ids.isin(skip).to_numpy()
        if skip_fam:
            borrowed &= ~self.set.frame["family"].isin(skip_fam).to_numpy()
        mask |= borrowed
        return None if mask.all() else mask


def fit_rows(model, train: RankingSet, rows: np.ndarray | None):
    """`model` fitted on the rows of `train` that the mask `rows` holds (None: all): in place where the model fits on
    a mask (`fits_rows`), else on a copy of them (the set `with_auxiliary` would have given)."""
    if rows is None:
        return model.fit(train)
    if getattr(model, "fits_rows", False):
        return model.fit(train, rows=rows)
    return model.fit(rows_of(train, np.flatnonzero(rows)))


def offered_rows(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """The rows of a dataset of kernel `family` that a run-time ranking chooses among: for "inductor", the choices
    Inductor offered (every status but "invalid", its pruned grid points: ChoiceFilter ranks only the template
    choices Inductor generated); for autoheur's own kernel, every row. A config the space's static rules rule out for
    a problem (kernels.config.feasible_configs) was never collected and is no row of it; a row that failed when run
    (status invalid, compile_error, out_of_resources, wrong or crashed) is ranked like the others, and a pick of it
    scores 0 while it still takes a slot of the top k (metrics.py).

    Why: until stop 75 the Inductor datasets' pruned points were ranked and scored 0 like failures, which the filter
    never meets; on the H200's Inductor data that read as a top-1 geomean of 0.29 where the offered choices' was not."""
    if family != "inductor":
        return df
    return df[df["status"].to_numpy(dtype=object) != "invalid"]


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


def check_space(meta, path: str | Path) -> None:
    """Refuse a dataset collected over another config space than the installed code's for its kernel family.

    A config id names a kernel only within one space; a model trained on another space's timings ranks ids that may
    mean other kernels or none, yet was stamped with the installed hash and so loaded as if it matched. Not waived by
    --allow-stale-kernel: an edited kernel still runs the same configs, another space does not."""
    from autoheur.models.artifact import expected_space_hash

    installed = expected_space_hash(meta.family)
    if meta.space_hash != installed:
        raise ValueError(
            f"{path} was collected over config space {meta.space_hash} (kernel family {meta.family!r}), but this "
            f"autoheur's space for that family hashes to {installed}: its config ids may name other kernels. "
            f"Re-collect it with this version (autoheur collect --out {path} --new-dataset), or install the autoheur "
            "version that collected it"
        )


def warn_subset(meta, path: str | Path) -> None:
    """One warning for a dataset collected over a config subset (`collect --sample-configs` / `--configs`): its
    problems' "oracle" is the best of the subset, so what is trained or measured on it says nothing of the space."""
    if meta.configs != "all":
        warnings.warn(
            f"{path} is a trial over a config subset ({meta.configs}): each problem's best is the subset's, not the "
            "space's, so a model or figure from it says nothing of the whole space; collect without "
            "--sample-configs/--configs for that",
            stacklevel=3,
        )


def checked_store(path: str | Path, allow_stale_kernel: bool):
    """The dataset at `path`, opened for training or evaluation: another config space refused, a trial over a config
    subset warned of, an empty one refused, another kernel refused unless `allow_stale_kernel`."""
    from autoheur.collect.store import DatasetStore

    store = DatasetStore.load(Path(path))
    check_space(store.meta, path)
    warn_subset(store.meta, path)
    if not store.done_problems():  # a manifest and no rows: a collection begun, or killed before its first problem
        raise ValueError(f"{path} holds no problems yet (a dataset begun but never collected into): collect first")
    if not allow_stale_kernel:
        check_kernel(store.meta, path)
    return store


def load_dataset(path: str | Path, allow_stale_kernel: bool = False) -> tuple[pd.DataFrame, dict, str]:
    """(rows, device fingerprint, space hash) of a dataset directory, validated part by part; a dataset of another
    config space is refused, and one timed on another version of the kernel unless `allow_stale_kernel`."""
    store = checked_store(path, allow_stale_kernel)
    return offered_rows(store.read(COLUMNS), store.meta.family), dict(store.meta.device), store.meta.space_hash


def load_ranking_set(
    path: str | Path, allow_stale_kernel: bool = False, batch_rows: int = 1_000_000, thin: int | None = None
) -> RankingSet:
    """The dataset at `path` as a RankingSet: equal to `RankingSet.from_frame(*load_dataset(path)[:2])`, built a
    batch of problems (at least `batch_rows` rows) at a time.

    Why in batches: the whole frame, its sorted copy and the features' float64 temporaries peaked at 21.9 GB for the
    H100 set's 16 M rows (a set of 8.6 GB) on a host of 24 GB; in batches, 15.3 GB (BENCHMARKS.md, stop 51). Each batch
    is read, reduced to its rows, features and labels, and let go; `merge_by_problem` then puts the batches' problems
    in problem order, column by column. With the text columns as categoricals (CATEGORICAL), the load of the
    7,999-problem H100 set peaked at 9.8 GB instead of 13.4 GB, for a set of 6.4 GB instead of 9.4 GB (stop 52).

    `thin`: keep `thin` rows of each problem (its fastest `thin // 4` and a sample of the rest seeded by the problem's
    id: sample_rows), batch by batch, after each problem's oracle and labels are computed on all its rows; None keeps
    every row. The seed is the problem's (before stop 73 it was the load batch's index), so a problem keeps the same
    rows however the dataset around it grows or is packed: a fit on the same problems (`autoheur train
    --aux-problems`) is the same fit."""
    if thin is not None and thin < 4:
        raise ValueError(f"thin={thin!r}: expected at least 4 rows a problem, or None for all")
    store = checked_store(path, allow_stale_kernel)
    device = dict(store.meta.device)
    sets, no_oracle = [], 0
    for df in store.read_batches(COLUMNS, min_rows=batch_rows):
        rs = RankingSet.from_frame(offered_rows(df, store.meta.family), device)
        del df
        no_oracle += rs.no_oracle
        sets.append(rs if thin is None else sample_rows(rs, thin, thin // 4, seed=None))  # each problem its own seed
    _release_arrow_memory()
    if not sets:  # a dataset of no rows
        sets.append(RankingSet.from_frame(offered_rows(store.read(COLUMNS), store.meta.family), device))
    rs = merge_by_problem(sets)
    rs.thin = thin
    rs.no_oracle = no_oracle  # counted before thinning (a thinned problem's set no longer carries it)
    return rs


def merge_by_problem(sets: list[RankingSet]) -> RankingSet:
    """One set of the problems of `sets` (each problem in one of them, its rows contiguous), in problem-id order as
    `RankingSet.from_frame` sorts them. Empties the list: each part's features and columns are let go as soon as
    they are placed, so the merge holds little more than its result."""
    no_oracle = sum(rs.no_oracle for rs in sets)
    if len(sets) > 1:
        sets[:] = [rs for rs in sets if len(rs.frame)] or sets[:1]  # a batch of only unusable problems adds none
    if len(sets) == 1:
        rs = sets.pop()
        rs.no_oracle = no_oracle
        return rs
    device = sets[0].device
    ids = np.concatenate([rs.problems for rs in sets])  # problems in the sets' row order
    sizes = np.concatenate([rs.query_sizes() for rs in sets]).astype(np.int64)
    if len(set(ids)) != len(ids):
        raise ValueError("a problem is in two of the sets: merge_by_problem needs each problem in one")
    by_id = np.argsort(ids, kind="stable")
    start = np.empty_like(sizes)
    start[by_id] = np.cumsum(sizes[by_id]) - sizes[by_id]  # each problem's first row in the result
    total = int(sizes.sum())
    # where each row of the sets (one after another) goes; a problem's rows keep their order
    dest = np.repeat(start - (np.cumsum(sizes) - sizes), sizes) + np.arange(total, dtype=np.int64)
    bounds = np.cumsum([0] + [len(rs.frame) for rs in sets])
    rows = [dest[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    X = np.empty((total, sets[0].X.shape[1]), dtype=sets[0].X.dtype)
    for rs, r in zip(sets, rows, strict=True):
        X[r] = rs.X
        rs.X = None
    order = np.empty(total, dtype=np.int64)
    order[dest] = np.arange(total, dtype=np.int64)
    del rows, dest
    columns = {}
    for col in list(sets[0].frame.columns):
        merged = _concat([rs.frame.pop(col) for rs in sets])
        columns[col] = merged.take(order).reset_index(drop=True)
        del merged
    sets.clear()
    return RankingSet(pd.DataFrame(columns, copy=False), X, device, no_oracle=no_oracle)


def _categorical(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its CATEGORICAL columns as categoricals (in place)."""
    for col in CATEGORICAL:
        if col in df.columns and not isinstance(df[col].dtype, pd.CategoricalDtype):
            df[col] = df[col].astype("category")
    return df


def _prefixed(col: pd.Series, prefix: str) -> pd.Series:
    """`prefix` before every value of a text column, a categorical staying one (its categories renamed)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.rename_categories(prefix + col.cat.categories.astype(str))
    return prefix + col.astype(str)


def _concat(pieces: list[pd.Series]) -> pd.Series:
    """The pieces one after another, as `pd.concat`, except that categoricals of different categories stay a
    categorical, of the union of their categories in sorted order (as `astype("category")` orders them: a set's
    columns do not depend on how it was put together), instead of becoming strings again."""
    if len(pieces) > 1 and all(isinstance(p.dtype, pd.CategoricalDtype) for p in pieces):
        return pd.Series(union_categoricals(pieces, sort_categories=True), name=pieces[0].name)
    return pd.concat(pieces, ignore_index=True)


def _release_arrow_memory() -> None:
    """Give the memory Arrow freed while reading a dataset back to the system. Its pool keeps freed pages for reuse:
    2.3 GB after reading the H200 set, which with the H100 set as auxiliary data took training past 24 GB."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def load_auxiliary(
    paths: Sequence[str | Path], primary: str | Path, allow_stale_kernel: bool = False, rows: int | None = AUX_ROWS
) -> list[RankingSet]:
    """The datasets at `paths` as auxiliary training data for the dataset at `primary`: each must be of the same
    kernel family and config space (a config id must name the same kernel) and of another device. Each problem keeps
    `rows` of its rows (load_ranking_set's `thin`; None: all)."""
    from autoheur.collect.store import DatasetStore

    main = DatasetStore.load(Path(primary)).meta
    out = []
    for path in paths:
        meta = DatasetStore.load(Path(path)).meta
        if meta.family != main.family or meta.space_hash != main.space_hash:
            raise ValueError(
                f"auxiliary dataset {path} is of kernel family {meta.family!r}, config space {meta.space_hash}; "
                f"{primary} is of {main.family!r}, {main.space_hash}: only a dataset of the same family and space "
                "can be auxiliary data (re-collect it with this autoheur)"
            )
        if meta.device.get("name") == main.device.get("name"):
            raise ValueError(
                f"auxiliary dataset {path} is of {meta.device.get('name')!r}, the device of {primary}: merge the two "
                "(autoheur data merge) instead"
            )
        out.append(load_ranking_set(path, allow_stale_kernel, thin=rows))
    return out


def new_problems_only(aux: Sequence[RankingSet], own: RankingSet) -> list[RankingSet]:
    """Each auxiliary set less its copies of `own`'s problems (another device's timings of the same problem ids):
    the problems `own` lacks, which `--aux-new-only` trains on."""
    have = set(own.problems)
    return [a.subset([p for p in a.problems if p not in have]) for a in aux]


def listed_problems_only(aux: Sequence[RankingSet], ids: set[str], source: str) -> list[RankingSet]:
    """Each auxiliary set less the problems `ids` does not list (`--aux-problems FILE`: a fit's borrowed problems
    pinned, e.g. the shipped H100 model's, however the other device's dataset has grown since). Every listed id must
    be some auxiliary set's: a missing one means the data is not the data the list was made from."""
    have = set().union(*(a.problems for a in aux)) if aux else set()
    missing = sorted(ids - have)
    if missing:
        raise ValueError(
            f"{source} lists {len(missing)} problems the auxiliary data lacks (e.g. {missing[0]}): collect them into "
            "it, or train without the list"
        )
    return [a.subset([p for p in a.problems if p in ids]) for a in aux]


def check_thinned(model, rows: int | None, source: str = "the auxiliary data") -> None:
    """Refuse to fit `model` on auxiliary data loaded thinned to `rows` a problem (load_auxiliary; None: not
    thinned) where its row sample cannot come from the kept rows: more rows a problem than kept (`per_problem`), more
    fastest rows than the kept quarter (`top`, the re-ranker's `rerank_rows`), or every row (a model without
    `per_problem`, or None: the list and nearest-problem baselines read each problem's whole row of configs)."""
    if rows is None:
        return
    per_problem = getattr(model, "per_problem", None)
    fastest = max(getattr(model, "top", 0), getattr(model, "rerank_rows", 0) * bool(getattr(model, "rerank_top", 0)))
    if per_problem is None:
        need = "every row of a problem"
    elif per_problem > rows or fastest > rows // 4:
        need = f"{per_problem} rows of a problem, its fastest {fastest}"
    else:
        return
    raise ValueError(
        f"{getattr(model, 'name', type(model).__name__)} fits on {need}, and {source} keeps {rows} a problem (its "
        f"fastest {rows // 4}): pass --aux-rows 0 (every row) or at least {max(per_problem or 0, 4 * fastest)}"
    )


__all__ = [
    "AUX_PREFIX",
    "AUX_ROWS",
    "COLUMNS",
    "RankingSet",
    "aux_scaled",
    "check_kernel",
    "check_space",
    "check_thinned",
    "family",
    "load_auxiliary",
    "load_dataset",
    "load_ranking_set",
    "merge_by_problem",
    "problem_rows",
    "rows_of",
    "sample_rows",
]
