"""`autoheur.problem`: which problems launch the kernel at all, checked against what the two wrappers do."""

from __future__ import annotations

import itertools
import time

import pytest
import torch

import autoheur.inference.api as api
import autoheur.kernels.grouped_gemm as gg
from autoheur.kernels.config import KernelConfig, Ragged
from autoheur.problem import Problem, launches_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py: the interpreter on the CPU

DT = "bfloat16" if DEVICE == "cuda" else "float16"  # bf16 launches are refused on the CPU (the interpreter's bf16 dot)
CASES = [  # (problem, launches)
    (Problem("2d3d", 2, (0, 0), 0, 32, 16, DT), False),  # no rows: an empty [0, N] output
    (Problem("3d2d", 2, (0, 0), 16, 0, 32, DT), False),  # no columns: an empty [M, 0] output
    (Problem("2d2d", 2, (0, 0), 16, 32, 0, DT), True),  # K = 0 in every group: the kernel writes zeros
    (Problem("2d3d", 2, (3, 0), 0, 32, 16, DT), True),
    (Problem("3d3d", 2, (), 16, 32, 16, DT), True),
]


class Launched(Exception):
    pass


@pytest.mark.parametrize(("problem", "launches"), CASES)
def test_launches_is_what_the_wrappers_do(problem, launches, monkeypatch):
    assert problem.launches is launches is launches_kernel(problem.layout, problem.total)

    def launch(*args, **kwargs):
        raise Launched

    class Tuner:
        fast: dict = {}

        def config_for(self, call):
            raise Launched

    monkeypatch.setattr(gg, "launch", launch)
    monkeypatch.setattr(api, "launch", launch)
    monkeypatch.setattr(api, "default_tuner", Tuner)
    a, b, offs = problem.make_inputs(DEVICE)
    cfg = KernelConfig(32, 32, 32, 2, 2)
    for call in (lambda: gg.grouped_mm(a, b, offs, config=cfg), lambda: api.grouped_mm(a, b, offs)):
        if launches:
            with pytest.raises(Launched):
                call()
        else:
            assert call().numel() == 0


UNALIGNED = [  # float32 dims of 3 (12-byte rows), each operand major: valid only with a padded leading stride
    Problem(layout, 3, sizes, m, n, k, dtype="float32", a_major=am, b_major=bm)
    for layout, sizes, m, n, k in [
        ("2d3d", (5, 0, 11), 0, 24, 3),
        ("2d3d", (5, 0, 11), 0, 3, 24),
        ("3d2d", (5, 0, 11), 8, 0, 3),
        ("2d2d", (5, 0, 11), 3, 24, 0),
        ("2d2d", (5, 0, 11), 24, 3, 0),
        ("3d3d", (), 8, 3, 3),
    ]
    for am in ("k", "m")
    for bm in ("n", "k")
]


@pytest.mark.parametrize("problem", UNALIGNED, ids=lambda p: f"{p.layout}-{p.m}x{p.n}x{p.k}-a{p.a_major}-b{p.b_major}")
def test_padded_inputs_of_unaligned_dims_are_valid_and_match_the_signature(problem):
    """A shape whose dense rows are not 16-byte multiples: its dense operands are refused (as torch refuses them)
    where such rows are an operand's leading stride; its padded ones (a caller's padded view, the backward's padded
    gradient) are valid, with the signature that `signature()` predicts; a `PaddedProblem` draws them so, its
    `shrunk()` too (the tuner's parallel check)."""
    from autoheur.kernels.validate import validate
    from autoheur.problem import PaddedProblem

    padded = PaddedProblem(*(getattr(problem, f) for f in ("layout", "groups", "sizes", "m", "n", "k", "dtype",
                                                             "b_major", "a_major")))  # fmt: skip
    for p in (problem, problem.shrunk()):
        try:  # some are valid dense: a column-major operand's leading stride is its other dim
            dense = validate(*p.make_inputs(DEVICE))
        except ValueError as exc:
            assert "leading stride must be a multiple of 16 bytes" in str(exc) or "group stride" in str(exc)
        else:
            assert dense.signature == p.signature()
        call = validate(*p.make_inputs(DEVICE, padded=True))
        assert call.signature == p.signature()
        assert (call.groups, call.n, call.k) == (p.groups, p.n, p.k)
    tiny = padded.shrunk()
    assert type(tiny) is PaddedProblem and validate(*tiny.make_inputs(DEVICE)).signature == problem.signature()


def test_padding_leaves_a_valid_dense_problem_as_it_was():
    """Padding applies only where the dense operand is invalid: an aligned problem draws the same contiguous operands
    (the same values for the same seed) either way."""
    p = Problem("2d3d", 2, (5, 11), 0, 24, 16, dtype="float32", b_major="k")
    gen = torch.Generator().manual_seed(3)
    want = torch.randn((16, 16), generator=gen), torch.randn((2, 24, 16), generator=gen).transpose(-1, -2)
    for padded in (False, True):
        a, b, _ = p.make_inputs("cpu", seed=3, padded=padded)
        assert torch.equal(a, want[0]) and torch.equal(b, want[1]) and a.is_contiguous()


