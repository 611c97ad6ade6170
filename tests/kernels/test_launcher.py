"""BoundLaunch: the cached path's launch passes the kernel exactly what `launch()` passes, and computes the same."""

from __future__ import annotations

import inspect

import pytest
import torch
import triton

import autoheur.kernels.grouped_gemm as gg
from autoheur.kernels import KernelConfig, Ragged, launch, reference_grouped_mm, relative_error, validate
from autoheur.kernels.launcher import BoundLaunch, full_args

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


# --- the compiled kernel's own launcher, once known -------------------------------------------------------------------

REAL_KERNEL = gg.grouped_gemm_kernel


class _FakeCompiled(triton.compiler.CompiledKernel):
    """Stands in for the compiled kernel a jitted launch returns: its launcher records each launch."""

    def __init__(self):  # CompiledKernel's own __init__ loads a binary
        self.launches = []

    def __del__(self):  # nor is there a module to unload
        pass

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            _ = grid[0], grid[1], grid[2]  # Triton's launcher reads all three dimensions
            self.launches.append((grid, args, stream))

        return runner


class _Jitted(_Recorder):
    """The jitted kernel: records each dispatch and returns the compiled kernel it would have used."""

    fn = staticmethod(REAL_KERNEL.fn)  # the parameter list a dispatch binds against

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.launches.append((grid, args, kwargs))
            return self.compiled

        return run


class _Driver:
    def __init__(self):
        self.device, self.streams = 0, []

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device):
        self.streams.append(device)
        return 1000 + device


def _bound_by_name(args: tuple, kwargs: dict) -> dict:
    """What a jitted dispatch binds to each kernel parameter: positionals in order, then keywords, then defaults."""
    params = inspect.signature(REAL_KERNEL.fn).parameters
    names = list(params)
    bound = dict(zip(names, args, strict=False))
    for name in names[len(args) :]:
        bound[name] = kwargs[name] if name in kwargs else params[name].default
    assert all(v is not inspect.Parameter.empty for v in bound.values())
    return bound


@pytest.mark.parametrize("cfg", list(CONFIGS.values()), ids=list(CONFIGS))
@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_full_args_bind_every_parameter_in_the_kernels_order(ragged, cfg, device):
    a, b, offs = make_problem(ragged, device=device)
    call = validate(a, b, offs)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=device)
    _, scalars, kwargs = gg.launch_args(call, cfg)
    head = (a, b, out, a if offs is None else offs)
    args, options = full_args(REAL_KERNEL, head, scalars, kwargs)
    names = list(inspect.signature(REAL_KERNEL.fn).parameters)
    assert len(args) == len(names)
    want = _bound_by_name((*head, *scalars), kwargs)
    assert all(x is want[name] or x == want[name] for name, x in zip(names, args, strict=True))
    assert set(options) == set(kwargs) - set(names) and {"num_warps", "num_stages"} <= set(options)
    # the keywords come in another order than the parameters: a list built in their order would be wrong
    assert [k for k in kwargs if k in names] != [n for n in names if n in kwargs]


@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_bound_launch_calls_the_compiled_kernel_after_the_first_dispatch(ragged, device, monkeypatch):
    compiled, driver = _FakeCompiled(), _Driver()
    jitted = _Jitted(compiled)
    monkeypatch.setattr(gg, "grouped_gemm_kernel", jitted)
    monkeypatch.setattr(triton.runtime.driver, "_active", driver)
    monkeypatch.setattr(triton, "set_allocator", lambda _: None)
    cfg = CONFIGS["tma"]
    a, b, offs = make_problem(ragged, device=device)
    bound = BoundLaunch(validate(a, b, offs), cfg)
    bound(a, b, offs)  # dispatched; its compiled kernel is kept
    assert len(jitted.launches) == 1 and not compiled.launches
    (grid, jit_args, jit_kwargs), = jitted.launches  # fmt: skip
    want = _bound_by_name(jit_args, jit_kwargs)
    for seed in (1, 2):
        a2, b2, offs2 = make_problem(ragged, device=device, seed=seed)
        out = bound(a2, b2, offs2)
        grid2, args, stream = compiled.launches[-1]
        assert grid2 == (*grid, 1, 1)[:3] and stream == 1000 and len(jitted.launches) == 1
        assert args[:4] == (a2, b2, out, a2 if offs2 is None else offs2) and args[2] is out
        names = list(want)
        assert all(x is want[n] or x == want[n] for n, x in zip(names[4:], args[4:], strict=True))
    # given an output (collection's timing), or with another device current: the jitted dispatch
    bound(a, b, offs, torch.empty_like(out))
    driver.device = 1
    bound(a, b, offs)
    assert len(jitted.launches) == 3 and len(compiled.launches) == 2


