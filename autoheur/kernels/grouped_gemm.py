"""A persistent Triton grouped GEMM with the semantics of `torch._grouped_mm`.

Every layout is the same loop: group g is a sub-GEMM C_g[M_g, N_g] = A_g[M_g, K_g] @ B_g[K_g, N_g] whose base
addresses and one ragged extent come from the offsets (int32 cumulative group ends, as in torch):

    ragged M (2D A x 3D B):  A rows [s, e),    B[g],             C rows [s, e)
    ragged N (3D A x 2D B):  A[g],             B columns [s, e), C columns [s, e)
    ragged K (2D A x 2D B):  A columns [s, e), B rows [s, e),    C[g]   (an empty group writes zeros)
    batched  (3D A x 3D B):  A[g],             B[g],             C[g]

A fixed number of programs (SM count x occupancy) walks the tiles of all groups in order. Operands come either
through pointer loads (masked, software-pipelined by Triton) or through TMA descriptors built per group on the
device, whose shape is the group's extent, so the hardware zero-fills past the group's end. Accumulation is fp32.

The ragged-M layout with TMA loads (the MoE forward) runs a one-loop schedule instead (`ONE_LOOP`, up to
ONE_LOOP_MAX_GROUPS groups): each program holds the offsets in registers as a prefix sum of tiles per group and runs
a single loop over its tiles of all groups, finding each tile's group by a comparison against that prefix. A and B
are read through one descriptor each, built once per program over the whole tensor ([rows, K] and [G, ., .]): rows
past a group's end feed only output rows that the masked store skips, and K and N are bounded per group by the
descriptors. With no per-group structure left in the loop, the warp-specialized configs also flatten it
(`tl.range(flatten=True)`), so the loads of a program's next tile start before the current tile's epilogue. On the
H100's public problems this measured 1.108x torch._grouped_mm against 1.079x for the per-group walk
(benchmarks/kernel_headroom.py, BENCHMARKS.md).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autoheur.kernels.config import KernelConfig, Ragged, occupancy
from autoheur.kernels.validate import GemmCall, check_config, validate

# Groups the one-loop schedule holds in registers (4 vectors of this many int32 per program); past it, the per-group
# walk runs. Every public and sampled problem has at most 256.
ONE_LOOP_MAX_GROUPS = 256


@triton.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """Tile index inside a group -> (pid_m, pid_n); GROUP_M > 1 walks bands of GROUP_M tile-rows for L2 reuse."""
    if GROUP_M == 1:
        pid_m = tile // num_n
        pid_n = tile % num_n
    else:
        per_band = GROUP_M * num_n
        first_m = (tile // per_band) * GROUP_M
        band_m = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % per_band) % band_m
        pid_n = (tile % per_band) // band_m
    return pid_m, pid_n


@triton.jit(do_not_specialize=["G"])
def grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, offs_ptr,
    G, M, N, K,  # M, N, K: the fixed extents; the ragged one is read from offs
    stride_ag, stride_am, stride_ak,
    stride_bg, stride_bk, stride_bn,
    stride_cg, stride_cm, stride_cn,
    RAGGED: tl.constexpr,
    A_K_CONTIG: tl.constexpr,  # A's K dimension has stride 1 (else its M dimension does)
    B_N_CONTIG: tl.constexpr,  # B's N dimension has stride 1 (else its K dimension does: weights stored [N, K])
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, USE_TMA: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (torch computes them in full fp32), else the default
    ONE_LOOP: tl.constexpr,  # ragged M, TMA, at most MAX_GROUPS groups: the one-loop schedule (module docstring)
    MAX_GROUPS: tl.constexpr,
):  # fmt: skip
    if ONE_LOOP:
        _one_loop(
            a_ptr, b_ptr, c_ptr, offs_ptr, G, N, K,
            stride_am, stride_bg, stride_bk, stride_bn, stride_cm, stride_cn,
            B_N_CONTIG, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, WARP_SPECIALIZE, DOT_PRECISION, MAX_GROUPS,
        )  # fmt: skip
    else:
        _per_group(
            a_ptr, b_ptr, c_ptr, offs_ptr, G, M, N, K,
            stride_ag, stride_am, stride_ak, stride_bg, stride_bk, stride_bn, stride_cg, stride_cm, stride_cn,
            RAGGED, A_K_CONTIG, B_N_CONTIG, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, USE_TMA, WARP_SPECIALIZE,
            DOT_PRECISION,
        )  # fmt: skip


@triton.jit
def _one_loop(
    a_ptr, b_ptr, c_ptr, offs_ptr, G, N, K,
    stride_am, stride_bg, stride_bk, stride_bn, stride_cm, stride_cn,
    B_N_CONTIG: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, DOT_PRECISION: tl.constexpr, MAX_GROUPS: tl.constexpr,
):  # fmt: skip
    """Ragged M with TMA loads (A K-contiguous, as TMA needs there): one loop over this program's tiles of all
    groups."""
    gi = tl.arange(0, MAX_GROUPS)
    in_g = gi < G
    ends = tl.load(offs_ptr + gi, mask=in_g, other=0)
    starts = tl.load(offs_ptr + gi - 1, mask=in_g & (gi > 0), other=0)
    m_g = tl.where(in_g, ends - starts, 0)
    num_n = tl.cdiv(N, BLOCK_N)
    tiles_g = tl.cdiv(m_g, BLOCK_M) * num_n
    incl = tl.cumsum(tiles_g, 0)  # tiles up to and including each group
    total = tl.sum(tiles_g, 0)
    rows_used = tl.maximum(tl.max(ends, 0), 1)  # rows past the last group's end are never read (1: a valid shape)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[rows_used, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])  # fmt: skip
    if B_N_CONTIG:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[G, K, N], strides=[stride_bg, stride_bk, 1],
                                           block_shape=[1, BLOCK_K, BLOCK_N])  # fmt: skip
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[G, N, K], strides=[stride_bg, stride_bn, 1],
                                           block_shape=[1, BLOCK_N, BLOCK_K])  # fmt: skip
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    for tile in tl.range(tl.program_id(0), total, tl.num_programs(0), flatten=WARP_SPECIALIZE,
                         warp_specialize=WARP_SPECIALIZE):  # fmt: skip
        g = tl.sum((incl <= tile).to(tl.int32), 0)  # groups that end at or before this tile (empty ones too)
        here = gi == g
        before = tl.sum(tl.where(here, incl - tiles_g, 0), 0)
        row0 = tl.sum(tl.where(here, starts, 0), 0)
        rows = tl.sum(tl.where(here, m_g, 0), 0)
        pid_m, pid_n = _tile_coords(tile - before, tl.cdiv(rows, BLOCK_M), num_n, GROUP_M)
        m0 = pid_m * BLOCK_M
        n0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BLOCK_K)):
            k0 = kk * BLOCK_K
            a = a_desc.load([row0 + m0, k0])
            if B_N_CONTIG:
                b = b_desc.load([g, k0, n0]).reshape(BLOCK_K, BLOCK_N)
            else:
                b = b_desc.load([g, n0, k0]).reshape(BLOCK_N, BLOCK_K).T
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        c_ptrs = c_ptr + tl.cast(row0 + m0, tl.int64) * stride_cm + tl.cast(n0, tl.int64) * stride_cn
        c_ptrs = c_ptrs + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        c_mask = ((m0 + rm)[:, None] < rows) & ((n0 + rn)[None, :] < N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _per_group(
    a_ptr, b_ptr, c_ptr, offs_ptr, G, M, N, K,
    stride_ag, stride_am, stride_ak, stride_bg, stride_bk, stride_bn, stride_cg, stride_cm, stride_cn,
    RAGGED: tl.constexpr, A_K_CONTIG: tl.constexpr, B_N_CONTIG: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, USE_TMA: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Every layout and load path: each program walks the groups in order and its tiles inside each."""
    tile = tl.program_id(0)
    num_progs = tl.num_programs(0)
    tiles_before = 0
    start = 0
    for g in range(G):
        m_g = M
        n_g = N
        k_g = K
        if RAGGED != 0:
            end = tl.load(offs_ptr + g)
            if RAGGED == 1:
                m_g = end - start
            elif RAGGED == 2:
                n_g = end - start
            else:
                k_g = end - start
        num_m = tl.cdiv(m_g, BLOCK_M)
        num_n = tl.cdiv(n_g, BLOCK_N)
        tiles_g = num_m * num_n
        if tile < tiles_before + tiles_g:
            # Base offsets of this group's sub-matrices, in int64: whole tensors may exceed 2**31 elements.
            g64 = tl.cast(g, tl.int64)
            s64 = tl.cast(start, tl.int64)
            a_off = g64 * stride_ag
            b_off = g64 * stride_bg
            c_off = g64 * stride_cg
            if RAGGED == 1:
                a_off += s64 * stride_am
                c_off += s64 * stride_cm
            elif RAGGED == 2:
                b_off += s64 * stride_bn
                c_off += s64 * stride_cn
            elif RAGGED == 3:
                a_off += s64 * stride_ak
                b_off += s64 * stride_bk
            if USE_TMA:
                if A_K_CONTIG:
                    a_desc = tl.make_tensor_descriptor(
                        a_ptr + a_off, shape=[m_g, k_g], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K]
                    )
                else:
                    a_desc = tl.make_tensor_descriptor(
                        a_ptr + a_off, shape=[k_g, m_g], strides=[stride_ak, 1], block_shape=[BLOCK_K, BLOCK_M]
                    )
                if B_N_CONTIG:
                    b_desc = tl.make_tensor_descriptor(
                        b_ptr + b_off, shape=[k_g, n_g], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N]
                    )
                else:
                    b_desc = tl.make_tensor_descriptor(
                        b_ptr + b_off, shape=[n_g, k_g], strides=[stride_bn, 1], block_shape=[BLOCK_N, BLOCK_K]
                    )
            while tile < tiles_before + tiles_g:
                pid_m, pid_n = _tile_coords(tile - tiles_before, num_m, num_n, GROUP_M)
                m0 = pid_m * BLOCK_M
                n0 = pid_n * BLOCK_N
                rm = tl.arange(0, BLOCK_M)
                rn = tl.arange(0, BLOCK_N)
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                if USE_TMA:
                    for kk in tl.range(0, tl.cdiv(k_g, BLOCK_K), warp_specialize=WARP_SPECIALIZE):
                        k0 = kk * BLOCK_K
                        if A_K_CONTIG:
                            a = a_desc.load([m0, k0])
                        else:
                            a = a_desc.load([k0, m0]).T
                        if B_N_CONTIG:
                            b = b_desc.load([k0, n0])
                        else:
                            b = b_desc.load([n0, k0]).T
                        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
                else:
                    rk = tl.arange(0, BLOCK_K)
                    # Scalar int64 tile bases keep the per-element offsets small (no int32 overflow).
                    a_ptrs = a_ptr + a_off + tl.cast(m0, tl.int64) * stride_am
                    a_ptrs = a_ptrs + rm[:, None] * stride_am + rk[None, :] * stride_ak
                    b_ptrs = b_ptr + b_off + tl.cast(n0, tl.int64) * stride_bn
                    b_ptrs = b_ptrs + rk[:, None] * stride_bk + rn[None, :] * stride_bn
                    mask_m = (m0 + rm)[:, None] < m_g
                    mask_n = (n0 + rn)[None, :] < n_g
                    for kk in range(0, tl.cdiv(k_g, BLOCK_K)):
                        k_left = k_g - kk * BLOCK_K
                        a = tl.load(a_ptrs, mask=mask_m & (rk[None, :] < k_left), other=0.0)
                        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & mask_n, other=0.0)
                        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
                        a_ptrs += BLOCK_K * stride_ak
                        b_ptrs += BLOCK_K * stride_bk
                c_ptrs = c_ptr + c_off + tl.cast(m0, tl.int64) * stride_cm + tl.cast(n0, tl.int64) * stride_cn
                c_ptrs = c_ptrs + rm[:, None] * stride_cm + rn[None, :] * stride_cn
                c_mask = ((m0 + rm)[:, None] < m_g) & ((n0 + rn)[None, :] < n_g)
                tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
                tile += num_progs
        tiles_before += tiles_g
        if RAGGED != 0:
            start = end


