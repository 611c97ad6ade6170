"""Features: names and docs, golden values worked by hand, vectorized == group-by-group reference, always finite."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import autoheur.features as F
from autoheur.collect.schema import problem_columns, rows_for
from autoheur.device import H100_SXM, H200
from autoheur.features import config as fconfig
from autoheur.features import problem as fproblem
from autoheur.features.reference import feature_dict
from autoheur.kernels import config as kconfig
from autoheur.kernels.config import KernelConfig, Signature, all_configs, feasible_configs
from autoheur.problem import DTYPES, LAYOUTS, Problem

# Changing a feature name, their order or FEATURES_VERSION changes this hash; models trained before refuse to load.
EXPECTED_FEATURES_HASH = "853dee906f4e54ad"  # FEATURES_VERSION 3
COL = {name: j for j, name in enumerate(F.FEATURE_NAMES)}
H100 = H100_SXM.to_dict()  # no measured rates: the defaults by name apply (3000 GB/s, 750 TFLOP/s)
H200_MEASURED = {**H200.to_dict(), "copy_GBps": 4000.0, "matmul_TFLOPs": 700.0}
SMALL_SMEM = {**H100, "name": "small", "smem_per_sm": 101376, "smem_per_block_optin": 101376, "regs_per_sm": 32768}

PROBLEMS = [
    Problem("2d3d", 4, (100, 0, 300, 28), 0, 512, 256),
    Problem("2d3d", 3, (0, 0, 0), 0, 2048, 7168),  # every group empty: no tiles at all
    Problem("3d2d", 5, (1, 17, 0, 4096, 640), 96, 0, 1000, dtype="float16", a_major="m"),
    Problem("2d2d", 3, (0, 96, 1000), 200, 96, 0, dtype="float32", b_major="n"),
    Problem("2d2d", 2, (0, 0), 4096, 4096, 0),
    Problem("3d3d", 8, (), 33, 4097, 129),
    Problem("3d3d", 1, (), 1, 1, 1, dtype="float32"),
]


def row(x: np.ndarray, i: int = 0) -> dict[str, float]:
    return {name: float(x[i, j]) for name, j in COL.items()}


def feasible(problem: Problem, device: dict) -> tuple[KernelConfig, ...]:
    e = torch.tensor([], dtype=DTYPES[problem.dtype]).element_size()
    return tuple(feasible_configs(Signature(problem.ragged, e, True), dataclasses.replace(H100_SXM, **_spec(device))))


def _spec(device: dict) -> dict:
    return {f.name: device[f.name] for f in dataclasses.fields(H100_SXM) if f.name not in ("compute_capability",)}


# ---------------------------------------------------------------------------------------------------------------
# Names, version, docs
# ---------------------------------------------------------------------------------------------------------------


def test_names_are_unique_and_match_the_matrix_width():
    assert len(set(F.FEATURE_NAMES)) == len(F.FEATURE_NAMES)
    assert all(re.fullmatch(r"[a-z0-9_]+", n) for n in F.FEATURE_NAMES)
    x = F.problem_config_matrix(PROBLEMS[0], (KernelConfig(64, 128, 64, 3, 4),), H100)
    assert x.shape == (1, len(F.FEATURE_NAMES)) and x.dtype == np.float32


def test_features_hash_is_stable():
    assert re.fullmatch(r"[0-9a-f]{16}", F.features_hash())
    assert F.features_hash() == EXPECTED_FEATURES_HASH, "bump FEATURES_VERSION and EXPECTED_FEATURES_HASH together"


def test_features_md_lists_exactly_the_feature_names_in_order():
    text = (Path(F.__file__).parent / "FEATURES.md").read_text()
    names = re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M)
    assert tuple(names) == F.FEATURE_NAMES
    assert f"`FEATURES_VERSION` {F.FEATURES_VERSION}" in text


def test_importing_features_does_not_import_torch():
    frame = pd.DataFrame([problem_columns(PROBLEMS[0])] * 2).drop(columns=["problem_id", "problem_name"])
    frame = pd.concat([frame, F.config_frame([KernelConfig(64, 128, 64, 3, 4)] * 2)], axis=1)
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"  # any import of them fails
        "import json, pandas as pd, autoheur.features as F\n"
        f"frame = pd.DataFrame({frame.to_dict(orient='list')!r})\n"
        f"x = F.feature_matrix(frame, frame, {H100!r})\n"
        "print(json.dumps(x.tolist()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    golden = F.problem_config_matrix(PROBLEMS[0], (KernelConfig(64, 128, 64, 3, 4),), H100)
    assert np.array(json.loads(done.stdout), dtype=np.float32).tolist() == np.repeat(golden, 2, axis=0).tolist()


def test_copied_constants_agree_with_their_sources():
    assert fproblem.ELEM_BYTES == {k: torch.tensor([], dtype=v).element_size() for k, v in DTYPES.items()}
    assert fproblem.LAYOUT_RAGGED == {k: int(v) for k, v in LAYOUTS.items()}
    assert set(fproblem.LAYOUTS) == set(LAYOUTS)
    assert set(kconfig.BLOCK_M + kconfig.BLOCK_N + kconfig.BLOCK_K) <= set(fproblem.BLOCKS)
    assert [2**j * 16 for j in range(len(fproblem.BLOCKS))] == list(fproblem.BLOCKS)  # index = log2(B) - 4
    assert (fconfig.SMEM_RESERVE, fconfig.OTHER_REGS, fconfig.MAX_OCCUPANCY) == (
        kconfig.SMEM_RESERVE,
        kconfig.OTHER_REGS,
        kconfig.MAX_OCCUPANCY,
    )
    assert fconfig.CONFIG_COLUMNS == tuple(KernelConfig(16, 32, 32, 2, 2).to_dict())


@pytest.mark.parametrize("device", [H100_SXM, H200, dataclasses.replace(H100_SXM, **_spec(SMALL_SMEM))])
@pytest.mark.parametrize("elem", [2, 4])
def test_vectorized_smem_regs_occupancy_agree_with_kernels_config(device, elem):
    cfgs = all_configs()
    c = F.config_arrays(cfgs)
    dev = F.device_params(device)
    assert fconfig.smem_bytes(c, elem).tolist() == [kconfig.smem_bytes(x, elem) for x in cfgs]
    assert fconfig.acc_regs(c).tolist() == [kconfig.acc_regs_per_thread(x) for x in cfgs]
    assert fconfig.occupancy(c, elem, dev).tolist() == [kconfig.occupancy(x, elem, device) for x in cfgs]


# ---------------------------------------------------------------------------------------------------------------
# Golden values, worked by hand
# ---------------------------------------------------------------------------------------------------------------


def test_golden_ragged_m_bf16_h100():
    p = PROBLEMS[0]  # 2d3d, sizes (100, 0, 300, 28), N=512, K=256, bf16
    f = row(F.problem_config_matrix(p, (KernelConfig(64, 128, 64, 3, 4),), H100))
    # tiles: ceil(M_g/64) = 2, 0, 5, 1 -> 8 tile-rows; N: 512/128 = 4 tile-columns
    assert f["log2_tiles_m_per_group"] == pytest.approx(math.log2(1 + 8 / 4))
    assert f["log2_tiles_n_per_group"] == pytest.approx(math.log2(1 + 4))
    assert f["log2_total_tiles"] == pytest.approx(math.log2(1 + 32))
    # smem 3 * (64+128) * 64 * 2 + 1024 = 74752; occupancy min(233472 // 74752 = 3, 2048 // 128, 65536 // (128 * 128))
    assert f["log2_smem_bytes"] == pytest.approx(math.log2(74752))
    assert f["smem_frac_sm"] == pytest.approx(74752 / 233472)
    assert f["occupancy"] == 3 and f["log2_acc_regs"] == 6
    assert f["waves"] == pytest.approx(32 / 396)
    assert f["last_wave_idle_frac"] == pytest.approx(1 - 32 / 396)
    assert f["log2_programs"] == pytest.approx(math.log2((math.ceil(428 / 64) + 4) * 4))  # 44: the launch bound
    assert f["log2_tiles_per_program"] == pytest.approx(math.log2(1 + 32 / 44))
    assert f["pad_waste_m"] == pytest.approx(1 - 428 / 512)
    assert f["pad_waste_n"] == 0 and f["pad_waste_k"] == 0
    assert f["pad_waste_mnk"] == pytest.approx(1 - 428 / 512)
    assert f["log2_k_iters"] == pytest.approx(math.log2(5)) and f["stages_per_k_iter"] == pytest.approx(3 / 4)
    flops = 2 * 428 * 512 * 256
    min_bytes = 2 * (428 * 256 + 4 * 256 * 512 + 428 * 512)
    reread = 2 * (428 * 256 * 4 + 256 * 512 * 8 + 428 * 512)
    assert f["log2_flops"] == pytest.approx(math.log2(1 + flops))
    assert f["log2_min_bytes"] == pytest.approx(math.log2(1 + min_bytes))
    assert f["log2_reread"] == pytest.approx(math.log2(reread / min_bytes))
    roofline = max(flops / 750e12, min_bytes / 3000e9)
    assert f["log10_roofline_us"] == pytest.approx(math.log10(roofline * 1e6), rel=1e-6)
    assert f["log2_intensity_over_ridge"] == pytest.approx(math.log2(flops / min_bytes / (750e12 / 3000e9)), rel=1e-6)
    assert f["log2_tile_intensity"] == pytest.approx(math.log2(2 * 64 * 128 / (192 * 2)))
    est = max(2 * 64 * 128 * 64 * 8 * 4 * 4 / (750e12 * 32 / 396), reread / 3000e9)
    # version 3: the estimates over the roofline time (log10 of the ratio)
    assert f["log10_est_over_roofline"] == pytest.approx(math.log10(est / roofline), rel=1e-5)
    # equal tiles of 4 k-iterations, 32 of them over 44 programs: the busiest runs one; the mean is 128 / 44
    assert f["log2_crit_k_iters"] == pytest.approx(math.log2(1 + 4))
    assert f["log2_crit_imbalance"] == pytest.approx(math.log2(4 * 44 / 128))
    iter_s = 396 * max(2 * 64 * 128 * 64 / 750e12, 192 * 64 * 2 / 3000e9)  # memory bound: 8.192 ns x 396 slots
    assert f["log10_crit_over_roofline"] == pytest.approx(math.log10(4 * iter_s / roofline), rel=1e-5)
    assert (f["layout_2d3d"], f["layout_3d2d"], f["layout_2d2d"], f["layout_3d3d"]) == (1, 0, 0, 0)
    assert (f["elem_bytes"], f["a_k_major"], f["b_k_major"], f["log2_groups"]) == (2, 1, 1, 2)
    assert f["log2_call_m"] == pytest.approx(math.log2(429)) and f["log2_call_n"] == pytest.approx(math.log2(513))
    assert f["log2_mg_mean"] == pytest.approx(math.log2(108)) and f["empty_frac"] == 0.25
    assert f["size_cv"] == pytest.approx(statistics.pstdev([100, 0, 300, 28]) / 107, rel=1e-6)
    assert (f["log2_block_m"], f["log2_block_n"], f["log2_block_k"], f["num_stages"]) == (6, 7, 6, 3)
    assert (f["log2_num_warps"], f["log2_group_m"], f["tma"], f["warp_specialize"]) == (2, 0, 0, 0)


def test_golden_ragged_k_fp32_with_an_empty_group_h200_measured():
    p = PROBLEMS[3]  # 2d2d, K sizes (0, 96, 1000), M=200, N=96, fp32, B n-major
    f = row(F.problem_config_matrix(p, (KernelConfig(128, 32, 32, 2, 4, 8, "tma"),), H200_MEASURED))
    # every group: ceil(200/128) = 2 x ceil(96/32) = 3 tiles, empty ones included (they write zeros)
    assert f["log2_total_tiles"] == pytest.approx(math.log2(1 + 18))
    # k-loop: ceil(K_g/32) = 0, 3, 32 over 6 tiles each -> 35/3 per tile
    assert f["log2_k_iters"] == pytest.approx(math.log2(1 + 35 / 3), rel=1e-6)
    # 18 programs, one tile each: the busiest runs a tile of the K=1000 group, 32 iterations, against 210 / 18 mean
    assert f["log2_crit_k_iters"] == pytest.approx(math.log2(1 + 32))
    assert f["log2_crit_imbalance"] == pytest.approx(math.log2(32 * 18 / 210), rel=1e-6)
    assert f["stages_per_k_iter"] == pytest.approx(2 / (35 / 3), rel=1e-6)
    assert f["pad_waste_k"] == pytest.approx(1 - 1096 / (32 * 35), rel=1e-6)
    assert f["pad_waste_m"] == pytest.approx(1 - 200 / 256) and f["pad_waste_n"] == 0
    # smem 2 * 160 * 32 * 4 + 1024 = 41984: 5 per SM; registers 65536 // (128 * (32 + 64)) = 5 too
    assert f["log2_smem_bytes"] == pytest.approx(math.log2(41984)) and f["occupancy"] == 5
    assert f["waves"] == pytest.approx(18 / 660) and f["log2_programs"] == pytest.approx(math.log2(18))
    assert f["log2_tiles_per_program"] == pytest.approx(1.0)
    rate, bw = 700e12 / 15, 4000e9
    assert f["log2_ridge"] == pytest.approx(math.log2(rate / bw), rel=1e-6)
    assert f["log2_tile_intensity"] == pytest.approx(math.log2(2 * 128 * 32 / (160 * 4)))
    assert f["log2_tile_intensity_over_ridge"] == pytest.approx(math.log2(12.8 / (rate / bw)), rel=1e-5)
    flops = 2 * 200 * 96 * 1096
    min_bytes = 4 * (200 * 1096 + 1096 * 96 + 3 * 200 * 96)
    roofline = max(flops / rate, min_bytes / bw)
    assert f["log10_roofline_us"] == pytest.approx(math.log10(1e6 * roofline), rel=1e-6)
    reread = 4 * (200 * 1096 * 3 + 1096 * 96 * 2 + 3 * 200 * 96)
    assert f["log2_reread"] == pytest.approx(math.log2(reread / min_bytes), rel=1e-6)
    iter_s = 660 * max(2 * 128 * 32 * 32 / rate, 160 * 32 * 4 / bw)  # fp32: compute bound, 5.6 ns x 660 slots
    assert f["log10_crit_over_roofline"] == pytest.approx(math.log10(32 * iter_s / roofline), rel=1e-5)
    assert f["empty_frac"] == pytest.approx(1 / 3) and f["log2_size_min"] == 0
    assert (f["layout_2d2d"], f["elem_bytes"], f["b_k_major"], f["tma"], f["log2_group_m"]) == (1, 4, 0, 1, 3)
    assert f["log2_sm_count"] == pytest.approx(math.log2(132))


# ---------------------------------------------------------------------------------------------------------------
# The vectorized paths against the reference, and against each other
# ---------------------------------------------------------------------------------------------------------------


def random_problem(rng: random.Random) -> Problem:
    layout = rng.choice(list(LAYOUTS))
    groups = rng.choice([1, 2, 5, 16])
    dims = {d: rng.choice([1, 17, 128, 1000, 4096]) for d in "mnk"}
    sizes: tuple[int, ...] = ()
    if layout != "3d3d":
        sizes = tuple(rng.choice([0, 1, 16, 100, 333, 2048]) for _ in range(groups))
        dims[{"2d3d": "m", "3d2d": "n", "2d2d": "k"}[layout]] = 0
    dtype = rng.choice(list(DTYPES))
    return Problem(layout, groups, sizes, dtype=dtype, a_major=rng.choice("km"), b_major=rng.choice("kn"), **dims)


def sample_frame(seed: int, n_problems: int = 12, per_problem: int = 25) -> tuple[pd.DataFrame, list]:
    """A dataset-like frame, problems interleaved (not contiguous), with the (problem, config) of each row."""
    rng = random.Random(seed)
    pairs = [(random_problem(rng), c) for _ in range(n_problems) for c in rng.sample(all_configs(), per_problem)]
    rng.shuffle(pairs)
    probs = pd.DataFrame([problem_columns(p) for p, _ in pairs])
    cfgs = F.config_frame([c for _, c in pairs])
    return pd.concat([probs, cfgs], axis=1), pairs


@pytest.mark.parametrize("keyed_by", ["problem_id", "scalar columns"])
@pytest.mark.parametrize("device", [H100, H200_MEASURED, SMALL_SMEM])
def test_feature_matrix_equals_the_reference_row_by_row(keyed_by, device):
    frame, pairs = sample_frame(seed=len(keyed_by))
    if keyed_by != "problem_id":
        frame = frame.drop(columns=["problem_id"])
    x = F.feature_matrix(frame, frame, device)
    ref = np.array([list(feature_dict(p, c, device).values()) for p, c in pairs])
    assert list(feature_dict(*pairs[0], device)) == list(F.FEATURE_NAMES)
    np.testing.assert_allclose(x, ref.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_problem_config_matrix_equals_feature_matrix_and_accepts_every_config_form():
    for p in PROBLEMS:
        cfgs = feasible(p, H100)
        x = F.problem_config_matrix(p, cfgs, H100)
        frame = F.problem_frame(p)
        y = F.feature_matrix(frame.loc[[0] * len(cfgs)].reset_index(drop=True), F.config_frame(cfgs), H100)
        np.testing.assert_array_equal(x, y)
        for form in (list(cfgs), F.config_frame(cfgs), F.config_arrays(cfgs), cfgs):
            np.testing.assert_array_equal(F.problem_config_matrix(p, form, H100), x)
    assert F.config_arrays(all_configs()) is F.config_arrays(all_configs())  # a tuple is cached by identity


def test_problem_vector_is_the_problem_columns_of_the_matrix():
    from autoheur.features.core import N_PROBLEM, problem_vector

    for dev in (H100, SMALL_SMEM):
        for p in PROBLEMS:
            v = problem_vector(p, dev)
            assert v.dtype == np.float32 and v.shape == (N_PROBLEM,)
            np.testing.assert_array_equal(v, F.problem_config_matrix(p, feasible(p, dev)[:3], dev)[0, :N_PROBLEM])


def test_prepare_configs_caches_what_the_matrix_reads():
    from autoheur.features import core

    cfgs = tuple(feasible(PROBLEMS[0], H100))
    core.prepare_configs(cfgs, DTYPES[PROBLEMS[0].dtype].itemsize, H100)
    key = (id(F.config_arrays(cfgs)), float(DTYPES[PROBLEMS[0].dtype].itemsize), F.device_params(H100))
    block = core._BLOCKS[key][1]
    F.problem_config_matrix(PROBLEMS[0], cfgs, H100)
    assert core._BLOCKS[key][1] is block  # the matrix found it, built nothing


def test_one_candidate_tuple_across_dtypes_and_devices_keeps_each_its_own_features():
    # inference keeps what depends only on the configs per tuple, element size and device: calls that alternate
    # them must each get their own (fp32 and fp16 problems, two devices, the same tuple object)
    cfgs = all_configs()
    calls = [(p, dev) for dev in (H100, SMALL_SMEM) for p in (PROBLEMS[0], PROBLEMS[2], PROBLEMS[3])] * 2
    for p, dev in calls:
        x = F.problem_config_matrix(p, cfgs, dev)
        frame = F.problem_frame(p)
        y = F.feature_matrix(frame.loc[[0] * len(cfgs)].reset_index(drop=True), F.config_frame(cfgs), dev)
        np.testing.assert_array_equal(x, y)
        assert x.flags.c_contiguous  # what XGBoost's prediction reads without a copy


def test_a_dataset_table_goes_straight_in():
    p = PROBLEMS[2]
    cfgs = feasible(p, H100)[:40]
    frame = rows_for(p, [(c, "wrong", None) for c in cfgs]).to_pandas()  # the store's rows, as read back
    np.testing.assert_array_equal(F.feature_matrix(frame, frame, H100), F.problem_config_matrix(p, cfgs, H100))


def test_problem_frame_has_the_schema_problem_columns():
    for p in PROBLEMS:
        assert F.problem_frame(p).iloc[0].to_dict().keys() == problem_columns(p).keys()
        assert set(F.SCALAR_COLUMNS) | {"sizes"} <= set(problem_columns(p))


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.layout}-g{p.groups}-{p.dtype}")
@pytest.mark.parametrize("device", [H100, SMALL_SMEM])
def test_finite_over_the_whole_feasible_space(problem, device):
    x = F.problem_config_matrix(problem, feasible(problem, device), device)
    assert x.shape[0] > 100 and np.isfinite(x).all()
    assert (x[:, COL["pad_waste_m"]] >= 0).all() and (x[:, COL["pad_waste_m"]] < 1).all()
    assert (x[:, COL["last_wave_idle_frac"]] >= 0).all() and (x[:, COL["last_wave_idle_frac"]] < 1).all()


def test_batched_problem_arrays_need_no_array_per_batch(small_memory):
    """A 3d3d problem's size statistics are one batch's: equal to those of the array of M per batch that they were
    computed over, and a problem of 2**31 batches (a 16 GiB array: under a 1 GiB cap, MemoryError) needs none."""
    from autoheur.features.core import problem_vector

    fields = ("size_mean", "size_max", "size_min", "size_std", "empty", "total", "tile_sums", "flops", "min_bytes")
    for groups, m in ((1, 1), (8, 33), (1000, 4097)):
        p = Problem("3d3d", groups, (), m, 4097, 129)
        ext = np.full(groups, float(m))
        new = fproblem.ProblemArrays.from_problem(p)
        stats = (new.size_mean, new.size_max, new.size_min, new.size_std)
        assert stats == (ext.mean(), ext.max(), ext.min(), ext.std())
        framed = fproblem.ProblemArrays.from_frame(F.problem_frame(p))
        for name in fields:
            np.testing.assert_array_equal(getattr(new, name), getattr(framed, name), err_msg=name)
    big = Problem("3d3d", 2**31 - 1, (), 1, 1, 1)
    cfgs = feasible(big, H100)
    x, peak = small_memory(lambda: F.problem_config_matrix(big, cfgs, H100))
    assert np.isfinite(x).all() and x[0, COL["log2_groups"]] == np.float32(math.log2(2**31 - 1))
    assert x[0, COL["size_cv"]] == 0 and peak < 64 * 2**20
    v, peak = small_memory(lambda: problem_vector(big, H100))
    np.testing.assert_array_equal(v, x[0, : len(v)])
    assert peak < 2**20


def test_all_empty_call_has_no_tiles_and_stays_finite():
    x = F.problem_config_matrix(PROBLEMS[1], all_configs(), H100)
    assert np.isfinite(x).all()
    assert (x[:, COL["log2_total_tiles"]] == 0).all() and (x[:, COL["waves"]] == 0).all()
    assert (x[:, COL["log2_flops"]] == 0).all() and (x[:, COL["empty_frac"]] == 1).all()


def test_without_sizes_tile_counts_are_estimated_within_bounds():
    frame, pairs = sample_frame(seed=7)
    exact = F.feature_matrix(frame, frame, H100)
    est = F.feature_matrix(frame.drop(columns=["sizes"]), frame.drop(columns=["sizes"]), H100)
    assert np.isfinite(est).all()
    same = [j for n, j in COL.items() if not re.search("tile|wave|program|pad|k_iter|reread|est_over|crit", n)]
    np.testing.assert_array_equal(est[:, same], exact[:, same])
    for i, (p, c) in enumerate(pairs):
        if p.layout in ("2d3d", "3d2d"):  # sum_g ceil(s_g / B) is between total / B and total / B + nonempty
            b, name = (c.block_m, "m") if p.layout == "2d3d" else (c.block_n, "n")
            s_est = (2.0 ** float(est[i, COL[f"log2_tiles_{name}_per_group"]]) - 1) * p.groups
            nonempty = sum(1 for s in p.sizes if s)
            assert p.total / b * (1 - 1e-5) - 1e-3 <= s_est <= (p.total / b + nonempty) * (1 + 1e-5) + 1e-3


def test_results_are_deterministic():
    frame, _ = sample_frame(seed=3)
    np.testing.assert_array_equal(F.feature_matrix(frame, frame, H100), F.feature_matrix(frame, frame, H100))


def test_misaligned_frames_and_bad_inputs_are_refused():
    frame, _ = sample_frame(seed=1, n_problems=2, per_problem=3)
    with pytest.raises(ValueError, match="row-aligned"):
        F.feature_matrix(frame, frame.iloc[:-1], H100)
    with pytest.raises(ValueError, match="lacks columns"):
        F.feature_matrix(frame.drop(columns=["size_std"]), frame, H100)
    with pytest.raises(ValueError, match="lacks"):
        F.feature_matrix(frame, frame, {"sm_count": 132})
    bad = frame.assign(block_m=48)
    with pytest.raises(ValueError, match="block sizes"):
        F.feature_matrix(frame, bad, H100)


# ---------------------------------------------------------------------------------------------------------------
# Device rates
# ---------------------------------------------------------------------------------------------------------------


def test_device_rates_default_by_name_when_not_measured():
    h100 = F.device_params(H100)
    assert (h100.copy_GBps, h100.matmul_TFLOPs, h100.measured) == (3000.0, 750.0, False)
    h200 = F.device_params({**H200.to_dict(), "copy_GBps": None, "matmul_TFLOPs": None})
    assert (h200.copy_GBps, h200.matmul_TFLOPs) == (4400.0, 750.0)
    other = F.device_params({**H100, "name": "Some GPU", "copy_GBps": float("nan")})
    assert (other.copy_GBps, other.matmul_TFLOPs) == (3000.0, 750.0)
    measured = F.device_params(H200_MEASURED)
    assert (measured.copy_GBps, measured.matmul_TFLOPs, measured.measured) == (4000.0, 700.0, True)
    assert F.device_params(H100_SXM) == h100  # a DeviceSpec works as well as its dict
    no_threads = dict(H100)
    del no_threads["max_threads_per_sm"]
    assert F.device_params(no_threads).max_threads_per_sm == 2048


def test_measured_rates_move_only_the_rate_features():
    p, cfgs = PROBLEMS[0], feasible(PROBLEMS[0], H100)[:50]
    a = F.problem_config_matrix(p, cfgs, H100)
    b = F.problem_config_matrix(p, cfgs, {**H100, "copy_GBps": 2000.0, "matmul_TFLOPs": 500.0})
    moved = {F.FEATURE_NAMES[j] for j in np.flatnonzero((a != b).any(axis=0))}
    assert moved <= {"log10_roofline_us", "log2_intensity_over_ridge", "log2_ridge", "log2_tile_intensity_over_ridge",
                     "log10_est_over_roofline", "log10_crit_over_roofline"}  # fmt: skip
    assert "log10_roofline_us" in moved


# ---------------------------------------------------------------------------------------------------------------
# The busiest program (log2_crit_k_iters): an estimate of the round-robin deal, checked against the deal itself
# ---------------------------------------------------------------------------------------------------------------


def _dealt_max(k_per_tile: np.ndarray, programs: int) -> float:
    """The most k-iterations any program runs when tile t goes to program t % programs."""
    return float(np.bincount(np.arange(len(k_per_tile)) % programs, weights=k_per_tile).max())


def test_critical_k_iters_is_the_wave_count_for_equal_tiles():
    from autoheur.features.derived import critical_k_iters

    for tiles, programs, k in [(32, 44, 4), (1000, 132, 7), (264, 132, 16), (265, 132, 16)]:
        expected = math.ceil(tiles / programs) * k
        assert critical_k_iters(float(tiles), float(k), float(programs), float(k), 0.0) == expected
        assert _dealt_max(np.full(tiles, float(k)), programs) == expected


def test_critical_k_iters_follows_the_largest_ragged_k_group():
    from autoheur.features.derived import critical_k_iters

    # 17 groups of 21 tiles on 132 programs, one group 103 k-iterations long, the others 21 on average
    k_groups = np.array([103.0] + [21.0] * 16)
    k_tiles = np.repeat(k_groups, 21)
    est = critical_k_iters(float(len(k_tiles)), k_tiles.mean(), 132.0, 103.0, 21.0)
    assert est == 103 + 2 * 21  # one tile of the long group, two of the rest: 3 = ceil(357 / 132) tiles
    assert est == _dealt_max(k_tiles, 132)  # here the estimate is the deal exactly
    rng = np.random.default_rng(0)
    for _ in range(200):  # in general it is bounded by the longest tile and by ceil(T / P) of them
        t0, programs = int(rng.integers(1, 130)), int(rng.choice([132, 264, 396]))
        k_groups = np.ceil(np.minimum(rng.zipf(1.5, int(rng.integers(2, 129))) * 40, 5000) / 64)
        k_tiles = np.repeat(k_groups, t0)
        p = min(programs, len(k_tiles))
        est = critical_k_iters(float(len(k_tiles)), k_tiles.mean(), float(p), k_groups.max(), float(t0))
        assert k_groups.max() <= est <= math.ceil(len(k_tiles) / p) * k_groups.max() + 1e-9
        assert est <= 3 * _dealt_max(k_tiles, p)
