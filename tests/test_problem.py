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
