"""Shared test setup: the Triton CPU interpreter when there is no GPU, the `gpu` marker, small helpers.

TRITON_INTERPRET must be in the environment before `triton` is imported (autoheur.kernels imports it), so it is set
here at import time, after a torch-only check for a GPU. pytest imports this file before any test module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import pytest
import torch

HAS_GPU = torch.cuda.is_available()

if not HAS_GPU:
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("triton was imported before tests/conftest.py could set TRITON_INTERPRET=1")
    os.environ["TRITON_INTERPRET"] = "1"

# Kernel tests run on the GPU when there is one, else through the interpreter on CPU tensors.
DEVICE = "cuda" if HAS_GPU else "cpu"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def make_offsets(sizes: Sequence[int], device: str | torch.device = DEVICE) -> torch.Tensor:
    """Group sizes -> int32 cumulative group ends (the offsets torch._grouped_mm takes)."""
    ends, total = [], 0
    for s in sizes:
        total += s
        ends.append(total)
    return torch.tensor(ends, dtype=torch.int32, device=device)


@pytest.fixture
def device() -> str:
    return DEVICE


@pytest.fixture(name="make_offsets")
def make_offsets_fixture():
    return make_offsets


@pytest.fixture
def two_gpus(monkeypatch):
    """A stand-in for two GPUs with GPU 0 current, for a device guard's logic without them: returns the list of the
    `torch.cuda.device` scopes open now (their indexes, innermost last) and a stand-in tensor on each GPU (only its
    `.device`)."""
    import contextlib
    from types import SimpleNamespace

    inside: list[int] = []

    @contextlib.contextmanager
    def scope(index):
        inside.append(index)
        yield
        inside.pop()

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", scope)
    return inside, {i: SimpleNamespace(device=torch.device("cuda", i)) for i in (0, 1)}


@pytest.fixture
def small_memory():
    """Runs `fn()` with its address space capped at 1 GiB past what the process maps now, under tracemalloc: returns
    (its result, its traced peak in bytes). An allocation of gigabytes then fails at once with MemoryError rather than
    taking the machine's memory (a check that something is computed without per-group arrays must not need them)."""
    import resource
    import tracemalloc

    def run(fn):
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = mapped + 2**30
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        tracemalloc.start()
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        try:
            out = fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            tracemalloc.stop()
        return out, peak

    return run
