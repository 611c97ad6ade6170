"""The problem side of the features: per-problem arrays, computed once per distinct problem, and their features.

A problem frame has the dataset schema's problem columns (`autoheur.collect.schema.problem_columns`). Everything here
is computed on the distinct problems of a frame (hundreds), never on its rows (millions); the row-level code gathers.
Only one dimension is ragged per layout, so every per-group sum the features need is either a fixed extent times the
group count or a sum over the ragged sizes: `ProblemArrays.tile_sums` holds sum_g ceil(s_g / B) for every block
size B, the one quantity that needs the exact sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from autoheur.features.device import FP32_SLOWDOWN, DeviceParams

if TYPE_CHECKING:
    from autoheur.problem import Problem

# Copies of autoheur.problem / autoheur.kernels.config facts (importing those pulls in torch and triton);
# tests/features/test_core.py checks that they agree.
ELEM_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
LAYOUT_RAGGED = {"3d3d": 0, "2d3d": 1, "3d2d": 2, "2d2d": 3}  # Ragged: NONE, M, N, K
LAYOUTS = ("2d3d", "3d2d", "2d2d", "3d3d")  # one-hot order of the layout features
BLOCKS = (16, 32, 64, 128, 256)  # every BLOCK_M / BLOCK_N / BLOCK_K value: columns of `tile_sums`
SCALAR_COLUMNS = (
    "layout", "dtype", "a_major", "b_major", "groups", "total", "m", "n", "k",
    "size_mean", "size_max", "size_min", "size_std", "empty_groups",
)  # fmt: skip
TINY = 2.0**-20  # floor of ratios before log2: features stay finite when a problem has no work

PROBLEM_FEATURES = (
    "layout_2d3d", "layout_3d2d", "layout_2d2d", "layout_3d3d", "elem_bytes", "a_k_major", "b_k_major",
    "log2_groups", "log2_call_m", "log2_call_n", "log2_call_k", "log2_mg_mean", "log2_ng_mean", "log2_kg_mean",
    "log2_size_max", "log2_size_min", "size_cv", "empty_frac",
    "log2_flops", "log2_min_bytes", "log10_roofline_us", "log2_intensity_over_ridge", "log2_group_bytes_over_l2",
    "log2_sm_count", "log2_ridge",
)  # fmt: skip


def problem_frame(problem: Problem) -> pd.DataFrame:
    """One-row frame of `problem` with exactly the dataset's problem columns (schema.problem_columns)."""
    from autoheur.collect.schema import problem_columns  # imports torch: only callers holding a Problem get here

    return pd.DataFrame([problem_columns(problem)])


@dataclass(frozen=True, slots=True)
class ProblemArrays:
    """Per-problem quantities, float64 arrays of shape (U,) (or (U, len(BLOCKS)) for `tile_sums`).

    `tm`, `tn`, `tk` are sum_g M_g, N_g, K_g over the groups; only one of them involves the ragged sizes.
    """

    ragged: np.ndarray  # 0 none, 1 M, 2 N, 3 K
    elem: np.ndarray
    a_k: np.ndarray
    b_k: np.ndarray
    groups: np.ndarray
    m: np.ndarray  # fixed extents (0 for the ragged one)
    n: np.ndarray
    k: np.ndarray
    total: np.ndarray
    size_mean: np.ndarray
    size_max: np.ndarray
    size_min: np.ndarray
    size_std: np.ndarray
    empty: np.ndarray
    tile_sums: np.ndarray  # [u, j] = sum_g ceil(s_g / BLOCKS[j]) over the ragged sizes (0 for batched)
    tm: np.ndarray
    tn: np.ndarray
    tk: np.ndarray
    flops: np.ndarray
    min_bytes: np.ndarray

    @classmethod
    def build(cls, cols: Mapping[str, np.ndarray], sizes: list | None) -> ProblemArrays:
        """From the scalar problem columns of U distinct problems and their sizes (None: estimate, see below).

        Without sizes, sum_g ceil(s_g / B) is estimated as total / B + nonempty * (1 - 1 / B) / 2 (each non-empty
        group pads half a tile on average), so tile counts are approximate; datasets always carry the sizes.
        """
        f = lambda name: np.asarray(cols[name], dtype=np.float64)
        ragged = np.array([LAYOUT_RAGGED[x] for x in cols["layout"]], dtype=np.int64)
        elem = np.array([ELEM_BYTES[x] for x in cols["dtype"]], dtype=np.float64)
        a_k = np.array([x == "k" for x in cols["a_major"]], dtype=np.float64)
        b_k = np.array([x == "k" for x in cols["b_major"]], dtype=np.float64)
        groups, total, m, n, k, empty = f("groups"), f("total"), f("m"), f("n"), f("k"), f("empty_groups")
        blocks = np.asarray(BLOCKS, dtype=np.float64)
        if sizes is None:
            nonempty = np.where(ragged == 0, 0.0, groups - empty)[:, None]
            tile_sums = total[:, None] / blocks + nonempty * (1.0 - 1.0 / blocks) / 2.0
        else:
            tile_sums = np.zeros((len(ragged), len(BLOCKS)))
            for u, s in enumerate(sizes):
                if ragged[u] != 0 and s is not None and len(s):
                    tile_sums[u] = np.ceil(np.asarray(s, dtype=np.float64)[:, None] / blocks).sum(axis=0)
        tm = np.where(ragged == 1, total, groups * m)
        tn = np.where(ragged == 2, total, groups * n)
        tk = np.where(ragged == 3, total, groups * k)
        g2 = groups * groups
        # Only one extent varies across groups, so sum_g x_g * y_g = (sum x)(sum y) / G, and the same with three.
        flops = 2.0 * tm * tn * tk / g2
        min_bytes = elem * (tm * tk + tk * tn + tm * tn) / groups
        return cls(
            ragged, elem, a_k, b_k, groups, m, n, k, total, f("size_mean"), f("size_max"), f("size_min"),
            f("size_std"), empty, tile_sums, tm, tn, tk, flops, min_bytes,
        )  # fmt: skip

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> ProblemArrays:
        """From a frame whose rows are distinct problems (the `sizes` column is used when present)."""
        missing = [c for c in SCALAR_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"problem frame lacks columns {missing}; build it with problem_frame() or the schema")
        cols = {c: frame[c].to_numpy() for c in SCALAR_COLUMNS}
        sizes = list(frame["sizes"]) if "sizes" in frame.columns else None
        return cls.build(cols, sizes)

    @classmethod
    def from_problem(cls, problem: Problem) -> ProblemArrays:
        """From one `Problem`, without a frame: the inference path (statistics as schema.problem_columns)."""
        sizes = problem.sizes
        if sizes:
            ext = np.asarray(sizes, dtype=np.float64)
            stats = ext.mean(), ext.max(), ext.min(), ext.std()
        else:  # batched: every batch is M, so one batch's statistics (an array of M per batch took 16 GiB at 2**31)
            stats = float(problem.m), float(problem.m), float(problem.m), 0.0
        cols = dict(
            layout=[problem.layout], dtype=[problem.dtype], a_major=[problem.a_major], b_major=[problem.b_major],
            groups=[problem.groups], total=[sum(sizes)], m=[problem.m], n=[problem.n], k=[problem.k],
            size_mean=[stats[0]], size_max=[stats[1]], size_min=[stats[2]], size_std=[stats[3]],
            empty_groups=[sum(1 for s in sizes if s == 0)],
        )  # fmt: skip
        return cls.build(cols, [sizes])

    def rates(self, dev: DeviceParams) -> tuple[np.ndarray, float]:
        """(matmul FLOP/s per problem, copy bytes/s): fp32 problems run without tensor cores."""
        rate = dev.matmul_TFLOPs * 1e12 / np.where(self.elem == 4, FP32_SLOWDOWN, 1.0)
        return rate, dev.copy_GBps * 1e9


