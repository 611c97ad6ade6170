"""The one definition of the grouped-GEMM config space.

`all_configs()` is the exhaustive space; `feasible_configs(sig, device)` keeps the configs that can run for a call
signature on a device. Every rule is computed from the device's properties and the signature: no per-GPU lists.
`SPACE_HASH` fingerprints the space and its feasibility rules; datasets and models carry it and refuse a mismatch.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from dataclasses import asdict, dataclass
from enum import IntEnum
from functools import cache

import numpy as np

from autoheur.device import DeviceSpec

# The axes of the space. Bump SPACE_VERSION whenever an axis or a feasibility rule changes meaning.
SPACE_VERSION = 1
BLOCK_M = (16, 32, 64, 128, 256)
BLOCK_N = (32, 64, 128, 256)
BLOCK_K = (32, 64, 128, 256)
NUM_STAGES = (2, 3, 4, 5)
NUM_WARPS = (2, 4, 8)
GROUP_M = (1, 8)  # tile order inside a group: 1 = row-major over tiles, 8 = bands of 8 tile-rows (L2 reuse of B)
LOADS = ("ptr", "tma")  # pointer loads (cp.async) or TMA descriptors built per group on the device

# Feasibility constants, with their reasons.
SMEM_RESERVE = 1024  # bytes Triton keeps for barriers and bookkeeping beyond the operand ring
MAX_ACC_REGS = 128  # fp32 accumulator registers per thread; past this the kernel spills (255-register cap)
MIN_ACC_PER_THREAD = 16  # fewer outputs per thread than one 16-row MMA fragment: the extra warps only wait
OTHER_REGS = 64  # registers per thread besides the accumulator (addresses, loop state, operand fragments)
MAX_OCCUPANCY = 8  # persistent programs per SM we ever launch


class Ragged(IntEnum):
    """Which GEMM dimension the offsets split (the torch._grouped_mm layouts)."""

    NONE = 0  # 3D x 3D: batched
    M = 1  # 2D x 3D: MoE forward, token rows split by expert
    N = 2  # 3D x 2D
    K = 3  # 2D x 2D: the weight gradient


@dataclass(frozen=True, slots=True)
class KernelConfig:
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 1
    load: str = "ptr"
    warp_specialize: bool = False

    def __post_init__(self) -> None:
        for name, allowed in (
            ("block_m", BLOCK_M),
            ("block_n", BLOCK_N),
            ("block_k", BLOCK_K),
            ("num_stages", NUM_STAGES),
            ("num_warps", NUM_WARPS),
            ("group_m", GROUP_M),
            ("load", LOADS),
        ):
            value = getattr(self, name)
            if type(value) is not type(allowed[0]):  # 64.0 or True would pass `in` and break config ids
                raise TypeError(f"KernelConfig.{name} must be a {type(allowed[0]).__name__}, got {value!r}")
            if value not in allowed:
                raise ValueError(f"KernelConfig.{name}={value!r} is not in the config space {allowed}")
        if not isinstance(self.warp_specialize, bool):
            raise TypeError(f"KernelConfig.warp_specialize must be a bool, got {self.warp_specialize!r}")
        if self.warp_specialize and self.load != "tma":
            raise ValueError("KernelConfig.warp_specialize=True needs load='tma' (the specialized loop is the TMA one)")

    @property
    def config_id(self) -> str:
        """Stable, human-readable id, e.g. 'm128n256k64s4w8g8-tma-ws'."""
        cid = f"m{self.block_m}n{self.block_n}k{self.block_k}s{self.num_stages}w{self.num_warps}g{self.group_m}"
        cid += f"-{self.load}"
        return cid + ("-ws" if self.warp_specialize else "")

    @classmethod
    def from_id(cls, config_id: str) -> KernelConfig:
        import re

        m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)s(\d+)w(\d+)g(\d+)-(ptr|tma)(-ws)?", config_id)
        if m is None:
            raise ValueError(f"not a config id: {config_id!r}")
        bm, bn, bk, s, w, g = (int(x) for x in m.groups()[:6])
        return cls(bm, bn, bk, s, w, g, m.group(7), m.group(8) is not None)

    def to_dict(self) -> dict:
        return asdict(self)

    def kernel_kwargs(self) -> dict:
        """The constexpr values and launch options this config passes to the Triton kernel."""
        return dict(
            BLOCK_M=self.block_m,
            BLOCK_N=self.block_n,
            BLOCK_K=self.block_k,
            GROUP_M=self.group_m,
            USE_TMA=self.load == "tma",
            WARP_SPECIALIZE=self.warp_specialize,
            num_stages=self.num_stages,
            num_warps=self.num_warps,
        )


@dataclass(frozen=True, slots=True)
class Signature:
    """What feasibility depends on in a call: layout, element size and whether TMA descriptors are legal."""

    ragged: Ragged
    elem_bytes: int
    tma_aligned: bool  # every group's base address and every leading stride 16-byte aligned (see validate.py)


@cache
def all_configs() -> tuple[KernelConfig, ...]:
    """Every config of the exhaustive space, in a fixed order."""
    out = []
    for bm, bn, bk, s, w, g, load in itertools.product(
        BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, NUM_WARPS, GROUP_M, LOADS
    ):
        out.append(KernelConfig(bm, bn, bk, s, w, g, load, False))
        if load == "tma":
            out.append(KernelConfig(bm, bn, bk, s, w, g, load, True))
    return tuple(out)


def smem_bytes(cfg: KernelConfig, elem_bytes: int) -> int:
    """Shared memory of the operand ring: one A and one B tile per pipeline stage."""
    return cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * elem_bytes + SMEM_RESERVE


def acc_regs_per_thread(cfg: KernelConfig) -> int:
    return cfg.block_m * cfg.block_n // (32 * cfg.num_warps)


def _ws_ok(num_warps, block_m, num_stages):
    """Warp specialization's needs (a whole warpgroup, BLOCK_M >= 64, >= 3 stages): on ints or on arrays alike."""
    return (num_warps >= 4) & (block_m >= 64) & (num_stages >= 3)


