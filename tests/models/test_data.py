"""`autoheur.models.data`: which problems become ranking queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autoheur.collect.store import DatasetStore
from autoheur.models.baselines import FixedList
from autoheur.models.data import (
    CATEGORICAL,
    COLUMNS,
    RankingSet,
    check_thinned,
    load_dataset,
    load_ranking_set,
    merge_by_problem,
    new_problems_only,
    offered_rows,
)
from autoheur.models.rankers import XGBRankerModel, XGBRegressorModel


def test_problems_that_never_launch_are_no_queries(h100_rows, h100_slice):
    """A 2D x 3D problem with no rows has an empty output: the wrappers never launch, so nothing is learned or scored
    (the shipped datasets hold 5 such problems, collected before collection skipped them)."""
    raw = h100_rows[COLUMNS]
    forward = raw[(raw["layout"] == "2d3d") & (raw["total"] > 0)]
    one = raw[raw["problem_id"] == forward["problem_id"].iloc[0]]
    idle = one.assign(problem_id="idle", total=0, size_mean=0.0, size_max=0, size_min=0, size_std=0.0)
    idle = idle.assign(empty_groups=idle["groups"], sizes=[[0] * g for g in idle["groups"]])
    rs = RankingSet.from_frame(pd.concat([one, idle], ignore_index=True), h100_slice.device)
    assert list(rs.problems) == [one["problem_id"].iloc[0]]
    assert len(rs.frame) == len(one) == len(rs.X)


def test_the_slice_is_the_stores_read_of_its_problems(h100_rows):
    """conftest's slice reads its problems' rows straight from their packs; the store's validated read of a problem,
    cut to the slice's configs, is the same frame (three problems of three packs)."""
    from autoheur.collect.store import DatasetStore

    store = DatasetStore.load(Path(__file__).resolve().parents[2] / "data" / "nvidia-h100-80gb-hbm3")
    parts = store.parts()
    pids = list(dict.fromkeys(h100_rows["problem_id"]))
    three = [pid for i, pid in enumerate(pids) if parts[pid] not in {parts[p] for p in pids[:i]}][:3]
    assert len(three) == 3
    kept = set(h100_rows["config_id"])
    for pid in three:
        want = store.read_part(pid).replace_schema_metadata(None).select(COLUMNS).to_pandas()
        want = want[want["config_id"].isin(kept)].reset_index(drop=True)
        got = h100_rows[h100_rows["problem_id"] == pid].reset_index(drop=True)
        assert len(got) > 0
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_the_ranking_frame_keeps_no_per_row_group_sizes(h100_rows, h100_slice):
    """The features hold the group-size statistics; the per-row arrays (one object per row) are dropped after them."""
    assert "sizes" in h100_rows.columns
    assert "sizes" not in h100_slice.frame.columns
    assert len(h100_slice.frame) == len(h100_slice.X)


def test_text_columns_are_categoricals_of_the_same_values(h100_rows, h100_slice):
    """The text columns are held as categoricals (memory); their values, the problem order and the data hash (which
    models record) are those of the strings."""
    frame = h100_slice.frame
    assert all(isinstance(frame[c].dtype, pd.CategoricalDtype) for c in CATEGORICAL)
    as_text = frame.astype({c: "string" for c in CATEGORICAL})
    assert RankingSet(as_text, h100_slice.X, h100_slice.device).data_hash() == h100_slice.data_hash()
    usable = h100_rows[h100_rows["problem_id"].isin(set(h100_slice.problems))]
    assert list(h100_slice.problems) == sorted(set(usable["problem_id"]))
    assert h100_slice.problems.dtype == object
    some = h100_slice.subset(h100_slice.problems[:2])
    assert list(some.frame["problem_id"].unique()) == list(h100_slice.problems[:2])
    assert some.frame["config_id"].tolist() == frame["config_id"][frame["problem_id"].isin(some.problems)].tolist()


RETEST_H200 = Path(__file__).resolve().parents[2] / "data" / "retest-nvidia-h200"


def test_the_set_built_in_batches_equals_the_set_of_the_whole_frame():
    """`load_ranking_set` builds the set a batch of problems at a time (memory) and merges them in problem order: the
    frame and the features must be those of `from_frame` on the whole dataset, row for row."""
    df, device, _ = load_dataset(RETEST_H200)
    whole = RankingSet.from_frame(df, device)
    batched = load_ranking_set(RETEST_H200, batch_rows=20_000)
    assert len(whole.problems) > 20  # many batches: each holds a few problems
    pd.testing.assert_frame_equal(batched.frame, whole.frame, check_exact=True)
    np.testing.assert_array_equal(batched.X, whole.X)
    assert batched.X.flags.c_contiguous
    assert batched.data_hash() == whole.data_hash()


