"""Config keys and the near-best cut: one int64 per config row, and the configs a model's training problems had near
their best (what `XGBRankerModel.near_best_pct` keeps among a new problem's candidates)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from autoheur.features import FEATURE_NAMES
from autoheur.models.data import RankingSet

if TYPE_CHECKING:
    from autoheur.models.rankers import XGBRankerModel


# The config-identity columns of the features (a config's block sizes, stages, warps, group, load path and warp
# specialization), each a small integer, packed 6 bits apiece into one int64 key.
_CONFIG_ID_COLUMNS = [FEATURE_NAMES.index(f) for f in (
    "log2_block_m", "log2_block_n", "log2_block_k", "num_stages", "log2_num_warps", "log2_group_m", "tma",
    "warp_specialize",
)]  # fmt: skip


_KEY_PLACES = 64.0 ** np.arange(len(_CONFIG_ID_COLUMNS))  # exact in float64: the largest key is under 2^48
# The same less group_m and warp specialization: configs of one twin key differ in those alone.
_TWIN_COLUMNS = [c for c in _CONFIG_ID_COLUMNS if FEATURE_NAMES[c] not in ("log2_group_m", "warp_specialize")]


def twin_keys(X: np.ndarray) -> np.ndarray:
    """One int64 per row of X (configs, as feature rows): equal for configs that differ only in group_m and/or warp
    specialization (block sizes, stages, warps and load path alike)."""
    return (np.rint(X[:, _TWIN_COLUMNS]) @ _KEY_PLACES[: len(_TWIN_COLUMNS)]).astype(np.int64)


def config_keys(X: np.ndarray, rows: np.ndarray | None = None, chunk: int = 1 << 20) -> np.ndarray:
    """One int64 per row of X (of `rows` only, if given) that tells its config apart from every other: the
    identity columns, each an integer under 64, as the digits of a base-64 number. A chunk of rows at a time, so
    that a training set's 12 million rows need no float64 copy of their own."""
    if rows is None and len(X) <= chunk:  # one problem's candidates (inference)
        return (np.rint(X[:, _CONFIG_ID_COLUMNS]) @ _KEY_PLACES).astype(np.int64)
    rows = np.arange(len(X)) if rows is None else rows
    out = np.empty(len(rows), dtype=np.int64)
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        out[start : start + len(part)] = np.rint(X[np.ix_(part, _CONFIG_ID_COLUMNS)]) @ _KEY_PLACES
    return out


# model -> {(near_best_pct, the config-identity columns' bytes): row mask}: a problem's candidates are the same tuple
# call after call, so their mask is looked up, not recomputed (0.38 ms a problem; the lookup ~0.1 ms).
_NEAR_BEST_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _near_best_rows(model: XGBRankerModel, X: np.ndarray, pct: int) -> np.ndarray:
    """Row mask of X: the configs `model` keeps at `pct` (near-best, or never timed in its training data)."""
    ident = np.ascontiguousarray(X[:, _CONFIG_ID_COLUMNS]).tobytes() if len(X) <= 1 << 14 else None
    masks = _NEAR_BEST_MASKS.setdefault(model, {})
    hit = masks.get((pct, ident)) if ident is not None else None
    if hit is not None:
        return hit
    k = config_keys(X)
    found, pos = _lookup(model.near_keys_, k)
    near = found & (model.near_rel_[pos] <= 1.0 + pct / 100.0) if len(model.near_keys_) else found
    keep = near | ~_lookup(model.seen_keys_, k)[0]  # (np.isin: 0.6 ms here, ten times a lookup's)
    if ident is not None:
        if len(masks) >= 16:
            masks.pop(next(iter(masks)))
        keep.flags.writeable = False  # shared by every later call with these configs
        masks[(pct, ident)] = keep
    return keep


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(whether each of `keys` is in `sorted_keys`, its position there where it is)."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.intp)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[pos] == keys, pos


NEAR_BEST_MAX = 1.25  # near_best_configs keeps each config's best time over the oracles up to this ratio


def near_best_configs(train: RankingSet, within: np.ndarray | None = None):
    """(every config key the training rows hold, sorted; the keys of those that came within NEAR_BEST_MAX of a
    problem's oracle, sorted; their best such ratio over the problems, float32) over the rows of `within` (None: all).
    What `near_best_pct` cuts by: a config no training problem had near its best rarely is a new problem's best
    (BENCHMARKS.md, "Learned ranking", stop 58)."""
    return _near_best(train, within)[:3]


class _CodedKeys(NamedTuple):
    """Rows' config keys as `table[codes]`: a key for each category of the config id column (0 where no row has it)
    and each row's category code. A training set has millions of rows and about 2,000 configs, so the keys are
    computed, deduplicated and looked up once a config (BENCHMARKS.md, "Learned ranking", stop 67)."""

    table: np.ndarray  # int64, one per category
    present: np.ndarray  # bool, one per category: some row has it
    codes: np.ndarray  # each row's category


def _row_keys(train: RankingSet, rows: np.ndarray | None) -> _CodedKeys | np.ndarray:
    """The config key of each row of `rows` (None: all), as config_keys gives it, through the config id column's
    categories where it has them: a config's key is a function of its config fields, as its id is, so any one row
    of an id gives the key of all of them."""
    col = train.frame["config_id"]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return config_keys(train.X, rows)
    codes = col.cat.codes.to_numpy()
    if rows is not None:
        codes = codes[rows]
    if len(codes) and codes.min() < 0:  # a row without an id
        return config_keys(train.X, rows)
    some = np.full(len(col.cat.categories), -1, dtype=np.int64)
    some[codes] = np.arange(len(codes))  # one row of each id present (whichever write lands)
    present = some >= 0
    table = np.zeros(len(some), dtype=np.int64)
    at = some[present]
    table[present] = config_keys(train.X, at if rows is None else rows[at])
    return _CodedKeys(table, present, codes)


def _near_best(train: RankingSet, within: np.ndarray | None = None):
    """near_best_configs, and the config keys of the rows of `within` (all rows: None; _row_keys), which the fit
    reads again (_near_rows)."""
    rows = None if within is None else np.flatnonzero(within)
    rel = train.frame["rel_time"].to_numpy()
    ok = (train.frame["status"] == "ok").to_numpy()
    if rows is not None:
        rel, ok = rel[rows], ok[rows]
    keys = _row_keys(train, rows)
    close = ok & (rel <= NEAR_BEST_MAX)
    if isinstance(keys, _CodedKeys):
        seen, close_keys = np.unique(keys.table[keys.present]), keys.table[keys.codes[close]]
    else:
        seen, close_keys = np.unique(keys), keys[close]
    near = pd.DataFrame({"k": close_keys, "r": rel[close]}).groupby("k")["r"].min()
    return seen, near.index.to_numpy(dtype=np.int64), near.to_numpy(dtype=np.float32), keys
