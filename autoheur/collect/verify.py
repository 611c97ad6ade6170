"""Checking every config's output during its first timed run, on the device, without a host sync per config.

Collection checks each config of a problem against the fp32 reference before trusting its timings. Timing protocol
v3 did that in a pass of its own: per config, a NaN fill of the output, the kernel, then `out.float() - ref` and a
norm (about four passes over an fp32 copy of the output). On the largest problems that pass cost as much as all the
timing, and it ran every kernel once more than the timing needed: a third of the H100 collection's wall time.

`OutputCheck` folds the check into round 1 of the screen (timing protocol v4): right after a config's timed run, and
outside its timed region, one fused Triton pass reads the output and the reference, adds the sum of squared errors
into the config's slot of a device vector, and writes NaN back over the output: the poison that shows the next
config's unwritten elements (an unwritten element stays NaN, and NaN makes the error NaN: "wrong"). The host reads
the vector once, after round 1; a wrong config takes no further part in the screen, and a config whose launch raised
never ran a kernel (the output stays poisoned).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import triton
import triton.language as tl

CHECK_BLOCK = 2048


@triton.jit(do_not_specialize=["slot"])
def _sq_err_poison(out_ptr, ref_ptr, acc_ptr, slot, numel, BLOCK: tl.constexpr):
    """acc[slot] += sum((out - ref)^2) over all `numel` elements; then out[:] = NaN. A grid-stride loop."""
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    nan = tl.full([BLOCK], float("nan"), tl.float32)
    for _ in range(0, tl.cdiv(numel - tl.program_id(0).to(tl.int64) * BLOCK, step)):
        mask = offs < numel
        o = tl.load(out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(ref_ptr + offs, mask=mask, other=0.0)
        d = o - r
        acc += d * d
        tl.store(out_ptr + offs, nan, mask=mask)
        offs += step
    tl.atomic_add(acc_ptr + slot, tl.sum(acc, axis=0))


class OutputCheck:
    """The check of one problem's configs against its fp32 reference, enqueued after each config's first run.

    `guard(name, fn)` wraps a config's launch so that an exception is recorded (its status from `classify`) instead
    of raised; `after(name)` enqueues the config's check (the protocol calls it after the run's end event);
    `verdicts()` syncs once and returns every config's status: "ok", "wrong", or the status of its exception.
    """

    def __init__(
        self,
        out: torch.Tensor,
        ref: torch.Tensor,
        names: Sequence[str],
        tol: float,
        classify: Callable[[BaseException], str],
    ):
        if out.shape != ref.shape or not out.is_contiguous():
            raise ValueError(f"output {tuple(out.shape)} must be contiguous and of the reference's shape")
        self.out, self.ref = out, ref.to(torch.float32).contiguous()
        self.tol, self.classify = tol, classify
        self.slot = {n: i for i, n in enumerate(names)}
        self.acc = torch.zeros(max(len(self.slot), 1), dtype=torch.float32, device=out.device)
        self.ref_norm = max(float(torch.linalg.vector_norm(self.ref)), 1e-30)
        self.raised: dict[str, str] = {}
        self.checked: set[str] = set()
        numel = out.numel()
        programs = triton.cdiv(numel, CHECK_BLOCK)
        if out.is_cuda:
            programs = min(programs, 4 * torch.cuda.get_device_properties(out.device).multi_processor_count)
        self._run = _sq_err_poison[(max(programs, 1),)]
        self._numel = numel
        out.fill_(float("nan"))  # the first config's poison; every check re-poisons for the next

    def guard(self, name: str, fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # a launch that fails fails for this problem only: record it, go on
                self.raised.setdefault(name, self.classify(exc))

        return run

    def after(self, name: str) -> None:
        if name in self.raised or name in self.checked:
            return  # nothing ran (the output is still poisoned), or already checked
        self.checked.add(name)
        self._run(self.out, self.ref, self.acc, self.slot[name], self._numel, BLOCK=CHECK_BLOCK)

    def errors(self) -> dict[str, float]:
        """The relative error (Frobenius norm over the reference's) of every checked config; NaN if any element of
        its output was unwritten or not finite."""
        sums = self.acc.cpu().tolist()
        return {n: math.sqrt(sums[self.slot[n]]) / self.ref_norm for n in self.checked}

    def verdicts(self) -> dict[str, str]:
        """Status of every config given: "ok" within tolerance, "wrong" otherwise (NaN too), its exception's status
        if its launch raised, "wrong" if it was never checked."""
        errs = self.errors()
        out = {}
        for n in self.slot:
            if n in self.raised:
                out[n] = self.raised[n]
            else:
                err = errs.get(n, math.nan)
                out[n] = "ok" if err <= self.tol else "wrong"  # NaN compares False: wrong
        return out
