"""Correctness of the Triton grouped GEMM against the fp32 reference (and torch._grouped_mm on the CPU).

Without a GPU these run through the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET=1), so the shapes
are tiny and the config space is sampled. bf16 is GPU-only: the interpreter's bf16 dot is broken.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict

import pytest
import torch

import autoheur.kernels.grouped_gemm as gg
from autoheur.device import H100_SXM
from autoheur.kernels import (
    KernelConfig,
    Ragged,
    Signature,
    feasible_configs,
    grouped_mm,
    reference_grouped_mm,
    relative_error,
    validate,
)
from autoheur.kernels.config import acc_regs_per_thread, smem_bytes
from tests.conftest import HAS_GPU

TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-5}

# Fixed extents (multiples of 8, so both majors keep 16-byte leading strides in fp16) that no block size divides
# evenly, and ragged group sizes with an empty group and none a multiple of a block.
M_FIX, N_FIX, K_FIX = 24, 72, 40
SIZES = (5, 0, 19, 8)

PTR = KernelConfig(32, 32, 32, 2, 2, group_m=8)
TMA = KernelConfig(32, 32, 32, 3, 2, group_m=1, load="tma")
WS = KernelConfig(64, 32, 32, 3, 4, group_m=8, load="tma", warp_specialize=True)
LOAD_CONFIGS = pytest.mark.parametrize("config", [PTR, TMA, WS], ids=["ptr", "tma", "tma-ws"])

LAYOUT_IDS = {Ragged.M: "2Dx3D", Ragged.N: "3Dx2D", Ragged.K: "2Dx2D", Ragged.NONE: "3Dx3D"}
DTYPES = pytest.mark.parametrize(
    "dtype,out_dtype",
    [(torch.float16, None), (torch.float16, torch.float32), (torch.float32, None)],
    ids=["fp16", "fp16-out32", "fp32"],
)


class _PoisonedTorch:
    """Stands in for `torch` inside grouped_gemm.py: floating-point outputs start as NaN, so an element the kernel
    fails to write shows up (relative_error is inf on NaN), instead of passing on whatever torch.empty returned."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def empty(*args, **kwargs) -> torch.Tensor:
        t = torch.empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t


@pytest.fixture(autouse=True)
def poison_outputs(monkeypatch):
    monkeypatch.setattr(gg, "torch", _PoisonedTorch())


def _operand(shape, row_major: bool, dtype, device, gen) -> torch.Tensor:
    """Random tensor of `shape`; column-major means the last two dims are a transposed view of a contiguous tensor."""
    if row_major:
        return torch.randn(shape, generator=gen).to(dtype).to(device)
    *lead, rows, cols = shape
    return torch.randn((*lead, cols, rows), generator=gen).to(dtype).to(device).transpose(-1, -2)


def make_problem(ragged, a_row_major=True, b_row_major=True, dtype=torch.float16, device="cpu", sizes=SIZES, extra=0,
                 n=N_FIX, seed=0):  # fmt: skip
    """Operands for one layout; `extra` adds rows/columns past offs[-1] to the ragged dimension."""
    gen = torch.Generator().manual_seed(seed)
    g, total = len(sizes), sum(sizes) + extra
    a_shape, b_shape = {
        Ragged.M: ((total, K_FIX), (g, K_FIX, n)),
        Ragged.N: ((g, M_FIX, K_FIX), (K_FIX, total)),
        Ragged.K: ((M_FIX, total), (total, n)),
        Ragged.NONE: ((g, M_FIX, K_FIX), (g, K_FIX, n)),
    }[ragged]
    a = _operand(a_shape, a_row_major, dtype, device, gen)
    b = _operand(b_shape, b_row_major, dtype, device, gen)
    offs = None
    if ragged != Ragged.NONE:
        offs = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
    return a, b, offs


def _check(out, a, b, offs, out_dtype=None, covered=None):
    ref = reference_grouped_mm(a, b, offs, out_dtype)
    assert out.shape == ref.shape
    assert out.dtype == (out_dtype or a.dtype)
    if covered is not None:  # only the rows/columns the offsets cover are defined
        out, ref = covered(out), covered(ref)
    _assert_small(relative_error(out, ref), a.dtype)