def infeasible_reason(cfg: KernelConfig, sig: Signature, device: DeviceSpec) -> str | None:
    """Why `cfg` cannot run for `sig` on `device`, or None when it can. `feasible_mask` is the same rules over the
    whole space at once (tests/kernels/test_config.py checks they agree)."""
    need = smem_bytes(cfg, sig.elem_bytes)
    if need > device.smem_per_block_optin:
        return f"needs {need} B of shared memory, the device allows {device.smem_per_block_optin} per block"
    acc = acc_regs_per_thread(cfg)
    if acc > MAX_ACC_REGS:
        return f"{acc} accumulator registers per thread (> {MAX_ACC_REGS}) would spill"
    if acc < MIN_ACC_PER_THREAD:
        return f"{acc} outputs per thread: too many warps for a {cfg.block_m}x{cfg.block_n} tile"
    if cfg.load == "tma":
        if not device.has_tma:
            return f"TMA needs compute capability 9.0+, device has {device.compute_capability}"
        if not sig.tma_aligned:
            return "TMA needs 16-byte aligned group bases and strides; this call's layout does not give them"
    if cfg.warp_specialize and not _ws_ok(cfg.num_warps, cfg.block_m, cfg.num_stages):
        return "warp specialization needs a whole warpgroup (>= 4 warps), BLOCK_M >= 64 and >= 3 stages"
    return None


@dataclass(frozen=True)
class _SpaceColumns:
    """all_configs() as int64 / bool arrays named like KernelConfig's fields, so that smem_bytes and
    acc_regs_per_thread compute on it unchanged."""

    block_m: np.ndarray
    block_n: np.ndarray
    block_k: np.ndarray
    num_stages: np.ndarray
    num_warps: np.ndarray
    tma: np.ndarray
    warp_specialize: np.ndarray


@cache
def _space_columns() -> _SpaceColumns:
    get = operator.attrgetter("block_m", "block_n", "block_k", "num_stages", "num_warps", "load", "warp_specialize")
    rows = [get(c) for c in all_configs()]
    ints = np.array([r[:5] for r in rows], dtype=np.int64).reshape(-1, 5)
    return _SpaceColumns(
        *(ints[:, j].copy() for j in range(5)),
        np.array([r[5] == "tma" for r in rows], dtype=bool), np.array([r[6] for r in rows], dtype=bool),
    )  # fmt: skip


def feasible_mask(sig: Signature, device: DeviceSpec) -> np.ndarray:
    """Boolean array over all_configs(): `infeasible_reason(c, sig, device) is None`, for the whole space in a few
    array operations (~0.2 ms against ~8 ms config by config: the first prediction of each signature pays it)."""
    c = _space_columns()
    acc = acc_regs_per_thread(c)
    ok = (smem_bytes(c, sig.elem_bytes) <= device.smem_per_block_optin) & (acc <= MAX_ACC_REGS)
    ok &= acc >= MIN_ACC_PER_THREAD
    if not (device.has_tma and sig.tma_aligned):
        ok &= ~c.tma
    ok &= ~c.warp_specialize | _ws_ok(c.num_warps, c.block_m, c.num_stages)
    return ok


def feasible_configs(sig: Signature, device: DeviceSpec) -> list[KernelConfig]:
    """The configs of all_configs() that can run for `sig` on `device`, in the space's order."""
    space = all_configs()
    return [space[i] for i in np.flatnonzero(feasible_mask(sig, device)).tolist()]


def occupancy(cfg: KernelConfig, elem_bytes: int, device: DeviceSpec) -> int:
    """Persistent programs per SM: as many as shared memory, threads and registers allow."""
    threads = 32 * cfg.num_warps
    regs = min(255, acc_regs_per_thread(cfg) + OTHER_REGS)
    by_smem = device.smem_per_sm // smem_bytes(cfg, elem_bytes)
    by_threads = device.max_threads_per_sm // threads
    by_regs = device.regs_per_sm // (threads * regs)
    return max(1, min(by_smem, by_threads, by_regs, MAX_OCCUPANCY))


def _space_fingerprint() -> str:
    h = hashlib.sha256()
    h.update(f"v{SPACE_VERSION};".encode())
    for c in all_configs():
        h.update(c.config_id.encode() + b";")
    rules = (SMEM_RESERVE, MAX_ACC_REGS, MIN_ACC_PER_THREAD, OTHER_REGS, MAX_OCCUPANCY)
    h.update(repr(rules).encode())
    return h.hexdigest()[:16]


SPACE_HASH = _space_fingerprint()
