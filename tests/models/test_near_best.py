"""Config keys and the near-best cut: keys that tell configs apart, twin keys, and each config's best ratio over the
training problems."""

from __future__ import annotations

import numpy as np
import pandas as pd

from autoheur.models.near_best import _CodedKeys, _near_best, _row_keys, config_keys, near_best_configs, twin_keys
from autoheur.models.rankers import XGBRankerModel


def test_config_keys_tell_every_config_of_the_space_apart():
    from autoheur.device import H100_SXM
    from autoheur.features import problem_config_matrix
    from autoheur.kernels.config import all_configs
    from autoheur.problem import Problem

    cfgs = all_configs()
    X = problem_config_matrix(Problem("2d3d", 4, (100, 0, 300, 28), 0, 512, 256), cfgs, H100_SXM)
    keys = config_keys(X)
    assert len(np.unique(keys)) == len(cfgs)
    np.testing.assert_array_equal(config_keys(X, np.arange(5, 50)), keys[5:50])
    np.testing.assert_array_equal(config_keys(X, np.arange(5, 50), chunk=7), keys[5:50])  # a chunk at a time


def test_near_best_configs_are_each_configs_best_ratio_over_the_training_problems(h100_slice):
    from autoheur.models.near_best import NEAR_BEST_MAX

    rs = h100_slice.subset(h100_slice.problems[:12])
    within = (rs.frame["problem_id"] != rs.problems[0]).to_numpy()  # all but the first problem
    seen, keys, rel = near_best_configs(rs, within)
    f = rs.frame[within].assign(key=config_keys(rs.X[within]))
    np.testing.assert_array_equal(seen, np.unique(f["key"]))
    ok = f[(f["status"] == "ok") & (f["rel_time"] <= NEAR_BEST_MAX)]
    best = ok.groupby("key")["rel_time"].min()
    np.testing.assert_array_equal(keys, best.index.to_numpy())
    np.testing.assert_array_equal(rel, best.to_numpy(dtype=np.float32))
    assert (rel >= 1.0).all() and rel.min() == 1.0  # each problem's oracle is its own best


def test_row_keys_through_the_config_ids_are_config_keys(h100_slice):
    """The fit's config keys (a table over the config id categories, looked up once a config) equal config_keys row
    by row, and the eligible-row mask made from them equals the one made from config_keys; also for text ids (the
    plain path) and a row mask."""
    rs = h100_slice.subset(h100_slice.problems[:12])
    within = (rs.frame["problem_id"] != rs.problems[0]).to_numpy()
    rows = np.flatnonzero(within)
    coded = _row_keys(rs, rows)
    assert isinstance(coded, _CodedKeys) and coded.present.sum() == len(np.unique(coded.codes))
    np.testing.assert_array_equal(coded.table[coded.codes], config_keys(rs.X, rows))
    np.testing.assert_array_equal(_row_keys(rs, None).table[_row_keys(rs, None).codes], config_keys(rs.X))
    text = type(rs)(rs.frame.assign(config_id=rs.frame["config_id"].astype(str)), rs.X, rs.device)
    np.testing.assert_array_equal(_row_keys(text, rows), config_keys(rs.X, rows))
    m = XGBRankerModel()
    m.seen_keys_, m.near_keys_, m.near_rel_, keys = _near_best(rs, within)
    for pct in (0, 2, 10):
        fast = m._near_rows(rs.X, pct, within, keys)
        np.testing.assert_array_equal(fast, m._near_rows(rs.X, pct, within))
        assert fast[within].any() and not fast[~within].any()
    for plain, fast in zip(_near_best(text, within)[:3], _near_best(rs, within)[:3], strict=True):
        np.testing.assert_array_equal(plain, fast)


def test_twin_keys_are_config_ids_less_group_m_and_warp_specialization(h100_slice, twin_id):
    ids = h100_slice.frame["config_id"].to_numpy()
    keys = twin_keys(h100_slice.X)
    by_key = pd.Series([twin_id(c) for c in ids]).groupby(keys).nunique()
    by_twin = pd.Series(keys).groupby([twin_id(c) for c in ids]).nunique()
    assert (by_key == 1).all() and (by_twin == 1).all()  # one twin key per stripped id and the reverse
    assert len(by_key) < len(np.unique(ids))  # the slice has twins


def test_near_best_rows_keep_the_near_and_the_never_timed_at_each_pct():
    """The cut's row mask straight from the keys: a config within pct of some training problem's oracle is kept
    (the bound included), one the training data timed but never near is cut, one it never timed is kept; the mask
    cached for one pct is not served for another."""
    from autoheur.device import H100_SXM
    from autoheur.features import problem_config_matrix
    from autoheur.kernels.config import all_configs
    from autoheur.models.near_best import _near_best_rows
    from autoheur.problem import Problem

    X = problem_config_matrix(Problem("2d3d", 4, (100, 0, 300, 28), 0, 512, 256), all_configs()[:6], H100_SXM)
    keys = config_keys(X)

    class Stub:  # what the cut reads of a fitted model
        pass

    m = Stub()
    m.seen_keys_ = np.sort(keys[:5])  # the sixth config was never timed in training
    order = np.argsort(keys[:4])
    m.near_keys_ = keys[:4][order]  # the fifth was timed, never near
    m.near_rel_ = np.array([1.0, 1.02, 1.05, 1.2], dtype=np.float32)[order]
    assert _near_best_rows(m, X, 2).tolist() == [True, True, False, False, False, True]
    assert _near_best_rows(m, X, 10).tolist() == [True, True, True, False, False, True]  # not the pct-2 mask
    assert _near_best_rows(m, X, 2).tolist() == [True, True, False, False, False, True]  # from the cache, per pct


def test_both_near_best_bounds_are_inclusive(h100_slice):
    """A ratio exactly at a bound is near: NEAR_BEST_MAX (1.25) in the training rows, and 1 + pct / 100 in the cut
    (1.25 at pct 25, exact in float32 and float64, unlike 1.02)."""
    from autoheur.models.near_best import NEAR_BEST_MAX, _near_best_rows

    rs = h100_slice.subset(h100_slice.problems[:2])
    rs.frame["rel_time"] = np.where(rs.frame["status"] == "ok", 2.0, rs.frame["rel_time"])  # nothing near ...
    rs.frame.loc[rs.frame.index[0], ["status", "rel_time"]] = ["ok", NEAR_BEST_MAX]  # ... but one at the bound
    seen, keys, rel = near_best_configs(rs)
    assert keys.tolist() == [config_keys(rs.X[:1])[0]] and rel.tolist() == [NEAR_BEST_MAX]

    class Stub:
        pass

    m = Stub()
    m.seen_keys_, m.near_keys_, m.near_rel_ = seen, keys, rel
    X = rs.X[:1]
    assert _near_best_rows(m, X, 25).tolist() == [True] and _near_best_rows(m, X, 24).tolist() == [False]
