"""Issue 5 compile-path benchmark (GPU): a MoE expert block under torch.compile(mode="max-autotune").

The block (an nn.Module whose parameters are the expert weights): gate/up grouped GEMM (x[T, H] by W1[E, 2I, H] used
transposed), SiLU(gate) * up, down grouped GEMM (by W2[E, H, I] used transposed), all under mode="max-autotune" (CUDA
graphs on). Three ways, each in a fresh process with every compile cache off
(`force_disable_caches`) and its own empty Triton cache directory, so each pays its own compile and autotune:
  inductor        Inductor's max-autotune over ATen + its whole Triton grid
  inductor+filter the same inside `autoheur.inductor.enable()` (ATen + the model's top-k of the grid)
  autoheur op     the block through `torch.ops.autoheur.grouped_mm` (autoheur's own tuning, its cache off)
Per way: the first call's wall time (compile + autotune + run) and the steady-state time of a call
(`triton.testing.do_bench`, median), plus how many grouped-mm choices Inductor benchmarked (from its feedback saver).
`--dynamic` compiles with the token rows symbolic (`torch._dynamo.mark_dynamic`, as torch.compile's automatic dynamic
recompiles on a second batch size), so Inductor autotunes one kernel per GEMM for every size at the hint (`--tokens`);
`--steady-tokens` then times the compiled block at other token counts too (its first call there, and its steady
state), with the same routing law. `--train` times a training step instead: the weights and x require grad, and each
call is the forward and the gradients of x, W1 and W2 (torch.autograd.grad of the output against an output gradient of
ones), so the compile covers the backward's grouped mms too (dx: 2D x 3D with W N-contiguous; dW: 2D x 2D), which
Inductor also autotunes, and which the filter narrows only with a model that has their layouts.

Example (one H100):
  python benchmarks/inductor_block.py --out $OUT --model qwen3-30b-a3b --tokens 4096
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

WAYS = ("inductor", "inductor+filter", "autoheur op")


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _offsets(torch, tokens: int, experts: int, dev):
    """Uniform routing: each row to an expert at random (multinomial counts), as cumulative int32 offsets."""
    counts = torch.distributions.Multinomial(tokens, torch.ones(experts)).sample().to(torch.int64)
    return torch.cumsum(counts, 0).to(device=dev, dtype=torch.int32)


def _run(
    way: str, experts: int, hidden: int, inter: int, tokens: int, top_k: int, seed: int, dynamic: bool = False,
    steady_tokens: tuple[int, ...] = (), train: bool = False,
) -> dict:  # fmt: skip
    import torch
    import torch.nn.functional as F
    import triton.testing
    from torch._inductor import config
    from torch._inductor import select_algorithm as sa

    torch.manual_seed(seed)
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(tokens, hidden, device=dev, dtype=dt)  # this order of draws: the routings of earlier records
    w1 = torch.randn(experts, 2 * inter, hidden, device=dev, dtype=dt) / hidden**0.5
    w2 = torch.randn(experts, hidden, inter, device=dev, dtype=dt) / inter**0.5
    offs = _offsets(torch, tokens, experts, dev)

    if way == "autoheur op":
        import autoheur.inference  # noqa: F401  (registers torch.ops.autoheur.grouped_mm)

        mm = torch.ops.autoheur.grouped_mm.default
    else:

        def mm(a, b, o, out_dtype=None):
            return torch._grouped_mm(a, b, o)

    class Block(torch.nn.Module):
        """The expert weights are the module's parameters, as in a MoE layer: static under CUDA graphs, where plain
        inputs (1.2 GB of weights here) would be copied into the graph's buffers on every replay."""

        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(w1, requires_grad=train)
            self.w2 = torch.nn.Parameter(w2, requires_grad=train)

        def forward(self, x, offs):
            h = mm(x, self.w1.transpose(-2, -1), offs, None)
            g, u = h.chunk(2, dim=-1)
            return mm(F.silu(g) * u, self.w2.transpose(-2, -1), offs, None)

    block = Block()

    benchmarked = []
    sa.add_feedback_saver(lambda timings, name, *rest: benchmarked.append((name, len(timings))))
    scope = None
    if way == "inductor+filter":
        import autoheur.inductor

        scope = autoheur.inductor.enable(top_k=top_k)
    # One mode for every way, CUDA graphs included: the op's cached call is graph-safe once offsets are trusted
    # (AUTOHEUR_CHECK_OFFSETS=0, set for that way: torch._grouped_mm does not read them back either).
    mode = "max-autotune"
    with config.patch(force_disable_caches=True):
        fn = torch.compile(block, mode=mode, fullgraph=True, dynamic=None if dynamic else False)
        if dynamic:
            torch._dynamo.mark_dynamic(x, 0)

        def call(x, offs):
            if not train:
                return fn(x, offs)
            x = x.detach().requires_grad_()
            if dynamic:  # the tensor the compiled block sees (stop 87: marking only the x it came from compiled the
                torch._dynamo.mark_dynamic(x, 0)  # step static at the first size, then again at the second)
            out = fn(x, offs)  # its gradient: ones (filled in each call, as a loss's backward would)
            return (out, *torch.autograd.grad(out, (x, block.w1, block.w2), torch.ones_like(out)))

        def norm(res):  # before the next call: a CUDA graph's outputs are overwritten by it
            return float(sum(t.detach().float().norm() for t in res)) if train else float(res.float().norm())

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = call(x, offs)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        out_norm = norm(out)
        steady = triton.testing.do_bench(lambda: call(x, offs), warmup=25, rep=200, return_mode="median")
        at = []
        for t in steady_tokens:  # the compiled block at other sizes: one kernel per GEMM when dynamic
            x2 = torch.randn(t, hidden, device=dev, dtype=dt)
            offs2 = _offsets(torch, t, experts, dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call(x2, offs2)
            torch.cuda.synchronize()
            first_t = time.perf_counter() - t0
            ms = triton.testing.do_bench(lambda: call(x2, offs2), warmup=25, rep=200, return_mode="median")  # noqa: B023
            at.append({"tokens": t, "first_call_s": first_t, "steady_ms": float(ms)})
    res = {"way": way, "first_call_s": first, "steady_ms": float(steady), "benchmarked": benchmarked,
           "out_norm": out_norm, "dynamic": dynamic, "train": train, "steady_at": at}  # fmt: skip
    if scope is not None:
        res["filter_decisions"] = scope.filter.decisions
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="qwen3-30b-a3b", help="a model of ../shared/moe_models.json (its dimensions)")
    ap.add_argument("--tokens", type=int, default=4096, help="token-expert rows (tokens x experts per token)")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--ways", default=",".join(WAYS))
    ap.add_argument("--dynamic", action="store_true", help="the token rows symbolic (compiled once for every size)")
    ap.add_argument("--steady-tokens", default="", help="other token counts to time the compiled block at (a,b,...)")
    ap.add_argument("--train", action="store_true", help="a training step: the forward and the gradients of x, W1, W2")
    args = ap.parse_args(argv)
    steady_tokens = tuple(int(t) for t in args.steady_tokens.split(",") if t.strip())
    from autoheur.collect.workloads import load_models

    spec = load_models()["models"][args.model]
    dims = (spec["experts"], spec["hidden"], spec["expert_intermediate"], args.tokens, args.top_k, 0)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for way in args.ways.split(","):
        # A fresh Triton cache per way: the ways compile some of the same template kernels, and a warm cache would
        # hand the later ways the earlier ways' compile time.
        with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
            env = {"TRITON_CACHE_DIR": cold, "AUTOHEUR_CACHE": "0", "AUTOHEUR_CHECK_OFFSETS": "0"}
            with ProcessPoolExecutor(
                1, mp_context=mp.get_context("spawn"), initializer=_set_env, initargs=(env,)
            ) as pool:
                try:
                    row = pool.submit(_run, way, *dims, args.dynamic, steady_tokens, args.train).result()
                except Exception as e:  # one way's failure is a result too; the other ways still run
                    row = {"way": way, "error": f"{type(e).__name__}: {e}"[:2000]}
        row.update(model=args.model, tokens=args.tokens)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (args.out / "inductor_block.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
