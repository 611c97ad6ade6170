"""Features of a (problem, config) pair: tiles, waves, padding, k-loop, memory traffic, a crude time estimate.

Every per-group sum comes from `ProblemArrays`: sums of the fixed extents times the group count, and sum_g
ceil(s_g / B) over the ragged sizes looked up in `tile_sums` for the config's block size. With one ragged dimension,
sum_g x_g y_g z_g = (sum x)(sum y)(sum z) / G^2 whenever at most one factor varies across groups, which gives tiles,
padded FLOPs and operand re-reads exactly, without a loop over groups.
"""

from __future__ import annotations

import numpy as np

from autoheur.features.config import ConfigArrays
from autoheur.features.device import DeviceParams
from autoheur.features.problem import BLOCKS, ProblemArrays, log2_ratio, log2p, log10_us, roofline_seconds

DERIVED_FEATURES = (
    "log2_tiles_m_per_group", "log2_tiles_n_per_group", "log2_total_tiles", "waves", "last_wave_idle_frac",
    "log2_programs", "log2_tiles_per_program", "pad_waste_m", "pad_waste_n", "pad_waste_k", "pad_waste_mnk",
    "log2_k_iters", "stages_per_k_iter", "log2_tile_intensity_over_ridge", "log2_reread", "log10_est_over_roofline",
    "log2_crit_k_iters", "log2_crit_imbalance", "log10_crit_over_roofline",
)  # fmt: skip
# The busiest program of autoheur's own persistent round-robin grid (FEATURES_VERSION 2): they describe that
# schedule, not another kernel family's (rankers.FAMILY_PARAMS).
CRIT_FEATURES = ("log2_crit_k_iters", "log2_crit_imbalance", "log10_crit_over_roofline")


