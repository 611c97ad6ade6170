"""A plain-torch fp32 reference of torch._grouped_mm, for tests and spot checks (slow, simple, obviously right)."""

from __future__ import annotations

import torch


def reference_grouped_mm(
    a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None, out_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Group by group in fp32. Rows/columns past offs[-1] (ragged M/N) are zero; an empty K group gives zeros."""
    out_dtype = a.dtype if out_dtype is None else out_dtype
    af, bf = a.float(), b.float()
    ends = offs.tolist() if offs is not None else None
    starts = [0] + ends[:-1] if ends is not None else None
    if a.ndim == 2 and b.ndim == 3:
        out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float32, device=a.device)
        for g, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[s:e] = af[s:e] @ bf[g]
    elif a.ndim == 3 and b.ndim == 2:
        out = torch.zeros(a.shape[1], b.shape[1], dtype=torch.float32, device=a.device)
        for g, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[:, s:e] = af[g] @ bf[:, s:e]
    elif a.ndim == 2 and b.ndim == 2:
        out = torch.stack([af[:, s:e] @ bf[s:e] for s, e in zip(starts, ends, strict=True)])
    else:
        out = torch.bmm(af, bf)
    return out.to(out_dtype)


def reference_gradients(
    a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dA and dB of `reference_grouped_mm` at (a, b) for the output gradient `grad_out` (torch's autograd through the
    reference, on detached copies)."""
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    return torch.autograd.grad(reference_grouped_mm(a2, b2, offs), (a2, b2), grad_out)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere gives inf."""
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return float("inf")
    denom = r.norm().item()
    return (o - r).norm().item() / (denom if denom > 0 else 1.0)
