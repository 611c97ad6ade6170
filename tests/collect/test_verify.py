"""The round-1 output check (collect/verify.py), under the interpreter: its verdicts and its poison."""

from __future__ import annotations

import math

import pytest
import torch

from autoheur.collect.precompile import classify_error
from autoheur.collect.verify import CHECK_BLOCK, OutputCheck
from tests.conftest import DEVICE


def make(names=("good", "wrong", "hole", "raises"), numel=CHECK_BLOCK * 3 + 5, dtype=torch.bfloat16):
    ref = torch.randn(numel // 5, 5, dtype=torch.float32, device=DEVICE)
    out = torch.empty(ref.shape, dtype=dtype, device=DEVICE)
    return OutputCheck(out, ref, list(names), 1e-2, classify_error), out, ref


@pytest.mark.parametrize("numel", [CHECK_BLOCK * 3 + 5, pytest.param(9_000_005, marks=pytest.mark.gpu)])
def test_verdicts_ok_wrong_unwritten_and_raised(numel):
    """On the GPU, the larger size makes each program loop (the grid is capped at 4 programs per SM)."""
    check, out, ref = make(numel=numel)
    runs = {
        "good": lambda: out.copy_(ref),  # rounded to bf16: within tolerance
        "wrong": lambda: out.copy_(ref * 1.5),
        "hole": lambda: out[:-1].copy_(ref[:-1]),  # the last row never written: NaN from the poison
        "raises": lambda: (_ for _ in ()).throw(RuntimeError("out of resource: shared memory")),
    }
    for name, fn in runs.items():
        check.guard(name, fn)()
        check.after(name)
        assert torch.isnan(out).all()  # every check re-poisons the output for the next config
    verdicts = check.verdicts()
    assert verdicts == {"good": "ok", "wrong": "wrong", "hole": "wrong", "raises": "out_of_resources"}
    errs = check.errors()
    expected = float(torch.linalg.vector_norm(ref.bfloat16().float() - ref) / ref.norm())
    assert errs["good"] == pytest.approx(expected, rel=1e-3)
    assert errs["good"] < 1e-2 and errs["wrong"] == pytest.approx(0.5, rel=1e-3) and math.isnan(errs["hole"])
    assert "raises" not in errs


def test_a_config_is_checked_once_and_an_unchecked_one_is_wrong():
    check, out, ref = make(names=("a", "never"))
    check.guard("a", lambda: out.copy_(ref))()
    check.after("a")
    out.copy_(ref * 2)
    check.after("a")  # a later run of the same config is not checked again
    assert check.verdicts() == {"a": "ok", "never": "wrong"}


def test_shapes_must_match():
    with pytest.raises(ValueError, match="reference's shape"):
        OutputCheck(torch.empty(3, 4, device=DEVICE), torch.empty(4, 3, device=DEVICE), ["a"], 1e-2, classify_error)
