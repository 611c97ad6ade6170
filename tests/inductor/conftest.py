"""Inductor's real grouped_mm lowering on this CPU machine, told it runs on a Hopper GPU: it then builds its real
TritonTemplateCaller choices, which a Recorder (a preprocessing function) keeps and then drops before Inductor would
compile them (there is no GPU here), so the ATen choice runs."""

from __future__ import annotations

import contextlib

import pytest
import torch

from autoheur.inductor import disable
from autoheur.inductor.choices import choices_problem

mg = pytest.importorskip("torch._inductor.kernel.mm_grouped")
sa = pytest.importorskip("torch._inductor.select_algorithm")


@pytest.fixture
def hopper(monkeypatch):
    """Inductor's lowering as on an H100: the template's hardware gates say yes (132 SMs, 227 KB shared memory)."""
    import torch.utils._triton as ut

    monkeypatch.setattr(mg, "can_use_triton_kernel", lambda *a, **k: True)
    monkeypatch.setattr(mg, "use_triton_template", lambda *a, **k: True)
    monkeypatch.setattr(mg, "get_num_sms", lambda: 132)
    monkeypatch.setattr(mg, "get_gpu_shared_memory", lambda: 232448)
    monkeypatch.setattr(ut, "triton_hash_with_backend", lambda: "no-gpu")
    monkeypatch.setattr(ut, "triton_backend", lambda: None)
    from torch._inductor import config

    with config.patch(max_autotune=True, max_autotune_gemm_backends="ATEN,TRITON", force_disable_caches=True):
        yield
    disable()
    torch._dynamo.reset()


@pytest.fixture
def fake_autotuning(hopper, monkeypatch):
    """Inductor's max-autotune as on an H100 without its benchmarks: nothing precompiled, every choice it is handed
    "timed" (ATen fastest, so ATen runs; the templates 0.1 ms and up), and its feedback savers called as after real
    ones, so that `autoheur.inductor.collect.measure` runs whole on the CPU."""

    def autotune(self, name, input_nodes, layout, input_gen_fns, choices, *args, **kwargs):
        return {c: 0.01 if not c.name.startswith("triton_") else 0.1 + i / 1000 for i, c in enumerate(choices)}

    monkeypatch.setattr(sa.AlgorithmSelectorCache, "make_precompile_fn", lambda self, *a, **k: lambda: None)
    monkeypatch.setattr(sa.AlgorithmSelectorCache, "autotune", autotune)


class Recorder:
    """Registered after the filter: keeps what reached it and passes on only non-Triton choices (no GPU here)."""

    def __init__(self):
        self.lists = []
        self.problems = []

    def __call__(self, choices):
        self.lists.append(list(choices))
        self.problems.append(choices_problem(choices))
        return [c for c in choices if not c.name.startswith("triton_")]


@contextlib.contextmanager
def preprocessing(*fns):
    """Inductor's choice preprocessing functions `fns` (None ones skipped) installed in order, and removed after."""
    fns = [f for f in fns if f is not None]
    for f in fns:
        sa.add_preprocessing_fn(f)
    try:
        yield
    finally:
        installed = sa.get_algorithm_selector_cache().preprocessing_fns
        for f in fns:
            if f in installed:
                installed.remove(f)


def compile_and_run(recorder, groups=4, rows=512, n=512, k=256, inputs=None):
    with preprocessing(recorder):
        if inputs is None:
            a = torch.randn(rows, k, dtype=torch.bfloat16)
            b = torch.randn(groups, n, k, dtype=torch.bfloat16).transpose(-2, -1)  # MoE weights: [G, N, K] as K x N
            offs = torch.arange(1, groups + 1, dtype=torch.int32) * (rows // groups)
        else:
            a, b, offs = inputs
        out = torch.compile(lambda a, b, o: torch._grouped_mm(a, b, o), fullgraph=True)(a, b, offs)
        torch.testing.assert_close(out, torch._grouped_mm(a, b, offs))