def _assert_small(err: float, dtype: torch.dtype, what: str = "") -> None:
    assert err < TOL[dtype], f"relative error {err:.3g}{what}"


# ---------------------------------------------------------------------------------------------------------------
# Every layout x both majors of each operand x dtypes x load path
# ---------------------------------------------------------------------------------------------------------------


@LOAD_CONFIGS
@DTYPES
@pytest.mark.parametrize("b_row_major", [True, False], ids=["b_kn", "b_nk"])  # b_nk: B stored [.., N, K], viewed .T
@pytest.mark.parametrize("a_row_major", [True, False], ids=["a_mk", "a_km"])
@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_layouts(ragged, a_row_major, b_row_major, dtype, out_dtype, config, device):
    a, b, offs = make_problem(ragged, a_row_major, b_row_major, dtype, device)
    call = validate(a, b, offs, out_dtype)
    assert call.ragged == ragged
    assert (call.a_k_contig, call.b_n_contig) == (a_row_major, b_row_major)
    if config.load == "tma" and not call.tma_aligned:
        # The group bases are not 16-byte aligned: a TMA config must be refused, before any launch.
        with pytest.raises(ValueError, match=re.escape(config.config_id)):
            grouped_mm(a, b, offs, out_dtype, config=config)
        return
    out = grouped_mm(a, b, offs, out_dtype, config=config)
    _check(out, a, b, offs, out_dtype)
    if ragged == Ragged.K:
        assert SIZES[1] == 0
        assert torch.all(out[1] == 0), "an empty K group must give zeros"


# ---------------------------------------------------------------------------------------------------------------
# Group-size patterns and offsets that stop short of the ragged extent
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes",
    [(0, 0, 24, 0), (1, 1, 1, 5), (40,), (7, 9, 0, 0), (0, 0, 0, 0)],
    ids=["one-nonempty", "ones", "single-group", "trailing-empty", "all-empty"],
)
@pytest.mark.parametrize("config", [PTR, TMA], ids=["ptr", "tma"])
@pytest.mark.parametrize("ragged", [Ragged.M, Ragged.N, Ragged.K], ids=["2Dx3D", "3Dx2D", "2Dx2D"])
def test_group_sizes(ragged, config, sizes, device):
    # Operand majors that keep TMA legal for each layout.
    a_row_major = ragged != Ragged.K
    b_row_major = ragged != Ragged.N
    a, b, offs = make_problem(ragged, a_row_major, b_row_major, torch.float16, device, sizes=sizes)
    out = grouped_mm(a, b, offs, config=config)
    _check(out, a, b, offs)
    if ragged == Ragged.K:
        for g, size in enumerate(sizes):
            if size == 0:
                assert torch.all(out[g] == 0), f"empty K group {g} must give zeros"


@pytest.mark.parametrize("config", [PTR, TMA], ids=["ptr", "tma"])
@pytest.mark.parametrize("ragged", [Ragged.M, Ragged.N, Ragged.K], ids=["2Dx3D", "3Dx2D", "2Dx2D"])
def test_offsets_short_of_total(ragged, config, device):
    """offs[-1] < the ragged extent: rows (M) / columns (N) past it are undefined, K past it is ignored."""
    a_row_major = ragged != Ragged.K
    b_row_major = ragged != Ragged.N
    a, b, offs = make_problem(ragged, a_row_major, b_row_major, torch.float32, device, extra=8)
    end = int(offs[-1])
    covered = {
        Ragged.M: lambda t: t[:end],
        Ragged.N: lambda t: t[:, :end],
        Ragged.K: None,  # the whole output is defined; K columns past offs[-1] must not contribute
    }[ragged]
    out = grouped_mm(a, b, offs, config=config)
    _check(out, a, b, offs, covered=covered)


def test_check_offsets_false_still_correct(device):
    a, b, offs = make_problem(Ragged.M, device=device)
    _check(grouped_mm(a, b, offs, config=PTR, check_offsets=False), a, b, offs)


# ---------------------------------------------------------------------------------------------------------------
# A deterministic sample from every region of the config space
# ---------------------------------------------------------------------------------------------------------------

