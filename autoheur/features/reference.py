"""The features of one (problem, config) pair in plain Python: the readable definition and the tests' oracle.

Loops over the groups of `Problem.per_group()` and calls autoheur.kernels.config's own smem/occupancy functions, so
it shares no shortcut with the vectorized path (sums factored through `tile_sums`, copied constants). Slow; use
`feature_matrix` / `problem_config_matrix` for real work. Needs torch (through Problem and autoheur.kernels).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING

from autoheur.features.device import FP32_SLOWDOWN, device_params
from autoheur.features.problem import ELEM_BYTES, LAYOUTS, TINY

if TYPE_CHECKING:
    from autoheur.kernels.config import KernelConfig
    from autoheur.problem import Problem


def feature_dict(problem: Problem, config: KernelConfig, device: Mapping) -> dict[str, float]:
    """{feature name: value} in FEATURE_NAMES order, computed group by group."""
    from autoheur.kernels.config import acc_regs_per_thread, occupancy, smem_bytes

    dev = device_params(device)
    e = ELEM_BYTES[problem.dtype]
    groups = problem.groups
    per = problem.per_group()
    sizes = list(problem.sizes) or [problem.m] * groups
    big_m, big_n, big_k = problem.dims()
    rate = dev.matmul_TFLOPs * 1e12 / (FP32_SLOWDOWN if e == 4 else 1.0)
    bw = dev.copy_GBps * 1e9
    ridge = rate / bw
    log2p = lambda x: math.log2(1.0 + x)
    log2_ratio = lambda x: math.log2(max(x, TINY))

    flops = sum(2.0 * m * n * k for m, n, k in per)
    min_bytes = float(e * sum(m * k + k * n + m * n for m, n, k in per))
    mean = statistics.fmean(sizes)
    f: dict[str, float] = {f"layout_{name}": float(problem.layout == name) for name in LAYOUTS}
    roofline_us = math.log10(max(1e6 * max(flops / rate, min_bytes / bw), 1e-3))
    f.update(
        elem_bytes=e,
        a_k_major=float(problem.a_major == "k"),
        b_k_major=float(problem.b_major == "k"),
        log2_groups=math.log2(groups),
        log2_call_m=log2p(big_m),
        log2_call_n=log2p(big_n),
        log2_call_k=log2p(big_k),
        log2_mg_mean=log2p(sum(m for m, _, _ in per) / groups),
        log2_ng_mean=log2p(sum(n for _, n, _ in per) / groups),
        log2_kg_mean=log2p(sum(k for _, _, k in per) / groups),
        log2_size_max=log2p(max(sizes)),
        log2_size_min=log2p(min(sizes)),
        size_cv=statistics.pstdev(sizes) / mean if mean > 0 else 0.0,
        empty_frac=sum(1 for s in problem.sizes if s == 0) / groups,
        log2_flops=log2p(flops),
        log2_min_bytes=log2p(min_bytes),
        log10_roofline_us=roofline_us,
        log2_intensity_over_ridge=log2_ratio(flops / min_bytes / ridge),
        log2_group_bytes_over_l2=log2_ratio(e * sum(m * k + k * n for m, n, k in per) / groups / dev.l2_bytes),
        log2_sm_count=math.log2(dev.sm_count),
        log2_ridge=math.log2(ridge),
    )

    bm, bn, bk = config.block_m, config.block_n, config.block_k
    smem = smem_bytes(config, e)
    occ = occupancy(config, e, dev)  # DeviceParams has the three fields occupancy reads
    tile_intensity = math.log2(2 * bm * bn / ((bm + bn) * e))
    f.update(
        log2_block_m=math.log2(bm),
        log2_block_n=math.log2(bn),
        log2_block_k=math.log2(bk),
        num_stages=config.num_stages,
        log2_num_warps=math.log2(config.num_warps),
        log2_group_m=math.log2(config.group_m),
        tma=float(config.load == "tma"),
        warp_specialize=float(config.warp_specialize),
        log2_smem_bytes=math.log2(smem),
        smem_frac_sm=smem / dev.smem_per_sm,
        occupancy=occ,
        log2_acc_regs=math.log2(acc_regs_per_thread(config)),
        log2_tile_intensity=tile_intensity,
    )

    grid = [(math.ceil(m / bm), math.ceil(n / bn), math.ceil(k / bk)) for m, n, k in per]
    tiles = sum(tm * tn for tm, tn, _ in grid)
    slots = dev.sm_count * occ
    full = math.ceil(tiles / slots)
    # kernels.grouped_gemm.num_programs, written out for a Problem (it takes a validated call)
    ragged = problem.ragged.name
    if ragged == "M":
        bound = (math.ceil(problem.total / bm) + groups) * math.ceil(problem.n / bn)
    elif ragged == "N":
        bound = math.ceil(problem.m / bm) * (math.ceil(problem.total / bn) + groups)
    else:
        bound = groups * math.ceil(problem.m / bm) * math.ceil(problem.n / bn)
    programs = max(1, min(bound, slots))
    padded_m = sum(tm * bm for tm, _, _ in grid)
    padded_n = sum(tn * bn for _, tn, _ in grid)
    padded_k = sum(tk * bk for _, _, tk in grid)
    padded_flops = sum(2.0 * tm * bm * tn * bn * tk * bk for tm, tn, tk in grid)
    waste = lambda true, padded: 1.0 - true / padded if padded > 0 else 0.0
    if tiles:
        k_iters = sum(tm * tn * tk for tm, tn, tk in grid) / tiles
    else:
        k_iters = sum(tk for _, _, tk in grid) / groups
    traffic = e * sum(m * k * tn + k * n * tm + m * n for (m, n, k), (tm, tn, _) in zip(per, grid, strict=True))
    wave_eff = tiles / (full * slots) if tiles else 1.0
    est = max(padded_flops / (rate * wave_eff), traffic / bw)
    # the busiest program: ceil(t*/P) of the longest tiles (group g*: most k-iterations among groups with tiles,
    # t* tiles of k* iterations), the rest of its ceil(T/P) tiles at the mean of the others
    work = sum(tm * tn * tk for tm, tn, tk in grid)
    with_tiles = [(tk, tm * tn) for tm, tn, tk in grid if tm * tn > 0]
    k_long, t_long = max(with_tiles, key=lambda x: x[0]) if with_tiles else (0, 0)
    long_share = math.ceil(t_long / programs)
    rest = (work - t_long * k_long) / max(tiles - t_long, 1)
    crit = long_share * k_long + max(math.ceil(tiles / programs) - long_share, 0) * rest
    iter_seconds = slots * max(2.0 * bm * bn * bk / rate, (bm + bn) * bk * e / bw)
    f.update(
        log2_tiles_m_per_group=log2p(sum(tm for tm, _, _ in grid) / groups),
        log2_tiles_n_per_group=log2p(sum(tn for _, tn, _ in grid) / groups),
        log2_total_tiles=log2p(tiles),
        waves=tiles / slots,
        last_wave_idle_frac=1.0 - (tiles - (full - 1) * slots) / slots if tiles else 0.0,
        log2_programs=math.log2(programs),
        log2_tiles_per_program=log2p(tiles / programs),
        pad_waste_m=waste(sum(m for m, _, _ in per), padded_m),
        pad_waste_n=waste(sum(n for _, n, _ in per), padded_n),
        pad_waste_k=waste(sum(k for _, _, k in per), padded_k),
        pad_waste_mnk=waste(flops, padded_flops),
        log2_k_iters=log2p(k_iters),
        stages_per_k_iter=config.num_stages / max(k_iters, 1.0),
        log2_tile_intensity_over_ridge=tile_intensity - math.log2(ridge),
        log2_reread=log2_ratio(traffic / min_bytes),
        log10_est_over_roofline=math.log10(max(1e6 * est, 1e-3)) - roofline_us,
        log2_crit_k_iters=log2p(crit),
        log2_crit_imbalance=log2_ratio(crit * programs / work) if work > 0 else 0.0,
        log10_crit_over_roofline=math.log10(max(1e6 * crit * iter_seconds, 1e-3)) - roofline_us,
    )
    return {k: float(v) for k, v in f.items()}
