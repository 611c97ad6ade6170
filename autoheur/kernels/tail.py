"""Zero the rows of a 2D tensor at or past the last offset, reading that offset on the device.

The backward of a ragged grouped GEMM leaves the gradient's rows (or columns) past `offs[-1]` unwritten: no group
covers them, so their gradient is zero, but the kernel's output is allocated uninitialized. Multiplying the whole
gradient by a 0/1 mask costs a read and a write of every element (up to 0.6 ms on a large prefill, BENCHMARKS.md
"Training step") and keeps NaN where the uninitialized memory held a NaN bit pattern (NaN * 0 is NaN). This kernel
stores zeros into the tail only: each program reads offs[-1] and loops over the tail's row blocks, so when the
groups cover every row (the usual case) it does no work beyond reading one int, and no device-to-host copy is made.

It is its own module, not part of grouped_gemm.py, whose source hash datasets and models carry.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_R = 32
BLOCK_C = 128
MAX_PROGRAMS = 1024  # enough to fill any GPU's SMs several times over when the tail is large


@triton.jit
def zero_past_end_kernel(t_ptr, offs_ptr, n_offs, R, C, stride_r, stride_c,
                         BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    pid_c = tl.program_id(0)
    pid_r = tl.program_id(1)
    n_r = tl.num_programs(1)
    end = tl.load(offs_ptr + n_offs - 1).to(tl.int64)
    end = tl.maximum(end, 0)
    rr = tl.arange(0, BLOCK_R).to(tl.int64)
    cc = pid_c * BLOCK_C + tl.arange(0, BLOCK_C).to(tl.int64)
    zeros = tl.zeros((BLOCK_R, BLOCK_C), dtype=t_ptr.dtype.element_ty)
    for r0 in range(end + pid_r * BLOCK_R, R, n_r * BLOCK_R):
        rows = r0 + rr
        ptrs = t_ptr + rows[:, None] * stride_r + cc[None, :] * stride_c
        tl.store(ptrs, zeros, mask=(rows[:, None] < R) & (cc[None, :] < C))


def zero_past_end(t: torch.Tensor, offs: torch.Tensor, dim: int) -> None:
    """In place: t's slices along `dim` (0 or 1 of a 2D tensor, any strides) at or past offs[-1] become zeros."""
    if t.dim() != 2 or dim not in (0, 1):
        raise ValueError(f"zero_past_end takes a 2D tensor and dim 0 or 1, got {t.dim()}D and dim={dim}")
    if offs.dim() != 1 or offs.numel() == 0 or offs.device != t.device:
        raise ValueError("zero_past_end needs 1D, non-empty offsets on the tensor's device")
    rows, cols = t.shape[dim], t.shape[1 - dim]
    if rows == 0 or cols == 0:
        return
    col_blocks = triton.cdiv(cols, BLOCK_C)
    row_programs = max(1, min(triton.cdiv(rows, BLOCK_R), MAX_PROGRAMS // col_blocks))
    zero_past_end_kernel[(col_blocks, row_programs)](
        t, offs, offs.numel(), rows, cols, t.stride(dim), t.stride(1 - dim), BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C
    )