def _alloc_scratch(size: int, alignment: int, stream) -> torch.Tensor:
    """Global scratch for device-side TMA descriptors (Triton asks for it once per launch)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def num_programs(call: GemmCall, cfg: KernelConfig) -> int:
    """Persistent grid: SMs x occupancy, never more than an upper bound on the tiles (no device sync needed)."""
    bm, bn = cfg.block_m, cfg.block_n
    if call.ragged == Ragged.M:
        tiles = (triton.cdiv(call.ragged_total, bm) + call.groups) * triton.cdiv(call.n, bn)
    elif call.ragged == Ragged.N:
        tiles = triton.cdiv(call.m, bm) * (triton.cdiv(call.ragged_total, bn) + call.groups)
    else:
        tiles = call.groups * triton.cdiv(call.m, bm) * triton.cdiv(call.n, bn)
    return max(1, min(tiles, call.device.sm_count * occupancy(cfg, call.elem_bytes, call.device)))


def one_loop(call: GemmCall, cfg: KernelConfig) -> bool:
    """Whether `cfg` runs `call` with the one-loop schedule (module docstring)."""
    return call.ragged == Ragged.M and cfg.load == "tma" and call.groups <= ONE_LOOP_MAX_GROUPS


def launch_args(call: GemmCall, cfg: KernelConfig) -> tuple[tuple, tuple, dict]:
    """(grid, the scalar arguments after the four tensors, the keyword arguments) of one launch."""
    scalars = (call.groups, call.m, call.n, call.k, *call.a_strides, *call.b_strides, *call.c_strides)
    kwargs = dict(
        RAGGED=int(call.ragged), A_K_CONTIG=call.a_k_contig, B_N_CONTIG=call.b_n_contig,
        DOT_PRECISION="ieee" if call.a.dtype == torch.float32 else None,
        ONE_LOOP=one_loop(call, cfg), MAX_GROUPS=ONE_LOOP_MAX_GROUPS,
        **cfg.kernel_kwargs(),
    )  # fmt: skip
    return (num_programs(call, cfg),), scalars, kwargs


def launch(call: GemmCall, cfg: KernelConfig, out: torch.Tensor) -> torch.Tensor:
    """Launch one validated call with `cfg` into `out` (no checks here: see `grouped_mm`)."""
    if cfg.load == "tma":
        triton.set_allocator(_alloc_scratch)
    grid, scalars, kwargs = launch_args(call, cfg)
    a = call.a
    grouped_gemm_kernel[grid](a, call.b, out, call.offs if call.offs is not None else a, *scalars, **kwargs)
    return out


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    *,
    config: KernelConfig,
    check_offsets: bool = True,
) -> torch.Tensor:
    """`torch._grouped_mm(a, b, offs, out_dtype=out_dtype)` computed by the Triton kernel with `config`.

    Every argument is validated before launch (ValueError / TypeError naming the argument). `check_offsets` reads the
    offsets back to the host to check their values (one small device-to-host copy); it is skipped during CUDA graph
    capture, where such a copy is illegal.
    """
    call = validate(a, b, offs, out_dtype, check_offsets=check_offsets)
    check_config(config, call)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=a.device)
    if out.numel() == 0:
        return out
    if call.k == 0 and call.ragged != Ragged.K:
        return out.zero_()
    return launch(call, config, out)
