"""zero_past_end: zeros exactly the slices at or past offs[-1], in either dim and either major, NaN included."""

from __future__ import annotations

import pytest
import torch

from autoheur.kernels.tail import BLOCK_C, BLOCK_R, zero_past_end


def _expected(t: torch.Tensor, end: int, dim: int) -> torch.Tensor:
    out = t.clone()
    out.narrow(dim, end, t.shape[dim] - end).zero_()
    return out


@pytest.mark.parametrize("end", [0, 5, BLOCK_R + 3, 70, 77])  # 77: the groups cover every slice
@pytest.mark.parametrize("col_major", [False, True], ids=["row-major", "col-major"])
@pytest.mark.parametrize("dim", [0, 1])
def test_zeros_the_tail_only(dim, col_major, end, device):
    torch.manual_seed(0)
    shape = (77, BLOCK_C + 9) if dim == 0 else (BLOCK_C + 9, 77)
    t = torch.randn(shape[::-1] if col_major else shape, dtype=torch.float16, device=device)
    t = t.t() if col_major else t
    t[t > 2.0] = float("nan")  # what uninitialized memory can hold: a 0/1 multiply would keep these
    offs = torch.tensor([0, min(end, 3), end], dtype=torch.int32, device=device)
    want = _expected(t, end, dim)
    zero_past_end(t, offs, dim)
    torch.testing.assert_close(t, want, equal_nan=True, atol=0, rtol=0)
    tail = t.narrow(dim, end, t.shape[dim] - end)
    assert not tail.isnan().any() and (tail == 0).all()


def test_an_offset_past_the_end_changes_nothing(device):
    t = torch.randn(40, 8, device=device)
    want = t.clone()
    zero_past_end(t, torch.tensor([50], dtype=torch.int32, device=device), 0)
    assert torch.equal(t, want)


def test_bad_arguments_are_refused(device):
    offs = torch.tensor([3], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="2D tensor"):
        zero_past_end(torch.zeros(2, 3, 4, device=device), offs, 0)
    with pytest.raises(ValueError, match="dim 0 or 1"):
        zero_past_end(torch.zeros(2, 3, device=device), offs, 2)
    with pytest.raises(ValueError, match="non-empty offsets"):
        zero_past_end(torch.zeros(2, 3, device=device), offs[:0], 0)
