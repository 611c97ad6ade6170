"""The screening timer on the GPU (skipped without one): protocol v2+ times the kernel, not the host's launch."""

from __future__ import annotations

import pytest
import torch

from autoheur.collect.timing import Timer, WallTimer


@pytest.mark.gpu
def test_tiny_kernels_are_timed_without_launch_overhead():
    """A tiny add takes a few microseconds on the GPU; a slow host launch (a Python sleep) must not be counted."""
    import time

    x = torch.ones(1024, device="cuda")

    def slow_launch():  # 200 us of host time before a ~3 us kernel
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 200e-6:
            pass
        x.add_(1)

    t = Timer("cuda").screen({"add": slow_launch}, reps=5)["add"]
    assert t.median_ms < 0.05, t  # the GPU was kept busy while the host enqueued: no 0.2 ms gaps


@pytest.mark.gpu
def test_timer_orders_kernels_by_work():
    small, big = torch.randn(256, 256, device="cuda"), torch.randn(4096, 4096, device="cuda")
    out = Timer("cuda").screen({"small": lambda: small @ small, "big": lambda: big @ big}, reps=3, abort_factor=1e9)
    assert out["big"].median_ms > 10 * out["small"].median_ms


def test_wall_timer_measures_host_time():
    import time

    # 50x apart, so that sleep overshoot on a loaded machine cannot bring them within the 3x abort factor
    out = WallTimer().screen({"a": lambda: time.sleep(0.002), "b": lambda: time.sleep(0.1)}, reps=2)
    assert out["a"].median_ms >= 2 and out["b"].censored  # far slower than the best: one run, a lower bound