def derived_features(
    p: ProblemArrays,
    codes: np.ndarray | None,
    c: ConfigArrays,
    dev: DeviceParams,
    occupancy: np.ndarray,
    log2_tile_intensity: np.ndarray,
) -> dict[str, np.ndarray]:
    """The DERIVED_FEATURES of rows pairing problem `codes[i]` of `p` with config i of `c`.

    `codes` None: `p` holds one problem, paired with every config (inference).
    """
    get = (lambda a: a[0]) if codes is None else (lambda a: a[codes])
    r, g, total, elem = get(p.ragged), get(p.groups), get(p.total), get(p.elem)
    tm, tn, tk, flops = get(p.tm), get(p.tn), get(p.tk), get(p.flops)
    bm, bn, bk = c.bm, c.bn, c.bk
    tm_fixed, tn_fixed, tk_fixed = np.ceil(get(p.m) / bm), np.ceil(get(p.n) / bn), np.ceil(get(p.k) / bk)
    # sum_g ceil(s_g / B) over the ragged sizes, B the block along the ragged dimension: a lookup in tile_sums
    j = np.log2(np.where(r == 1, bm, np.where(r == 2, bn, bk))).astype(np.intp) - 4
    s_ragged = p.tile_sums[0, j] if codes is None else p.tile_sums.ravel()[codes * len(BLOCKS) + j]
    sm = np.where(r == 1, s_ragged, g * tm_fixed)  # sum_g ceil(M_g / BM)
    sn = np.where(r == 2, s_ragged, g * tn_fixed)
    sk = np.where(r == 3, s_ragged, g * tk_fixed)
    tiles = sm * sn / g

    slots = dev.sm_count * occupancy
    full_waves = np.ceil(tiles / slots)
    busy = tiles > 0
    last_idle = np.where(busy, 1.0 - (tiles - (full_waves - 1.0) * slots) / slots, 0.0)
    wave_eff = np.where(busy, tiles / np.maximum(full_waves * slots, 1.0), 1.0)
    # The launch grid (kernels.grouped_gemm.num_programs): an upper bound on the tiles that needs no device sync.
    bound = np.where(
        r == 1,
        (np.ceil(total / bm) + g) * tn_fixed,
        np.where(r == 2, tm_fixed * (np.ceil(total / bn) + g), g * tm_fixed * tn_fixed),
    )
    programs = np.maximum(1.0, np.minimum(bound, slots))

    padded_flops = 2.0 * bm * bn * bk * sm * sn * sk / (g * g)
    waste = lambda true, padded: np.where(padded > 0, 1.0 - true / np.maximum(padded, 1.0), 0.0)
    k_iters = sk / g  # mean over tiles of ceil(K_g / BK): groups with ragged K all have the same tile count

    rate, bw = p.rates(dev)
    rate = get(rate)
    k_long, tiles_long = _longest_tiles(r, get(p.size_max), tm_fixed, tn_fixed, tk_fixed, bk)
    crit = critical_k_iters(tiles, k_iters, programs, k_long, tiles_long)
    work = tiles * k_iters  # tile k-iterations of the whole call
    # one k-iteration of one program at its share (1 / slots) of the device's matmul rate and bandwidth
    iter_seconds = slots * np.maximum(2.0 * bm * bn * bk / rate, (bm + bn) * bk * elem / bw)
    # A re-read once per tile column, B once per tile row, C written once (no L2 reuse: an upper bound).
    traffic = elem * ((tm * tk * sn + tk * tn * sm) / (g * g) + tm * tn / g)
    est_seconds = np.maximum(padded_flops / (rate * wave_eff), traffic / bw)
    # The two estimates are given over the problem's roofline time (FEATURES_VERSION 3): how far this config falls
    # short of the best any config could do reads the same on a 5 us and a 5 ms problem.
    roof = log10_us(roofline_seconds(flops, get(p.min_bytes), rate, bw))
    out = dict(
        log2_tiles_m_per_group=log2p(sm / g),
        log2_tiles_n_per_group=log2p(sn / g),
        log2_total_tiles=log2p(tiles),
        waves=tiles / slots,
        last_wave_idle_frac=last_idle,
        log2_programs=np.log2(programs),
        log2_tiles_per_program=log2p(tiles / programs),
        pad_waste_m=waste(tm, bm * sm),
        pad_waste_n=waste(tn, bn * sn),
        pad_waste_k=waste(tk, bk * sk),
        pad_waste_mnk=waste(flops, padded_flops),
        log2_k_iters=log2p(k_iters),
        stages_per_k_iter=c.stages / np.maximum(k_iters, 1.0),
        log2_tile_intensity_over_ridge=log2_tile_intensity - np.log2(rate / bw),
        log2_reread=log2_ratio(traffic / np.maximum(get(p.min_bytes), 1.0)),
        log10_est_over_roofline=log10_us(est_seconds) - roof,
        log2_crit_k_iters=log2p(crit),
        log2_crit_imbalance=np.where(work > 0, log2_ratio(crit * programs / np.maximum(work, 1.0)), 0.0),
        log10_crit_over_roofline=log10_us(crit * iter_seconds) - roof,
    )
    assert tuple(out) == DERIVED_FEATURES
    return out


def _longest_tiles(r, size_max, tm_fixed, tn_fixed, tk_fixed, bk) -> tuple[np.ndarray, np.ndarray]:
    """(k-iterations of the longest tiles, how many tiles the group holding them has): with ragged K, the largest
    group's ceil(K_max / BK) over its ceil(M / BM) ceil(N / BN) tiles; otherwise every tile has ceil(K / BK) (the
    tile count then does not matter, see critical_k_iters, and is given as 0)."""
    ragged_k = r == 3
    return np.where(ragged_k, np.ceil(size_max / bk), tk_fixed), np.where(ragged_k, tm_fixed * tn_fixed, 0.0)


def critical_k_iters(tiles, k_iters, programs, k_long, tiles_long):
    """K-iterations of the busiest program of the persistent grid (FEATURES.md, `log2_crit_k_iters`).

    `programs` walk `tiles` tiles round robin, `k_iters` per tile on average. The busiest one runs ceil(tiles_long /
    programs) of the longest tiles (`k_long` iterations each, `tiles_long` of them) and fills the rest of its
    ceil(tiles / programs) tiles at the mean of the other tiles. With equal tiles this is ceil(tiles / programs) *
    k_iters; with ragged K and one large group it is the large group's k-loop, which no tiling in M or N shortens.
    Works on numpy arrays and on floats alike.
    """
    per_program = np.ceil(tiles / programs)
    long_share = np.ceil(tiles_long / programs)
    rest = (tiles * k_iters - tiles_long * k_long) / np.maximum(tiles - tiles_long, 1.0)
    return long_share * k_long + np.maximum(per_program - long_share, 0.0) * rest
