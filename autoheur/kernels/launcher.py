"""A validated call's kernel launch, bound once for the cached path of `autoheur.grouped_mm`.

`launch()` (grouped_gemm.py) works out the grid, the strides and the constexpr arguments on every call. That is
host time a repeated call does not need to spend again: the grid alone costs two `triton.cdiv` calls, each a few
microseconds in Triton 3.6, where it is a ConstexprFunction. `BoundLaunch` works them out once for a call's
properties (everything `validate` reads, which the cached path's signature pins) and keeps them; a call then only
allocates its output and enters the Triton launcher.

It passes the kernel exactly what `launch()` passes (the same positional arguments, constexprs, grid and
allocator), so it runs the same compiled kernel: tests/kernels/test_launcher.py compares the two argument by
argument. The kernel is looked up in grouped_gemm's namespace when a launch is bound, never at import.
"""

from __future__ import annotations

import torch
import triton

from autoheur.kernels import grouped_gemm as gg
from autoheur.kernels.config import KernelConfig
from autoheur.kernels.validate import GemmCall


def launch_args(call: GemmCall, cfg: KernelConfig) -> tuple[tuple, tuple, dict]:
    """(grid, the scalar arguments after the four tensors, the keyword arguments): what `launch()` passes."""
    scalars = (call.groups, call.m, call.n, call.k, *call.a_strides, *call.b_strides, *call.c_strides)
    kwargs = dict(
        RAGGED=int(call.ragged),
        A_K_CONTIG=call.a_k_contig,
        B_N_CONTIG=call.b_n_contig,
        DOT_PRECISION="ieee" if call.a.dtype == torch.float32 else None,
        **cfg.kernel_kwargs(),
    )
    return (gg.num_programs(call, cfg),), scalars, kwargs


class BoundLaunch:
    """`launch(call, cfg, out)` for any tensors with `call`'s properties, the launch arguments computed once."""

    __slots__ = ("config", "out_shape", "out_dtype", "_run", "_scalars", "_kwargs", "_tma")

    def __init__(self, call: GemmCall, cfg: KernelConfig):
        self.config = cfg
        self.out_shape = call.out_shape
        self.out_dtype = call.out_dtype
        grid, self._scalars, self._kwargs = launch_args(call, cfg)
        self._run = gg.grouped_gemm_kernel[grid]
        self._tma = cfg.load == "tma"

    def __call__(
        self, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Launch on tensors whose properties match the bound call's (the caller's signature check guarantees it);
        `out` is allocated (uninitialized, on `a`'s device) when not given."""
        if out is None:
            out = a.new_empty(self.out_shape, dtype=self.out_dtype)
        if self._tma:
            triton.set_allocator(gg._alloc_scratch)
        self._run(a, b, out, a if offs is None else offs, *self._scalars, **self._kwargs)
        return out
