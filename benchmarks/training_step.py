"""Issue 5, the backward (GPU): a MoE expert GEMM's training step through the autoheur custom op against
`torch._grouped_mm`'s own autograd, on the public problems.

Per public problem (2D x 3D, x[M,K] . W[g], W stored [g,N,K] as MoE weights are), in a fresh spawned process with an
empty Triton cache and no autoheur cache:
  - first_step_s: wall time of the first forward + backward through `torch.ops.autoheur.grouped_mm`: three grouped
    GEMMs tuned one after another (the forward, grad_a = dy . W[g] read N-contiguous, and grad_b = x^T . dy, a 2D x 2D
    call ragged along K), each on its own predicted top 10;
  - rel_err_a, rel_err_b: the op's gradients against torch._grouped_mm's, ||ours - torch|| / ||torch|| (both bf16);
  - the three GEMMs alone, each through `autoheur.grouped_mm` (its tuned config, or ATen where ATen won its tuning)
    and through `torch._grouped_mm` on the same operands: fwd_*, grad_a_*, grad_b_* (ms), and the configs chosen;
  - step_autoheur_ms, step_torch_ms: one whole forward + backward (grads of x and W, the op's zeroing of rows past
    the last offset included), timed as a unit; step_api_ms: the same step through `autoheur.grouped_mm`, which is
    differentiable too and skips the custom op's dispatch layers (the same kernels, less host time).
Every figure is the median over ROUNDS interleaved rounds (each round times every kernel once, in a new seeded order,
with `triton.testing.do_bench`, L2 flushed), so clock drift falls on all alike. By default autoheur reads the offsets
back on every call to check them (a host sync, which do_bench's GPU-side timing then sees as idle time before the
kernel on small problems); `--trust-offsets` sets AUTOHEUR_CHECK_OFFSETS=0, as torch._grouped_mm trusts them.
Decode-sized problems are listed too, though nobody trains at 16 tokens: the summary gives the geomeans over all and
over mid + prefill alone.

  TRITON_CACHE_DIR=$PWD/.cache/triton python benchmarks/training_step.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import geomean, run_env  # noqa: E402
from benchmarks.inference_eager import _cold, _in_fresh_process, _interleaved_ms  # noqa: E402

ROUNDS = 3
REP_MS = 100
GEMMS = ("fwd", "grad_a", "grad_b")


def _step_row(problem) -> dict:
    """In a fresh process: the figures of one problem (see the module's docstring)."""
    import torch

    import autoheur
    import autoheur.inference.op  # noqa: F401  (registers torch.ops.autoheur.grouped_mm)
    from autoheur.inference.tuner import default_tuner
    from autoheur.kernels import validate
    from autoheur.kernels.reference import relative_error

    a0, b0, offs = problem.make_inputs("cuda")
    x = a0.detach().clone().requires_grad_()  # clone keeps the strides: W stays N-by-K in memory, read as [g,K,N]
    w = b0.detach().clone().requires_grad_()
    gen = torch.Generator(device="cuda").manual_seed(1)
    dy = torch.randn((x.shape[0], w.shape[2]), generator=gen, device="cuda").to(x.dtype)
    op = torch.ops.autoheur.grouped_mm
    tuner = default_tuner()
    tuner.model(validate(a0, b0, offs).device)  # loaded before the clock, as a training process loads it once

    def step(fn):
        x.grad = w.grad = None
        fn(x, w, offs).backward(dy)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step(op)
    torch.cuda.synchronize()
    row = {"problem": problem.name, "first_step_s": time.perf_counter() - t0}
    ours = (x.grad.clone(), w.grad.clone())
    step(torch._grouped_mm)
    row.update(rel_err_a=relative_error(ours[0], x.grad), rel_err_b=relative_error(ours[1], w.grad))

    xd, wd = x.detach(), w.detach()
    operands = {"fwd": (xd, wd), "grad_a": (dy, wd.transpose(-1, -2)), "grad_b": (xd.t(), dy)}
    kernels = {
        "step_autoheur": lambda: step(op),
        "step_api": lambda: step(autoheur.grouped_mm),
        "step_torch": lambda: step(torch._grouped_mm),
    }
    for name, (p, q) in operands.items():
        row[f"{name}_config"] = tuner.config_for(validate(p, q, offs)).config_id
        kernels[f"{name}_autoheur"] = lambda p=p, q=q: autoheur.grouped_mm(p, q, offs)
        kernels[f"{name}_torch"] = lambda p=p, q=q: torch._grouped_mm(p, q, offs)
    medians, per_round, states = _interleaved_ms(kernels, rounds=ROUNDS, rep_ms=REP_MS)
    row.update({f"{k}_ms": v for k, v in medians.items()}, rounds=per_round, gpu_state=states)
    return row


def summarize(rows: list[dict]) -> dict:
    """Geomeans of torch time / autoheur time (> 1: autoheur faster) over all rows and over mid + prefill."""

    def speedups(rs):
        out = {f"{g}_vs_torch_geomean": geomean(r[f"{g}_torch_ms"] / r[f"{g}_autoheur_ms"] for r in rs)
               for g in (*GEMMS, "step")}  # fmt: skip
        api = [r for r in rs if "step_api_ms" in r]  # records before the API step was timed lack it
        if api:
            out["step_api_vs_torch_geomean"] = geomean(r["step_torch_ms"] / r["step_api_ms"] for r in api)
        out["step_slower_than_torch"] = sum(r["step_autoheur_ms"] > r["step_torch_ms"] for r in rs)
        out["problems"] = len(rs)
        return out

    failed = [r["problem"] for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    train = [r for r in rows if not r["problem"].endswith("/decode")]
    return {
        "failed": failed,
        "all": speedups(rows),
        "mid_and_prefill": speedups(train),
        "first_step_s_median": statistics.median(r["first_step_s"] for r in rows),
        "rel_err_max": max(max(r["rel_err_a"], r["rel_err_b"]) for r in rows),
        "rounds": ROUNDS,
        "rep_ms": REP_MS,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=None, help="first N public problems only")
    ap.add_argument("--trust-offsets", action="store_true",
                    help="AUTOHEUR_CHECK_OFFSETS=0: no read-back of the offsets per call (a host sync), as "
                         "torch trusts them")  # fmt: skip
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from autoheur.collect.workloads import public_problems

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "env.json").write_text(json.dumps(run_env(), indent=1))
    rows = []
    for p in public_problems()[: args.limit]:
        with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
            env = _cold("predicted", cold) | ({"AUTOHEUR_CHECK_OFFSETS": "0"} if args.trust_offsets else {})
            try:
                row = _in_fresh_process(env, _step_row, p)
            except Exception as exc:  # recorded, and the summary counts it: one failure must not lose the rest
                row = {"problem": p.name, "error": repr(exc)}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("rounds", "gpu_state")}), flush=True)
        (args.out / "training_step.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize(rows) | {"trust_offsets": args.trust_offsets}
    print(json.dumps(summary, indent=1), flush=True)
    (args.out / "training_step_summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
