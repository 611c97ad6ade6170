"""`autoheur.problem`: which problems launch the kernel at all, checked against what the two wrappers do."""

from __future__ import annotations

import pytest
import torch

import autoheur.inference.api as api
import autoheur.kernels.grouped_gemm as gg
from autoheur.kernels.config import KernelConfig
from autoheur.problem import Problem, launches_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py: the interpreter on the CPU

CASES = [  # (problem, launches)
    (Problem("2d3d", 2, (0, 0), 0, 32, 16), False),  # no rows: an empty [0, N] output
    (Problem("3d2d", 2, (0, 0), 16, 0, 32), False),  # no columns: an empty [M, 0] output
    (Problem("2d2d", 2, (0, 0), 16, 32, 0), True),  # K = 0 in every group: the kernel writes zeros
    (Problem("2d3d", 2, (3, 0), 0, 32, 16), True),
    (Problem("3d3d", 2, (), 16, 32, 16), True),
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
def test_inputs_of_unaligned_dims_are_valid_and_match_the_signature(problem):
    """A problem whose dense rows are not 16-byte multiples (a caller's padded operand, the backward's padded
    gradient) draws padded operands: valid, with the signature `signature()` predicts. The tuner checks its candidates
    on such inputs (`shrunk()`); dense ones failed every candidate on a GPU (stop 78)."""
    from autoheur.kernels.validate import validate

    for p in (problem, problem.shrunk()):
        a, b, offs = p.make_inputs(DEVICE)
        call = validate(a, b, offs)
        assert call.signature == p.signature()
        assert (call.groups, call.n, call.k) == (p.groups, p.n, p.k)


def test_a_valid_dense_problem_draws_as_before():
    """Padding applies only where the dense operand is invalid: an aligned problem's operands are contiguous (or their
    transpose is) and hold the same values for the same seed as a plain draw."""
    p = Problem("2d3d", 2, (5, 11), 0, 24, 16, dtype="float32", b_major="k")
    a, b, _ = p.make_inputs("cpu", seed=3)
    gen = torch.Generator().manual_seed(3)
    assert torch.equal(a, torch.randn((16, 16), generator=gen))
    assert torch.equal(b, torch.randn((2, 24, 16), generator=gen).transpose(-1, -2))
