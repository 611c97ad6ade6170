"""BoundLaunch: the cached path's launch passes the kernel exactly what `launch()` passes, and computes the same."""

from __future__ import annotations

import pytest
import torch
import triton

import autoheur.kernels.grouped_gemm as gg
from autoheur.kernels import KernelConfig, Ragged, launch, reference_grouped_mm, relative_error, validate
from autoheur.kernels.launcher import BoundLaunch

from .test_grouped_gemm import LAYOUT_IDS, make_problem

CONFIGS = {
    "ptr": KernelConfig(32, 32, 32, 2, 2, group_m=8),
    "tma": KernelConfig(32, 64, 32, 3, 2, group_m=1, load="tma"),
    "tma-ws": KernelConfig(64, 32, 32, 3, 4, group_m=8, load="tma", warp_specialize=True),
}


class _Recorder:
    """Stands in for the jitted kernel: records each launch's grid, arguments and keyword arguments."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.launches.append((grid, args, kwargs))

        return run


@pytest.mark.parametrize("cfg", list(CONFIGS.values()), ids=list(CONFIGS))
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=["out-same", "out-fp32"])
@pytest.mark.parametrize("majors", [(True, True), (False, False)], ids=["row-major", "col-major"])
@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_bound_launch_passes_what_launch_passes(ragged, majors, out_dtype, cfg, device, monkeypatch):
    rec = _Recorder()
    allocators = []
    monkeypatch.setattr(gg, "grouped_gemm_kernel", rec)
    monkeypatch.setattr(triton, "set_allocator", allocators.append)
    a, b, offs = make_problem(ragged, *majors, device=device)
    call = validate(a, b, offs, out_dtype)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=device)
    launch(call, cfg, out)
    BoundLaunch(call, cfg)(a, b, offs, out)
    (grid0, args0, kw0), (grid1, args1, kw1) = rec.launches
    assert grid1 == grid0 and kw1 == kw0
    assert len(args1) == len(args0) and all(x is y or x == y for x, y in zip(args1, args0, strict=True))
    assert allocators == ([gg._alloc_scratch] * 2 if cfg.load == "tma" else [])


def test_bound_launch_allocates_the_output_like_the_call(device, monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(gg, "grouped_gemm_kernel", rec)
    a, b, offs = make_problem(Ragged.M, device=device)
    call = validate(a, b, offs, torch.float32)
    out = BoundLaunch(call, CONFIGS["ptr"])(a, b, offs)
    assert out.shape == call.out_shape and out.dtype == torch.float32 and out.device == a.device
    assert rec.launches[0][1][2] is out


@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_bound_launch_computes_on_new_tensors_of_the_same_properties(ragged, device):
    """Bound on one call, run on other tensors with the same shapes and strides (what the cached path does)."""
    a, b, offs = make_problem(ragged, dtype=torch.float32, device=device)
    bound = BoundLaunch(validate(a, b, offs), CONFIGS["ptr"])
    for seed in (1, 2):
        a2, b2, offs2 = make_problem(ragged, dtype=torch.float32, device=device, seed=seed)
        out = bound(a2, b2, offs2)
        ref = reference_grouped_mm(a2, b2, offs2)
        assert relative_error(out, ref) < 1e-5