AXES = ("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m", "load", "warp_specialize")


def sample_configs(sig: Signature, seed: int = 0) -> list[KernelConfig]:
    """One feasible config per (block_m, load, warp_specialize), then more until every value of every axis appears,
    plus the extremes (largest shared memory, most accumulator registers)."""
    feasible = feasible_configs(sig, H100_SXM)
    rng = random.Random(seed)
    by_region = defaultdict(list)
    for c in feasible:
        by_region[(c.block_m, c.load, c.warp_specialize)].append(c)
    picked = [rng.choice(by_region[key]) for key in sorted(by_region)]
    for axis in AXES:
        for value in sorted({getattr(c, axis) for c in feasible} - {getattr(c, axis) for c in picked}):
            picked.append(rng.choice([c for c in feasible if getattr(c, axis) == value]))
    picked.append(max(feasible, key=lambda c: (smem_bytes(c, sig.elem_bytes), c.config_id)))
    picked.append(max(feasible, key=lambda c: (acc_regs_per_thread(c), c.config_id)))
    return list(dict.fromkeys(picked))


SIG_FP16 = Signature(Ragged.M, 2, True)
SIG_FP32 = Signature(Ragged.M, 4, True)
SAMPLE = [(torch.float16, c) for c in sample_configs(SIG_FP16)] + [(torch.float32, c) for c in sample_configs(SIG_FP32)]


@pytest.mark.parametrize("sig", [SIG_FP16, SIG_FP32], ids=["fp16", "fp32"])
def test_sample_covers_the_space(sig):
    sample = sample_configs(sig)
    feasible = feasible_configs(sig, H100_SXM)
    assert sample == sample_configs(sig), "the sample must be deterministic"
    assert set(sample) <= set(feasible)
    for axis in AXES:
        assert {getattr(c, axis) for c in sample} == {getattr(c, axis) for c in feasible}, axis
    regions = {(c.block_m, c.load, c.warp_specialize) for c in feasible}
    assert regions <= {(c.block_m, c.load, c.warp_specialize) for c in sample}


@pytest.mark.parametrize("dtype,config", SAMPLE, ids=[f"{str(d)[6:]}-{c.config_id}" for d, c in SAMPLE])
def test_sampled_configs(dtype, config, device):
    # Alternate B's major across the sample; groups of 37 rows and N=72 give several tiles per group for small blocks.
    b_row_major = SAMPLE.index((dtype, config)) % 2 == 0
    a, b, offs = make_problem(Ragged.M, True, b_row_major, dtype, device, sizes=(5, 0, 37, 8))
    _check(grouped_mm(a, b, offs, config=config), a, b, offs)


# ---------------------------------------------------------------------------------------------------------------
# The persistent tile walk and the GROUP_M tile order
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("programs", [1, 3])
@pytest.mark.parametrize("config", [PTR, TMA], ids=["ptr", "tma"])
@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_few_programs_walk_all_tiles(ragged, config, programs, device, monkeypatch):
    """Fewer programs than tiles: each program must carry its tile walk across group boundaries."""
    monkeypatch.setattr(gg, "num_programs", lambda call, cfg: programs)
    a_row_major = ragged != Ragged.K
    b_row_major = ragged != Ragged.N
    a, b, offs = make_problem(ragged, a_row_major, b_row_major, torch.float32, device)
    _check(grouped_mm(a, b, offs, config=config), a, b, offs)


@pytest.mark.parametrize("programs", [None, 5])
def test_group_m_partial_band(programs, device, monkeypatch):
    """GROUP_M=8 over 10 tile-rows: one full band of 8 and a partial band of 2, each 4 tiles wide."""
    if programs is not None:
        monkeypatch.setattr(gg, "num_programs", lambda call, cfg: programs)
    config = KernelConfig(16, 64, 32, 2, 2, group_m=8)
    a, b, offs = make_problem(Ragged.M, sizes=(150, 3), n=200, dtype=torch.float32, device=device)
    _check(grouped_mm(a, b, offs, config=config), a, b, offs)


