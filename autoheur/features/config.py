"""The config side of the features: config frames, their numpy arrays (cached for inference), their features.

`smem_bytes`, `acc_regs` and `occupancy` vectorize the formulas of autoheur/kernels/config.py (importing that module
pulls in torch and triton through autoheur.kernels); tests/features/test_core.py checks they agree config by config.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from autoheur.features.device import DeviceParams
from autoheur.features.problem import BLOCKS

if TYPE_CHECKING:
    from autoheur.kernels.config import KernelConfig

# Copies of autoheur/kernels/config.py constants (checked equal by the tests).
SMEM_RESERVE = 1024
OTHER_REGS = 64
MAX_OCCUPANCY = 8
MAX_REGS_PER_THREAD = 255

CONFIG_COLUMNS = ("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m", "load", "warp_specialize")
CONFIG_FEATURES = (
    "log2_block_m", "log2_block_n", "log2_block_k", "num_stages", "log2_num_warps", "log2_group_m", "tma",
    "warp_specialize", "log2_smem_bytes", "smem_frac_sm", "occupancy", "log2_acc_regs", "log2_tile_intensity",
)  # fmt: skip


def config_frame(configs: Sequence[KernelConfig]) -> pd.DataFrame:
    """Frame of `configs` with the dataset's config columns (KernelConfig.to_dict), one row per config."""
    return pd.DataFrame(
        {name: [getattr(c, name) for c in configs] for name in CONFIG_COLUMNS}, columns=list(CONFIG_COLUMNS)
    )


@dataclass(frozen=True, slots=True, eq=False)
class ConfigArrays:
    """The config columns as float64 arrays of shape (n,); `tma` and `ws` are 0/1."""

    bm: np.ndarray
    bn: np.ndarray
    bk: np.ndarray
    stages: np.ndarray
    warps: np.ndarray
    group_m: np.ndarray
    tma: np.ndarray
    ws: np.ndarray

    def __len__(self) -> int:
        return len(self.bm)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> ConfigArrays:
        missing = [c for c in CONFIG_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"config frame lacks columns {missing}; build it with config_frame() or the schema")
        f = lambda name: frame[name].to_numpy(dtype=np.float64)
        tma = (frame["load"] == "tma").to_numpy(dtype=bool, na_value=False)
        out = cls(
            f("block_m"), f("block_n"), f("block_k"), f("num_stages"), f("num_warps"), f("group_m"),
            tma.astype(np.float64), frame["warp_specialize"].to_numpy(dtype=np.float64),
        )  # fmt: skip
        out.check()
        return out

    @classmethod
    def from_configs(cls, configs: Sequence[KernelConfig]) -> ConfigArrays:
        tile = operator.attrgetter("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m")
        rows = np.array([(*tile(c), c.load == "tma", c.warp_specialize) for c in configs], dtype=np.float64)
        rows = rows.reshape(-1, 8)
        out = cls(*(np.ascontiguousarray(rows[:, j]) for j in range(8)))
        out.check()
        return out

    def check(self) -> None:
        for name in ("bm", "bn", "bk"):
            v = getattr(self, name)
            if len(v) and not np.isin(v, BLOCKS).all():
                raise ValueError(f"config {name} values {sorted(set(v.tolist()))} outside the block sizes {BLOCKS}")


_CACHE: dict[int, tuple[tuple, ConfigArrays]] = {}
_CACHE_SIZE = 16


def config_arrays(configs) -> ConfigArrays:
    """`ConfigArrays` of a config frame, a sequence of KernelConfig, or a ConfigArrays.

    A tuple of configs (such as `all_configs()` or a model's candidate tuple) is cached by identity: the second call
    with the same tuple object costs nothing. Lists and frames are converted on every call.
    """
    if isinstance(configs, ConfigArrays):
        return configs
    if isinstance(configs, pd.DataFrame):
        return ConfigArrays.from_frame(configs)
    if isinstance(configs, tuple):
        hit = _CACHE.get(id(configs))
        if hit is not None and hit[0] is configs:
            return hit[1]
        arrays = ConfigArrays.from_configs(configs)
        for a in (arrays.bm, arrays.bn, arrays.bk, arrays.stages, arrays.warps, arrays.group_m, arrays.tma, arrays.ws):
            a.flags.writeable = False  # shared by every later call with this tuple
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[id(configs)] = (configs, arrays)  # holds the tuple: its id cannot be reused while cached
        return arrays
    return ConfigArrays.from_configs(list(configs))


def smem_bytes(c: ConfigArrays, elem) -> np.ndarray:
    """kernels.config.smem_bytes: one A and one B tile per pipeline stage, plus Triton's reserve."""
    return c.stages * (c.bm + c.bn) * c.bk * elem + SMEM_RESERVE


def acc_regs(c: ConfigArrays) -> np.ndarray:
    """kernels.config.acc_regs_per_thread: fp32 accumulator registers per thread."""
    return np.floor(c.bm * c.bn / (32.0 * c.warps))


def occupancy(c: ConfigArrays, elem, dev: DeviceParams, smem: np.ndarray | None = None) -> np.ndarray:
    """kernels.config.occupancy: persistent programs per SM allowed by shared memory, threads and registers."""
    smem = smem_bytes(c, elem) if smem is None else smem
    threads = 32.0 * c.warps
    regs = np.minimum(MAX_REGS_PER_THREAD, acc_regs(c) + OTHER_REGS)
    by_smem = np.floor(dev.smem_per_sm / smem)
    by_threads = np.floor(dev.max_threads_per_sm / threads)
    by_regs = np.floor(dev.regs_per_sm / (threads * regs))
    return np.maximum(1.0, np.minimum(np.minimum(by_smem, by_threads), np.minimum(by_regs, MAX_OCCUPANCY)))


def config_features(c: ConfigArrays, elem, dev: DeviceParams) -> dict[str, np.ndarray]:
    """The CONFIG_FEATURES; `elem` (bytes per element) is a scalar or an array broadcasting with the configs."""
    smem = smem_bytes(c, elem)
    out = dict(
        log2_block_m=np.log2(c.bm),
        log2_block_n=np.log2(c.bn),
        log2_block_k=np.log2(c.bk),
        num_stages=c.stages,
        log2_num_warps=np.log2(c.warps),
        log2_group_m=np.log2(c.group_m),
        tma=c.tma,
        warp_specialize=c.ws,
        log2_smem_bytes=np.log2(smem),
        smem_frac_sm=smem / dev.smem_per_sm,
        occupancy=occupancy(c, elem, dev, smem),
        log2_acc_regs=np.log2(np.maximum(acc_regs(c), 1.0)),
        log2_tile_intensity=np.log2(2.0 * c.bm * c.bn / ((c.bm + c.bn) * elem)),
    )
    assert tuple(out) == CONFIG_FEATURES
    return out
