"""`autoheur.grouped_mm`: torch._grouped_mm's semantics, the kernel and config chosen by autoheur.

A new tuning key (see key.py) costs one brief autotune of the predicted configs; later calls with the same key cost
a dictionary lookup on top of the kernel launch. All inputs are validated before anything runs.
"""

from __future__ import annotations

import os

import torch

from autoheur.inference.tuner import default_tuner
from autoheur.kernels.config import Ragged
from autoheur.kernels.grouped_gemm import launch
from autoheur.kernels.validate import check_config, validate

# Read the offsets back to check their values on every call (one small device-to-host copy and a sync; skipped during
# CUDA graph capture). AUTOHEUR_CHECK_OFFSETS=0 trusts them after the shape, dtype and device checks, as
# torch._grouped_mm does: a steady-state loop then never waits on the GPU.
CHECK_OFFSETS = os.environ.get("AUTOHEUR_CHECK_OFFSETS", "1") != "0"


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Same as `torch._grouped_mm(a, b, offs, out_dtype=out_dtype)`, with a tuned Triton kernel."""
    call = validate(a, b, offs, out_dtype, check_offsets=CHECK_OFFSETS)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=a.device)
    if out.numel() == 0:
        return out
    if call.k == 0 and call.ragged != Ragged.K:
        return out.zero_()
    cfg = default_tuner().config_for(call)
    check_config(cfg, call)
    return launch(call, cfg, out)
