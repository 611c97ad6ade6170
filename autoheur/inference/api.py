"""`autoheur.grouped_mm`: torch._grouped_mm's semantics, the kernel and config chosen by autoheur.

A new tuning key (see key.py) costs one brief autotune of the predicted configs; later calls with the same key cost
a dictionary lookup on top of the kernel launch. All inputs are validated before anything runs.
"""

from __future__ import annotations

import torch

from autoheur.inference.tuner import default_tuner
from autoheur.kernels.config import Ragged
from autoheur.kernels.grouped_gemm import launch
from autoheur.kernels.validate import check_config, validate


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Same as `torch._grouped_mm(a, b, offs, out_dtype=out_dtype)`, with a tuned Triton kernel."""
    call = validate(a, b, offs, out_dtype)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=a.device)
    if out.numel() == 0:
        return out
    if call.k == 0 and call.ragged != Ragged.K:
        return out.zero_()
    cfg = default_tuner().config_for(call)
    check_config(cfg, call)
    return launch(call, cfg, out)