def test_a_thinned_load_keeps_each_problems_fastest_quarter_and_a_sample_with_the_whole_problems_labels():
    """`thin`: each problem keeps `thin` rows, among them its `thin // 4` fastest, the same rows whatever batch it
    loads in; a kept row's relative time and label are the ones the whole problem gives it (the oracle comes from
    every row, before thinning); `thin` below 4 is refused."""
    whole = load_ranking_set(RETEST_H200, batch_rows=20_000)
    thin = load_ranking_set(RETEST_H200, batch_rows=20_000, thin=64)
    assert thin.thin == 64 and whole.thin is None
    # each problem's sample is seeded by its id, not by the batch it loads in: one batch keeps the same rows
    one_batch = load_ranking_set(RETEST_H200, batch_rows=10**12, thin=64)
    pd.testing.assert_frame_equal(one_batch.frame, thin.frame, check_exact=True)
    assert list(thin.problems) == list(whole.problems)
    assert (thin.query_sizes() == np.minimum(whole.query_sizes(), 64)).all() and (whole.query_sizes() > 64).any()
    key = ["problem_id", "config_id"]
    joined = thin.frame[[*key, "rel_time", "label"]].merge(whole.frame[[*key, "rel_time", "label"]], on=key)
    assert len(joined) == len(thin.frame)
    np.testing.assert_array_equal(joined["rel_time_x"], joined["rel_time_y"])
    np.testing.assert_array_equal(joined["label_x"], joined["label_y"])
    for pid, g in whole.frame.groupby("problem_id", observed=True):
        fastest = set(g.nsmallest(16, "rel_time")["config_id"])
        kept = set(thin.frame.loc[thin.frame["problem_id"] == pid, "config_id"])
        assert len(kept) == min(len(g), 64) and fastest <= kept
    rows = {c: whole.X[i] for i, c in enumerate(zip(whole.frame["problem_id"], whole.frame["config_id"], strict=True))}
    np.testing.assert_array_equal(
        thin.X, np.stack([rows[c] for c in zip(thin.frame["problem_id"], thin.frame["config_id"], strict=True)])
    )
    with pytest.raises(ValueError, match="at least 4"):
        load_ranking_set(RETEST_H200, thin=3)


def test_a_fit_whose_rows_a_thinned_auxiliary_set_cannot_give_is_refused():
    """check_thinned: the ranker's sample (48 rows, its fastest 12, the re-ranker's fastest 48) fits in 512 rows
    (fastest 128), not in 128 (fastest 32); the regressor's 384 / 96 not in 256; the list baseline reads every row."""
    check_thinned(XGBRankerModel(), 512)
    check_thinned(FixedList(), None)
    with pytest.raises(
        ValueError, match=r"fits on 48 rows of a problem, its fastest 48.*--aux-rows 0 \(every row\) or at least 192"
    ):
        check_thinned(XGBRankerModel(), 128)
    check_thinned(XGBRankerModel(rerank_top=0), 128)  # no re-ranker: the members' fastest 12 fit in 32
    with pytest.raises(ValueError, match="at least 384"):
        check_thinned(XGBRegressorModel(), 256)
    check_thinned(XGBRegressorModel(), 512)
    with pytest.raises(ValueError, match="every row of a problem"):
        check_thinned(FixedList(), 512)


def test_merge_by_problem_orders_problems_and_refuses_a_split_problem(h100_slice):
    pids = list(h100_slice.problems)
    parts = [h100_slice.subset(pids[i::3]) for i in (2, 0, 1)]  # each part sorted, problems interleaved between them
    sets = list(parts)
    merged = merge_by_problem(sets)
    assert sets == []  # consumed: each part's arrays let go once placed
    pd.testing.assert_frame_equal(merged.frame, h100_slice.frame, check_exact=True)
    np.testing.assert_array_equal(merged.X, h100_slice.X)
    twice = [h100_slice.subset(pids[:4]), h100_slice.subset(pids[3:6])]
    with pytest.raises(ValueError, match="in two of the sets"):
        merge_by_problem(twice)


def test_merge_by_problem_skips_a_part_with_no_usable_problem(h100_slice):
    empty = h100_slice.subset([])
    merged = merge_by_problem([empty, h100_slice.subset(h100_slice.problems[:3])])
    assert list(merged.problems) == list(h100_slice.problems[:3])