def test_the_tuners_parallel_check_passes_a_padded_calls_candidates():
    """What failed on the GPU at stop 78, on the CPU: the check (`precompile`, threads) of a K = 3 float32 call's
    candidate on the problem of the call (`problem_of(call, padded=True)`) passes; on the dense problem, refused."""
    from autoheur.collect.precompile import precompile
    from autoheur.inference.tuner import problem_of
    from autoheur.kernels.config import feasible_configs
    from autoheur.kernels.validate import validate

    a, b = torch.randn(20, 4, device=DEVICE)[:, :3], torch.randn(3, 3, 24, device=DEVICE)
    call = validate(a, b, torch.tensor([5, 8, 20], dtype=torch.int32, device=DEVICE))
    cfg = next(c for c in feasible_configs(call.signature, call.device) if c.load == "ptr")
    ok = precompile(problem_of(call, padded=True), [cfg], workers=1, threads=True, device=DEVICE)
    dense = precompile(problem_of(call), [cfg], workers=1, threads=True, device=DEVICE)
    assert [r.status for r in ok] == ["ok"] and [r.status for r in dense] == ["invalid"]


SWEEP = [  # every layout and major, dims of 1 (no leading stride), of 3 (unaligned rows) and of 8, one or two groups
    (layout, dt, m, n, k, g, am, bm)
    for layout in ("2d3d", "3d2d", "2d2d", "3d3d")
    for dt in ("float32", "bfloat16")
    for m, n, k in itertools.product((1, 3, 8), repeat=3)
    for g in (1, 2)
    for am, bm in itertools.product("km", "nk")
]


def test_signature_is_validates_on_dense_and_padded_draws_of_every_layout():
    """`signature()` is what `validate` gives: on every dense draw it accepts (one-row operands included: stop 78
    found 103 shipped H100 problems, one row of A, offered no TMA config at inference) and on every padded draw, which
    is always valid (where a dim is 1, the groups start 16 bytes apart)."""
    from autoheur.kernels.validate import validate

    dense_ok = 0
    for layout, dt, m, n, k, g, am, bm in SWEEP:
        sizes = () if layout == "3d3d" else (m,) * g
        dims = {"2d3d": (0, n, k), "3d2d": (m, 0, k), "2d2d": (m, n, 0), "3d3d": (m, n, k)}[layout]
        p = Problem(layout, g, sizes, *dims, dtype=dt, a_major=am, b_major=bm)
        assert validate(*p.make_inputs(DEVICE, padded=True)).signature == p.signature(), p
        try:
            call = validate(*p.make_inputs(DEVICE))
        except ValueError:
            continue
        dense_ok += 1
        assert call.signature == p.signature(), p
    assert dense_ok > len(SWEEP) // 3


def test_flops_and_min_bytes_are_the_sums_over_the_groups():
    """Computed from the call's extents, they equal the sums over `per_group()` that they were, in every layout."""
    cases = [
        Problem("2d3d", 4, (100, 0, 300, 28), 0, 512, 256),
        Problem("3d2d", 3, (1, 17, 0), 96, 0, 1000, dtype="float16", a_major="m"),
        Problem("2d2d", 3, (0, 96, 1000), 200, 96, 0, dtype="float32", b_major="n"),
        Problem("2d3d", 2, (0, 0), 0, 8, 8),
        Problem("3d3d", 5, (), 33, 4097, 129),
        Problem("2d2d", 2, (2**31 - 2, 1), 2**31 - 1, 2**31 - 1, 0),  # past 2**53: exact ints, then one rounding
    ]
    for p in cases:
        per, r, g = p.per_group(), p.ragged, p.groups
        assert p.flops() == float(sum(2 * m * n * k for m, n, k in per)), p
        for out in (None, 4):
            e = p.torch_dtype.itemsize
            a = sum(m * k for m, _, k in per) if r != Ragged.N else g * p.m * p.k
            b = sum(k * n for _, n, k in per) if r != Ragged.M else g * p.k * p.n
            c = sum(m * n for m, n, _ in per)
            assert p.min_bytes(out) == float(e * (a + b) + (e if out is None else out) * c), (p, out)


def test_a_batched_problem_of_2_31_batches_sums_without_a_list_per_batch(small_memory):
    """Its per-group list took 16 GiB: under a 1 GiB cap that fails at once (MemoryError)."""
    big = Problem("3d3d", 2**31 - 1, (), 3, 5, 7)
    t0 = time.perf_counter()
    (flops, min_bytes), peak = small_memory(lambda: (big.flops(), big.min_bytes()))
    assert flops == 2.0 * 3 * 5 * 7 * (2**31 - 1)
    assert min_bytes == 2.0 * (3 * 7 + 7 * 5 + 3 * 5) * (2**31 - 1)
    assert peak < 2**20 and time.perf_counter() - t0 < 5


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(layout="2d3d", groups=2, sizes=(3, 4), m=0, n=2**31, k=64), r"^n=2147483648 is past 2147483647"),
        (dict(layout="3d3d", groups=2, sizes=(), m=8, n=8, k=10**30), r"^k=10{30} is past"),
        (dict(layout="2d2d", groups=2, sizes=(2**31 - 1, 1), m=8, n=8, k=0), r"^the sizes sum to 2147483648, past"),
        (dict(layout="3d3d", groups=2**31, sizes=(), m=8, n=8, k=8), r"^groups=2147483648 is past"),
    ],
)
def test_an_extent_past_int32_is_refused(fields, message):
    """Offsets are int32: a larger total would wrap in them; a larger extent failed only when a collection drew its
    inputs (a torch traceback, after the configs had compiled)."""
    with pytest.raises(ValueError, match=message):
        Problem(**fields)
    Problem("2d2d", 2, (2**31 - 2, 1), 2**31 - 1, 2**31 - 1, 0)  # the largest: fine