class _RefusingCompiled(_FakeCompiled):
    """A compiled kernel whose launcher takes other arguments (another Triton version): it raises before launching."""

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            raise TypeError("launcher() takes 9 positional arguments")

        return runner


def test_a_launcher_that_refuses_its_first_launch_falls_back_to_dispatch(device, monkeypatch, caplog):
    jitted = _Jitted(_RefusingCompiled())
    monkeypatch.setattr(gg, "grouped_gemm_kernel", jitted)
    monkeypatch.setattr(triton.runtime.driver, "_active", _Driver())
    a, b, offs = make_problem(Ragged.M, device=device)
    bound = BoundLaunch(validate(a, b, offs), CONFIGS["ptr"])
    with caplog.at_level("WARNING", logger="autoheur"):
        outs = [bound(a, b, offs) for _ in range(4)]
    assert [launched[1][2] for launched in jitted.launches] == outs  # each call's own output, all dispatched
    assert bound._fast is None and sum("refused its arguments" in r.message for r in caplog.records) == 1


def test_a_launch_error_after_the_kept_kernel_has_run_is_raised(device, monkeypatch):
    """Once the kept kernel has launched, an error is the launch's own: raised, not retried through dispatch."""
    compiled = _FakeCompiled()
    jitted = _Jitted(compiled)
    monkeypatch.setattr(gg, "grouped_gemm_kernel", jitted)
    monkeypatch.setattr(triton.runtime.driver, "_active", _Driver())
    a, b, offs = make_problem(Ragged.M, device=device)
    bound = BoundLaunch(validate(a, b, offs), CONFIGS["ptr"])
    bound(a, b, offs)
    bound(a, b, offs)  # through the kept kernel
    monkeypatch.setattr(compiled, "launches", None)  # its next launch fails (appending to None)
    with pytest.raises(AttributeError):
        bound(a, b, offs)
    assert len(jitted.launches) == 1


def test_no_compiled_kernel_keeps_the_jitted_path(device, monkeypatch):
    """The interpreter's launch returns no compiled kernel: every launch is dispatched."""
    jitted = _Jitted(None)
    monkeypatch.setattr(gg, "grouped_gemm_kernel", jitted)
    a, b, offs = make_problem(Ragged.M, device=device)
    bound = BoundLaunch(validate(a, b, offs), CONFIGS["ptr"])
    for _ in range(3):
        bound(a, b, offs)
    assert len(jitted.launches) == 3 and bound._fast is None


def test_bound_launch_through_the_compiled_kernel_computes_what_launch_computes(device):
    """Real kernel: on a GPU the third call runs through the kept compiled kernel, bit for bit what `launch` gives;
    in the interpreter there is none to keep."""
    for ragged in LAYOUT_IDS:
        for cfg in CONFIGS.values():
            a, b, offs = make_problem(ragged, dtype=torch.float32, device=device)
            call = validate(a, b, offs)
            if cfg.load == "tma" and not call.tma_aligned:
                continue
            ref = launch(call, cfg, torch.empty(call.out_shape, dtype=call.out_dtype, device=device))
            bound = BoundLaunch(call, cfg)
            outs = [bound(a, b, offs) for _ in range(3)]
            assert (bound._fast is not None) == (device == "cuda")
            assert all(torch.equal(o, ref) for o in outs)