def test_new_problems_only_keeps_the_auxiliary_problems_the_dataset_lacks(h100_slice):
    """`--aux-new-only`'s filter: an auxiliary set keeps exactly its problems the dataset has no copy of, with all of
    their rows; a set of only shared problems keeps none."""
    ids = list(h100_slice.problems)
    own = h100_slice.subset(ids[: len(ids) // 2])
    (kept,) = new_problems_only([h100_slice], own)
    assert list(kept.problems) == ids[len(ids) // 2 :]
    assert len(kept.frame) == int(h100_slice.frame["problem_id"].isin(ids[len(ids) // 2 :]).sum())
    assert new_problems_only([own], own)[0].problems.size == 0


def _grouped(rs: RankingSet, within) -> list[tuple[str, np.ndarray]]:
    """problem_rows as pandas' groupby gives it (the implementation until stop 67)."""
    groups = rs.frame.groupby("problem_id", sort=False, observed=True).indices.items()
    return [(pid, idx) for pid, idx in groups if within is None or within[idx[0]]]


def _same_rows(a, b) -> bool:
    return [p for p, _ in a] == [p for p, _ in b] and all(
        np.array_equal(x, y) for (_, x), (_, y) in zip(a, b, strict=True)
    )


def test_problem_rows_reads_the_runs_of_a_contiguous_frame_as_groupby_does(h100_slice):
    """The fast path (runs of the id column) against groupby: on a slice and a subset of it (categorical ids, with
    unobserved categories after the subset), under a row mask of whole problems, with text ids, and on a frame whose
    problems are not contiguous (which takes groupby)."""
    from autoheur.models.data import problem_rows

    rs = h100_slice
    pids = list(rs.problems)
    assert len(pids) > 3
    sub = rs.subset(pids[1:-1])  # categories of the left-out problems stay in the dtype
    assert isinstance(sub.frame["problem_id"].dtype, pd.CategoricalDtype)
    mask = sub.frame["problem_id"].isin(pids[1::2]).to_numpy()
    for s, within in ((rs, None), (sub, None), (sub, mask)):
        fast = problem_rows(s, within)
        assert len(fast) == (len(set(pids[1::2]) & set(pids[1:-1])) if within is not None else len(s.problems))
        assert _same_rows(fast, _grouped(s, within))
    text = RankingSet(rs.frame.assign(problem_id=rs.frame["problem_id"].astype(str)), rs.X, rs.device)
    assert _same_rows(problem_rows(text, None), _grouped(rs, None))
    order = np.random.default_rng(0).permutation(len(rs.frame))  # problems interleaved: the groupby path
    mixed = RankingSet(rs.frame.iloc[order].reset_index(drop=True), rs.X[order], rs.device)
    assert _same_rows(problem_rows(mixed, None), _grouped(mixed, None))
    assert problem_rows(rs.subset([]), None) == []


INDUCTOR_H100 = Path(__file__).resolve().parents[2] / "data" / "inductor-nvidia-h100-80gb-hbm3"


def test_an_inductor_dataset_ranks_only_the_choices_inductor_offered():
    """Inductor's pruned grid points ("invalid": never offered, so its choice filter never ranks them) are neither
    learned nor scored; the offered rows, failed ones included, all stay, each problem's labels computed on them."""
    from autoheur.collect.store import DatasetStore

    raw = DatasetStore.load(INDUCTOR_H100).read(COLUMNS)
    assert (raw["status"] == "invalid").any()  # the shipped data has pruned points, or this test proves nothing
    offered = raw[raw["status"] != "invalid"]
    for rs in (load_ranking_set(INDUCTOR_H100), load_ranking_set(INDUCTOR_H100, batch_rows=500)):
        assert "invalid" not in set(rs.frame["status"])
        assert len(rs.frame) == len(offered[offered["problem_id"].isin(set(rs.problems))])
        assert set(rs.problems) == set(offered.loc[offered["status"] == "ok", "problem_id"])
    df, _, _ = load_dataset(INDUCTOR_H100)
    assert len(df) == len(offered)


def test_offered_rows_leaves_the_triton_familys_rows_alone():
    """autoheur's own kernel: an infeasible config still takes a slot of the top k (metrics.py), so its rows stay."""
    df = pd.DataFrame({"status": ["ok", "invalid", "compile_error"], "median_ms": [1.0, np.nan, np.nan]})
    assert offered_rows(df, "triton") is df
    assert offered_rows(df, "inductor")["status"].tolist() == ["ok", "compile_error"]


def test_a_dataset_of_another_config_space_is_refused_and_a_model_carries_its_datas_space(tmp_path):
    """A dataset whose manifest and files say another config space (its config ids may name other kernels) trained,
    and its model was stamped with the installed hash: now refused by the loads and by `train` before any fit, as the
    own dataset or an auxiliary one; a model carries its data's hash."""
    from autoheur.collect.schema import kernel_source_hash
    from autoheur.device import H200
    from autoheur.models.train import train
    from tests.collect.test_store import PROBLEMS, fill, make_meta

    kernel = kernel_source_hash()
    fill(tmp_path / "other", PROBLEMS, meta=make_meta(space_hash="0" * 16, kernel_hash=kernel))
    fill(tmp_path / "other-h200", PROBLEMS, meta=make_meta(spec=H200, space_hash="0" * 16, kernel_hash=kernel))
    fill(tmp_path / "ok", PROBLEMS, meta=make_meta(kernel_hash=kernel))
    want = r"config space 0000000000000000 .*Re-collect it with this version .*or install the autoheur version"
    for load in (load_ranking_set, load_dataset):
        with pytest.raises(ValueError, match=want):
            load(tmp_path / "other", allow_stale_kernel=True)  # not a stale kernel: not waived with one
    quiet = lambda s: None
    with pytest.raises(ValueError, match=want):
        train(tmp_path / "other", "fixed_list", heldout_folds=0, log=quiet)
    with pytest.raises(ValueError, match=rf"other-h200 was collected over {want}"):
        train(tmp_path / "ok", "fixed_list", heldout_folds=0, log=quiet, aux=[tmp_path / "other-h200"], aux_rows=None)
    model = train(tmp_path / "ok", "fixed_list", heldout_folds=0, log=quiet)
    assert model.meta["space_hash"] == DatasetStore.load(tmp_path / "ok").meta.space_hash


def test_a_garbled_pack_is_refused_before_its_times_train(tmp_path):
    """The review's garbled pack (times of -1e260 in "ok" rows) loaded as ranking data; the store's read refuses it."""
    from tests.collect.test_store import RETEST_PACK, _garble, _shipped_pack_copy

    _garble(_shipped_pack_copy(tmp_path / "d"))
    with pytest.raises(ValueError, match=rf"{RETEST_PACK}: \d+ timed rows .*not a positive finite time"):
        load_ranking_set(tmp_path / "d")


def test_problems_with_no_ok_config_are_left_out_and_counted(h100_rows, h100_slice):
    """A problem whose every config failed or was censored has no oracle: it is no query, and the set counts it (no
    shipped dataset has one, so a synthetic twin of a real problem stands in); a merge sums the counts."""
    raw = h100_rows[COLUMNS]
    one = raw[raw["problem_id"] == raw["problem_id"].iloc[0]]
    dead = one.assign(problem_id="dead", status=np.where(one["status"] == "ok", "censored", one["status"]))
    failed = one.assign(problem_id="failed", status="compile_error", median_ms=np.nan)
    rs = RankingSet.from_frame(pd.concat([one, dead, failed], ignore_index=True), h100_slice.device)
    assert list(rs.problems) == [one["problem_id"].iloc[0]] and rs.no_oracle == 2
    assert h100_slice.no_oracle == 0
    assert merge_by_problem([rs, RankingSet.from_frame(failed, h100_slice.device)]).no_oracle == 3


def test_the_shipped_datasets_and_models_match_the_installed_kernel_source():
    """autoheur/kernels/grouped_gemm.py's hash keys every shipped dataset and model of the kernel's family: any edit of
    the file, its Python wrappers included, makes every one of them stale (refused by the loads, warned of by the
    model). Stop 83 put a device guard there, and 35 tests of loading and training failed."""
    import json

    from autoheur.collect.schema import kernel_source_hash

    root = Path(__file__).resolve().parents[2]
    installed = kernel_source_hash()
    stale = []
    for path in sorted([*root.glob("data/*/dataset.json"), *root.glob("models/*.json")]):
        meta = json.loads(path.read_text())
        meta = meta.get("metadata", meta)
        if meta.get("family", "triton") == "triton" and meta.get("kernel_hash") != installed:
            stale.append(f"{path.relative_to(root)}: {meta.get('kernel_hash')}")
    assert len(stale) == 0, (
        f"the installed kernel source hashes to {installed}, but these were timed on another: {stale}. Keep "
        "autoheur/kernels/grouped_gemm.py as it is (put wrappers elsewhere, e.g. autoheur/kernels/__init__.py), or "
        "re-collect the datasets and retrain the models"
    )
