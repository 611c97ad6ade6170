"""A validated call's kernel launch, bound once for the cached path of `autoheur.grouped_mm`.

`launch()` (grouped_gemm.py) works out the grid, the strides and the constexpr arguments (`launch_args`) on every
call. That is host time a repeated call does not need to spend again: the grid alone costs two `triton.cdiv` calls,
each a few microseconds in Triton 3.6, where it is a ConstexprFunction. `BoundLaunch` works them out once for a call's
properties (everything `validate` reads, which the cached path's signature pins) and keeps them.

It passes the kernel exactly what `launch()` passes (the same positional arguments, constexprs, grid and
allocator), so it runs the same compiled kernel: tests/kernels/test_launcher.py compares the two argument by
argument. The kernel is looked up in grouped_gemm's namespace when a launch is bound, never at import.

**The compiled kernel, once known.** A call through the jitted kernel (`kernel[grid](...)`) spends most of its host
time in Triton's dispatch: binding the arguments, specializing each one (integers equal to 1 or divisible by 16,
pointers aligned to 16 bytes), building the cache key from them and looking the compiled kernel up. For tensors
whose properties the caller's signature pins (shapes, strides, dtypes, device, 16-byte alignment of every pointer:
`autoheur.inference.api._signature`), that dispatch finds the same compiled kernel every time. So the first launch
that allocates its own output goes through the jitted kernel and keeps the compiled kernel it returns; later ones
call that kernel's launcher (`CompiledKernel[grid](*args, stream=)`, Triton's own entry point for a compiled kernel)
with the full argument list the dispatch would have bound: the same launcher, the same arguments, none of the
dispatch. A launch given its `out` (collection's timing loop keeps its protocol), one while another device is
current, one whose fresh output is not 16-byte aligned, and every launch in the CPU interpreter (which returns no
compiled kernel) take the jitted path as before. Should a Triton's compiled-kernel launcher refuse the argument list
(another version's calling convention), its first launch raises before launching: that bound launch logs a warning
and dispatches from then on. Triton 3.6 (run on the GPU machine) and 3.9 (read in its source) share the convention.
"""

from __future__ import annotations

import inspect
import logging

import torch
import triton

from autoheur.kernels import grouped_gemm as gg
from autoheur.kernels.config import KernelConfig
from autoheur.kernels.validate import ALIGN_BYTES, GemmCall

log = logging.getLogger("autoheur")


def full_args(kernel, head: tuple, scalars: tuple, kwargs: dict) -> tuple[list, dict]:
    """(every kernel parameter's value in the kernel's order, the compile options): what Triton's dispatch binds from
    `kernel[grid](*head, *scalars, **kwargs)`, the constexprs included and defaults applied. The options (num_warps,
    num_stages, ...) are not parameters: they are fixed in the compiled kernel."""
    sig = inspect.signature(kernel.fn)
    params = {k: v for k, v in kwargs.items() if k in sig.parameters}
    bound = sig.bind(*head, *scalars, **params)
    bound.apply_defaults()
    return list(bound.arguments.values()), {k: v for k, v in kwargs.items() if k not in sig.parameters}


def _compiled_runner(ret, grid: tuple):
    """Triton's launcher of the compiled kernel a jitted launch returned, for `grid`; None where there is none (the
    interpreter) or this Triton's CompiledKernel lacks the entry point."""
    compiled_cls = getattr(getattr(triton, "compiler", None), "CompiledKernel", None)
    if compiled_cls is None or not isinstance(ret, compiled_cls):
        return None
    try:
        return ret[grid]
    except Exception:  # noqa: BLE001 - an older or newer CompiledKernel: the jitted path stays
        return None


class BoundLaunch:
    """`launch(call, cfg, out)` for any tensors with `call`'s properties, the launch arguments computed once."""

    __slots__ = ("config", "out_shape", "out_dtype", "_grid", "_run", "_scalars", "_kwargs", "_tma", "_tail",
                 "_fast", "_fast_device", "_device_now", "_stream_of", "_fast_ok", "_no_fast")  # fmt: skip

    def __init__(self, call: GemmCall, cfg: KernelConfig):
        self.config = cfg
        self.out_shape = call.out_shape
        self.out_dtype = call.out_dtype
        self._grid, self._scalars, self._kwargs = gg.launch_args(call, cfg)
        self._run = gg.grouped_gemm_kernel[self._grid]
        self._tma = cfg.load == "tma"
        self._tail = None  # the arguments after the four tensors, constexprs included, once a compiled kernel is kept
        self._fast = None
        self._fast_device = None
        self._device_now = self._stream_of = None  # the driver's current-device and current-stream queries
        self._fast_ok = False  # a launch through the kept kernel has returned
        self._no_fast = False  # nothing to keep, or the kept launcher refused its first launch: dispatch for good

    def __call__(
        self, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Launch on tensors whose properties match the bound call's (the caller's signature check guarantees it);
        `out` is allocated (uninitialized, on `a`'s device) when not given."""
        if self._tma:
            triton.set_allocator(gg._alloc_scratch)
        o = a if offs is None else offs  # the kernel's offsets pointer, unread without offsets
        if out is not None:
            self._run(a, b, out, o, *self._scalars, **self._kwargs)
            return out
        out = a.new_empty(self.out_shape, dtype=self.out_dtype)
        aligned = out.data_ptr() % ALIGN_BYTES == 0
        fast = self._fast
        if fast is not None and aligned:
            device = self._device_now()
            if device == self._fast_device:
                try:
                    fast(a, b, out, o, *self._tail, stream=self._stream_of(device))
                except Exception as exc:  # noqa: BLE001 - see below
                    if self._fast_ok:
                        raise
                    # Its first launch: a Triton whose compiled-kernel launcher takes other arguments than this
                    # one's raises before launching. Dispatch from now on, as before the kernel was kept.
                    log.warning("the compiled kernel's launcher refused its arguments (%s: %s); launching through "
                                "Triton's dispatch instead", type(exc).__name__, exc)  # fmt: skip
                    self._fast, self._no_fast = None, True
                else:
                    self._fast_ok = True
                    return out
        ret = self._run(a, b, out, o, *self._scalars, **self._kwargs)
        if self._fast is None and not self._no_fast and aligned:
            self._keep(ret, (a, b, out, o))
        return out

    def _keep(self, ret, head: tuple) -> None:
        """Keep the compiled kernel the jitted launch of the four tensors `head` just used, and the argument list it
        bound. A launch that returned something else than a compiled kernel (the interpreter's) dispatches for good;
        one that returned nothing (a compile still in flight) tries again next time."""
        runner = _compiled_runner(ret, (*self._grid, 1, 1)[:3])  # its launcher reads all three grid dimensions
        if runner is None:
            self._no_fast = ret is not None
            return
        args, _ = full_args(gg.grouped_gemm_kernel, head, self._scalars, self._kwargs)
        driver = triton.runtime.driver.active
        self._tail = tuple(args[len(head) :])
        self._device_now, self._stream_of = driver.get_current_device, driver.get_current_stream
        self._fast_device = self._device_now()
        self._fast = runner
