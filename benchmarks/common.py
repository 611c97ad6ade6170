"""What the GPU benchmarks share: the record of where and how a run was taken, and the geometric mean."""

from __future__ import annotations

import math
import sys
import time


def run_env() -> dict:
    """Device, torch and triton versions, date and command line of this run (a CUDA GPU is present)."""
    import torch
    import triton

    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "argv": sys.argv,
    }


def geomean(xs) -> float:
    """Geometric mean; NaN for no values, and a NaN among them stays NaN (a failed measurement shows, not vanishes)."""
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan
