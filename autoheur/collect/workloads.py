"""Problems to collect and benchmark, built from the public MoE model list (../shared/moe_models.json).

A fused gate/up projection is N = 2 * I / TP, K = H; the down projection N = H, K = I / TP. Groups per GPU are
E / EP, and rows = tokens * top_k / EP (the tokens routed to this GPU's experts).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from autoheur.problem import Problem, split_rows

_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "moe_models.json"


def moe_models_path() -> Path:
    """The public model list: $AUTOHEUR_MOE_MODELS, ../shared/moe_models.json beside the checkout, else the packaged
    copy."""
    env = os.environ.get("AUTOHEUR_MOE_MODELS")
    if env:
        return Path(env)
    if _SHARED.exists():
        return _SHARED
    return Path(__file__).with_name("moe_models.json")


def load_models() -> dict:
    return json.loads(moe_models_path().read_text())


def moe_problem(
    model: str, proj: str, tokens: int, *, ep: int = 1, tp: int = 1, seed: int = 0, models: dict | None = None
) -> Problem:
    """One expert GEMM of `model` ('gate_up' or 'down') at `tokens` tokens, routing rows ~ U(0.5, 1.5) * mean."""
    spec = (models or load_models())["models"][model]
    h, i, e, top_k = spec["hidden"], spec["expert_intermediate"] // tp, spec["experts"], spec["top_k"]
    groups = e // ep
    rows = max(1, tokens * top_k // ep)
    n, k = (2 * i, h) if proj == "gate_up" else (h, i)
    gen = torch.Generator().manual_seed(seed)
    sizes = split_rows(rows, groups, gen)
    name = f"{model}/{proj}/t{tokens}" + (f"/ep{ep}" if ep > 1 else "") + (f"/tp{tp}" if tp > 1 else "")
    return Problem("2d3d", groups, sizes, 0, n, k, "bfloat16", "k", "k", name=name)


def _anchor(name: str, groups: int, rows: int, n: int, k: int, seed: int) -> Problem:
    sizes = split_rows(rows, groups, torch.Generator().manual_seed(seed))
    return Problem("2d3d", groups, sizes, 0, n, k, "bfloat16", "k", "k", name=name)


def public_problems() -> list[Problem]:
    """The problems of ../shared/notes/anchors.md plus the other public models at decode, mid and prefill."""
    anchors = [
        ("deepseek-v3/gate_up/decode", 32, 256, 4096, 7168),
        ("deepseek-v3/gate_up/mid", 32, 4096, 4096, 7168),
        ("deepseek-v3/down/prefill", 32, 32768, 7168, 2048),
        ("mixtral-8x7b/gate_up/decode", 8, 128, 28672, 4096),
        ("mixtral-8x7b/down/prefill", 8, 32768, 4096, 14336),
        ("qwen3-30b-a3b/gate_up/decode", 128, 512, 1536, 2048),
        ("qwen3-30b-a3b/down/mid", 128, 8192, 2048, 768),
        ("qwen3-30b-a3b/gate_up/prefill", 128, 65536, 1536, 2048),
        ("gpt-oss-120b/gate_up/mid", 128, 32768, 5760, 2880),
    ]
    out = [_anchor(*a, seed=i) for i, a in enumerate(anchors)]
    # The other public models: decode 16 tokens, mid 1024, prefill 16384; both projections over the three.
    extra = [
        ("qwen3-235b-a22b", dict(ep=8)),
        ("llama-4-scout", dict(tp=4)),
        ("gpt-oss-20b", {}),
    ]
    for j, (model, par) in enumerate(extra):
        for phase, tokens, proj in (("decode", 16, "gate_up"), ("mid", 1024, "down"), ("prefill", 16384, "gate_up")):
            p = moe_problem(model, proj, tokens, seed=100 + 3 * j + len(out), **par)
            out.append(Problem(**{**_fields(p), "name": f"{model}/{proj}/{phase}"}))
    return out


def _fields(p: Problem) -> dict:
    return {f: getattr(p, f) for f in p.__slots__}
