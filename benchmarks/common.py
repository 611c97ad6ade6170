"""What the benchmarks share: the record of where and how a run was taken (GPU or CPU), the geometric mean, a CPU
call's median time, and a result printed and written as JSON."""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path


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


def cpu_model() -> str:
    """This machine's CPU model name (/proc/cpuinfo), for the CPU benchmarks: the lent 2-core machines differ
    between sessions (AMD EPYC, Intel Xeon), and their figures with them."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        return platform.processor()


def geomean(xs) -> float:
    """Geometric mean; NaN for no values, and a NaN among them stays NaN (a failed measurement shows, not vanishes)."""
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def median_ms(f, n: int = 20, warm: int = 1) -> float:
    """Median wall time of `n` calls of `f()` in ms, after `warm` untimed calls (CPU work: no GPU synchronization)."""
    for _ in range(warm):
        f()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    times.sort()
    return (times[(n - 1) // 2] + times[n // 2]) / 2 * 1e3


def print_json(result, out: str | None = None) -> int:
    """`result` printed as indented JSON, and written to `out` too when given; the script's exit status (0)."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    return 0