# ---------------------------------------------------------------------------------------------------------------
# Empty outputs and K=0: answered without a launch
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_shape,b_shape,sizes,out_shape",
    [
        ((32, 0), (4, 0, 24), SIZES, (32, 24)),  # 2Dx3D, K=0
        ((4, 24, 0), (4, 0, 40), None, (4, 24, 40)),  # 3Dx3D, K=0
        ((4, 24, 0), (0, 32), SIZES, (24, 32)),  # 3Dx2D, K=0
        ((32, 40), (4, 40, 0), SIZES, (32, 0)),  # N=0
        ((0, 40), (4, 40, 24), (0, 0, 0, 0), (0, 24)),  # no rows
    ],
    ids=["2Dx3D-k0", "3Dx3D-k0", "3Dx2D-k0", "n0", "m0"],
)
def test_degenerate_shapes_skip_the_launch(a_shape, b_shape, sizes, out_shape, device, make_offsets, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("launched")

    monkeypatch.setattr(gg, "launch", no_launch)
    a = torch.randn(a_shape, device=device)
    b = torch.randn(b_shape, device=device)
    offs = make_offsets(sizes, device) if sizes is not None else None
    out = grouped_mm(a, b, offs, config=PTR)
    assert out.shape == out_shape
    assert torch.all(out == 0)


# ---------------------------------------------------------------------------------------------------------------
# torch._grouped_mm on the CPU as a second reference
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize(
    "ragged,b_row_major",
    [(Ragged.M, True), (Ragged.M, False), (Ragged.N, True), (Ragged.K, True), (Ragged.NONE, True)],
    ids=["2Dx3D", "2Dx3D-b_nk", "3Dx2D", "2Dx2D", "3Dx3D"],
)
def test_matches_torch_grouped_mm_on_cpu(ragged, b_row_major, dtype, device):
    a, b, offs = make_problem(ragged, True, b_row_major, dtype, "cpu")
    try:
        expected = torch._grouped_mm(a, b, offs)
    except NotImplementedError as e:
        pytest.skip(f"torch._grouped_mm is not implemented on the CPU here: {e}")
    out = grouped_mm(a.to(device), b.to(device), offs if offs is None else offs.to(device), config=PTR).cpu()
    assert out.dtype == expected.dtype
    _assert_small(relative_error(out, expected), dtype, " against torch._grouped_mm")


# ---------------------------------------------------------------------------------------------------------------
# The one-loop schedule (ragged M, TMA)
# ---------------------------------------------------------------------------------------------------------------


def test_one_loop_is_ragged_m_with_tma_up_to_its_group_limit(device):
    call = validate(*make_problem(Ragged.M, device=device))
    assert gg.one_loop(call, TMA) and gg.one_loop(call, WS) and not gg.one_loop(call, PTR)
    for ragged in (Ragged.N, Ragged.K, Ragged.NONE):
        assert not gg.one_loop(validate(*make_problem(ragged, a_row_major=ragged != Ragged.K, device=device)), TMA)
    sizes = (3, 0) * (gg.ONE_LOOP_MAX_GROUPS // 2)
    assert gg.one_loop(validate(*make_problem(Ragged.M, sizes=sizes, device=device)), TMA)
    assert not gg.one_loop(validate(*make_problem(Ragged.M, sizes=(*sizes, 1), device=device)), TMA)


@pytest.mark.parametrize("b_row_major", [True, False], ids=["b_kn", "b_nk"])
@pytest.mark.parametrize("config", [TMA, WS], ids=["tma", "tma-ws"])
@pytest.mark.parametrize(
    "sizes",
    [(0, 0, 77, 0, 5), (9, 0, 1, 30, 2, 0, 0, 7), (9, 0, 1, 30, 2, 0, 0, 7, 4)],
    ids=["empty-ends", "at-the-limit", "past-the-limit"],
)
def test_one_loop_and_its_fallback_compute_the_grouped_gemm(sizes, config, b_row_major, device, monkeypatch):
    """Rows past a group's end are read (single descriptors) but never stored; N past the end is bounded per group;
    past the group limit (8 here, to keep the interpreter quick) the per-group walk takes over. `extra` rows past
    offs[-1] stay unwritten."""
    monkeypatch.setattr(gg, "ONE_LOOP_MAX_GROUPS", 8)
    a, b, offs = make_problem(Ragged.M, b_row_major=b_row_major, sizes=sizes, extra=3, device=device)
    out = grouped_mm(a, b, offs, config=config)
    _check(out, a, b, offs, covered=lambda t: t[: sum(sizes)])


# ---------------------------------------------------------------------------------------------------------------
# GPU only
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@LOAD_CONFIGS
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=["bf16-out", "fp32-out"])
@pytest.mark.parametrize("ragged", list(LAYOUT_IDS), ids=list(LAYOUT_IDS.values()))
def test_bf16_layouts_gpu(ragged, out_dtype, config):
    a_row_major = ragged != Ragged.K
    b_row_major = ragged != Ragged.N
    a, b, offs = make_problem(ragged, a_row_major, b_row_major, torch.bfloat16, "cuda")
    _check(grouped_mm(a, b, offs, out_dtype, config=config), a, b, offs, out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Regressions of bugs found by these tests (formerly strict xfails)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_shape,b_shape,sizes",
    [((32, 1), (4, 1, 24), SIZES), ((32, 40), (4, 40, 1), SIZES), ((1, 12), (2, 12, 24), (0, 1))],
    ids=["k1", "n1", "m1-k12"],
)
def test_tma_with_a_size_one_dim(a_shape, b_shape, sizes, device, make_offsets):
    """Either refused before launch (ValueError naming the config) or correct; never a failed launch."""
    a = torch.randn(a_shape, device=device).half()
    b = torch.randn(b_shape, device=device).half()
    offs = make_offsets(sizes, device)
    try:
        out = grouped_mm(a, b, offs, config=TMA)
    except ValueError as e:
        assert TMA.config_id in str(e)
        return
    _check(out, a, b, offs)


def test_bfloat16_on_the_cpu_is_refused_before_any_launch(monkeypatch):
    """The low-level entry point too (the tuner and `collect` refused it; this one returned garbage, errors of 1e10):
    the interpreter's bf16 dot is wrong, so a bf16 call on CPU tensors is refused before the launch. On a GPU host
    (no interpreter) CPU tensors are refused whatever their dtype, before the dtype's own check."""
    from autoheur.kernels import grouped_mm

    launched = []
    monkeypatch.setattr(gg, "launch", lambda *a, **k: launched.append(1))
    a, b = torch.randn(16, 32, dtype=torch.bfloat16), torch.randn(2, 32, 32, dtype=torch.bfloat16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    if HAS_GPU:
        refusal = (ValueError, "a is on cpu: the Triton kernel runs on a CUDA GPU")
    else:
        refusal = (TypeError, "a is bfloat16 on the CPU: the Triton interpreter computes bf16 products")
    with pytest.raises(refusal[0], match=refusal[1]):
        grouped_mm(a, b, offs, config=KernelConfig(16, 64, 32, 2, 2))
    assert not launched
    if not HAS_GPU:  # a call that launches nothing still returns its empty output (on a GPU host: refused, as above)
        empty = grouped_mm(a[:0], b, torch.zeros(2, dtype=torch.int32), config=KernelConfig(16, 64, 32, 2, 2))
        assert empty.shape == (0, 32) and not launched


def test_the_explicit_config_entry_runs_under_its_tensors_gpu(monkeypatch, two_gpus):
    """autoheur.kernels.grouped_mm (the README's explicit-config kernel) launched on the current device with another
    GPU's pointers: a call whose `a` is on another GPU than the current one runs inside that GPU's
    `torch.cuda.device`, one on the current GPU without it (tests/inference/test_runtime.py runs it on two GPUs)."""
    from autoheur.kernels import grouped_mm

    inside, on = two_gpus
    ran: list[tuple] = []
    monkeypatch.setattr(gg, "grouped_mm", lambda a, *rest, **kw: ran.append((a, tuple(inside), kw)))
    for a in (on[1], on[0]):
        grouped_mm(a, None, None, config=PTR, check_offsets=False)
    kw = {"config": PTR, "check_offsets": False}
    assert ran == [(on[1], (1,), kw), (on[0], (), kw)] and not inside