def log2p(x):
    """log2(1 + x): counts and extents that may be 0."""
    return np.log2(1.0 + x)


def log2_ratio(x):
    """log2 of a ratio, floored at TINY so a problem with no work stays finite."""
    return np.log2(np.maximum(x, TINY))


def log10_us(seconds):
    """log10 of a time in microseconds, floored at 1 ns so that a call with no work stays finite."""
    return np.log10(np.maximum(seconds * 1e6, 1e-3))


def roofline_seconds(flops, min_bytes, rate, bw):
    """The best time any config can reach: the useful FLOPs at the matmul rate or the compulsory bytes at the
    bandwidth, whichever is longer."""
    return np.maximum(flops / rate, min_bytes / bw)


def problem_features(p: ProblemArrays, dev: DeviceParams) -> dict[str, np.ndarray]:
    """The PROBLEM_FEATURES of each distinct problem, float64 arrays of shape (U,)."""
    rate, bw = p.rates(dev)
    seconds = roofline_seconds(p.flops, p.min_bytes, rate, bw)
    ridge = rate / bw
    g = p.groups
    out = {f"layout_{name}": (p.ragged == LAYOUT_RAGGED[name]).astype(np.float64) for name in LAYOUTS}
    out.update(
        elem_bytes=p.elem,
        a_k_major=p.a_k,
        b_k_major=p.b_k,
        log2_groups=np.log2(g),
        log2_call_m=log2p(np.where(p.ragged == 1, p.total, p.m)),
        log2_call_n=log2p(np.where(p.ragged == 2, p.total, p.n)),
        log2_call_k=log2p(np.where(p.ragged == 3, p.total, p.k)),
        log2_mg_mean=log2p(p.tm / g),
        log2_ng_mean=log2p(p.tn / g),
        log2_kg_mean=log2p(p.tk / g),
        log2_size_max=log2p(p.size_max),
        log2_size_min=log2p(p.size_min),
        size_cv=np.where(p.size_mean > 0, p.size_std / np.maximum(p.size_mean, TINY), 0.0),
        empty_frac=p.empty / g,
        log2_flops=log2p(p.flops),
        log2_min_bytes=log2p(p.min_bytes),
        log10_roofline_us=log10_us(seconds),
        log2_intensity_over_ridge=log2_ratio(p.flops / np.maximum(p.min_bytes, 1.0) / ridge),
        log2_group_bytes_over_l2=log2_ratio(p.elem * (p.tm * p.tk + p.tk * p.tn) / (g * g) / dev.l2_bytes),
        log2_sm_count=np.full(len(g), math.log2(dev.sm_count)),
        log2_ridge=np.log2(ridge) + np.zeros(len(g)),
    )
    assert tuple(out) == PROBLEM_FEATURES
    return out
