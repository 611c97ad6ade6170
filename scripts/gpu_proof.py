"""GPU proof of the kernel family (issue: foundation). Run on a CUDA GPU; results go to --out as JSON and CSV.

Phases (``--phases``, comma-separated, in order):
  env      device properties, versions, measured copy bandwidth and dense bf16 matmul rate
  correct  every layout x dtype x operand major x a sample of configs vs the fp32 reference, outputs poisoned
  compile  the whole feasible 2D x 3D bf16 space compiled (and checked) in parallel on all cores; wall time
  time     per public problem: every config that compiled, screened, then the best 5 and aten re-timed with do_bench

Example:
  TRITON_CACHE_DIR=$PWD/.cache/triton python scripts/gpu_proof.py --phases env,correct,compile --out /tmp/proof
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import triton

from autoheur.collect.precompile import check_many, precompile
from autoheur.collect.timing import Timer, bench_ms
from autoheur.collect.workloads import public_problems
from autoheur.device import DeviceSpec
from autoheur.kernels import KernelConfig, Signature, feasible_configs, infeasible_reason, launch, validate
from autoheur.kernels.config import SPACE_HASH
from autoheur.kernels.reference import relative_error
from autoheur.problem import Problem

SAMPLE = [  # one config from each region of the space, for the correctness sweep
    "m16n64k32s2w2g1-ptr", "m32n128k64s4w4g8-ptr", "m64n128k64s3w4g8-ptr", "m128n256k64s3w8g8-ptr",
    "m256n128k32s3w8g1-ptr", "m64n64k256s2w4g8-ptr", "m16n128k128s4w4g1-tma", "m64n256k64s4w8g8-tma",
    "m128n128k64s4w4g8-tma", "m128n256k64s3w8g8-tma", "m128n128k64s4w8g8-tma-ws", "m256n64k128s3w8g1-tma-ws",
]  # fmt: skip


def log(*a):
    print(*a, flush=True)


def measure_ceilings() -> dict:
    n = 1 << 30  # 2 GiB of bf16
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), rep_ms=300)
    copy_gbs = 2 * src.numel() * 2 / ms / 1e6
    src = dst = None  # free 4 GiB before the matmul
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    ms = bench_ms(lambda: a @ b, rep_ms=500)
    return {"copy_GBps": copy_gbs, "matmul_TFLOPs": 2 * 8192**3 / ms / 1e9}


def correctness_problems() -> list[Problem]:
    sizes = (0, 37, 200, 5, 128)
    out = []
    for dt in ("bfloat16", "float16"):
        for bm in ("k", "n"):
            out.append(Problem("2d3d", 5, sizes, 0, 264, 136, dt, bm, "k", name=f"2d3d/{dt}/b{bm}"))
            out.append(Problem("3d2d", 5, (0, 40, 200, 8, 128), 136, 0, 264, dt, bm, "k", name=f"3d2d/{dt}/b{bm}"))
            out.append(Problem("3d3d", 3, (), 100, 264, 136, dt, bm, "k", name=f"3d3d/{dt}/b{bm}"))
        for am in ("k", "m"):  # a row-major A needs a K total that is a multiple of 8 (16-byte rows)
            out.append(Problem("2d2d", 5, (0, 37, 200, 5, 126), 136, 264, 0, dt, "n", am, name=f"2d2d/{dt}/a{am}"))
    return out


def phase_correct(dev: DeviceSpec, res: dict) -> None:
    jobs = []
    for p in correctness_problems():
        sig = validate_sig(p)
        for cid in SAMPLE:
            cfg = KernelConfig.from_id(cid)
            if infeasible_reason(cfg, sig, dev) is None:
                jobs.append((p, cfg))
    t0 = time.time()
    results = check_many(jobs)
    rows = [
        {"problem": p.name, "config": r.config_id, "status": r.status, "rel_err": r.rel_err, "msg": r.message[:200]}
        for (p, _), r in zip(jobs, results, strict=True)
    ]
    bad = [r for r in rows if r["status"] != "ok"]
    res["correct"] = {
        "checks": len(rows),
        "passed": len(rows) - len(bad),
        "failures": bad,
        "max_rel_err": {
            dt: max(r["rel_err"] for r in rows if f"/{dt}/" in r["problem"] and r["status"] == "ok")
            for dt in ("bfloat16", "float16")
        },
        "seconds": time.time() - t0,
    }
    log(f"correct: {len(rows) - len(bad)}/{len(rows)} passed in {time.time() - t0:.0f}s; max rel err",
        res["correct"]["max_rel_err"])  # fmt: skip
    for r in bad[:20]:
        log("  FAIL", r)


def validate_sig(p: Problem) -> Signature:
    """The problem's signature, from a validated call on its tiny twin (same layout, dtype and alignment)."""
    return validate(*p.shrunk().make_inputs("cuda")).signature


def phase_compile(dev: DeviceSpec, res: dict, problems: list[Problem]) -> list[KernelConfig]:
    p = problems[0]
    configs = feasible_configs(validate_sig(p), dev)
    log(f"compile: {len(configs)} feasible configs for {p.layout} {p.dtype} on {dev.name}, {os.cpu_count()} cores")
    t0 = time.time()
    last = [0.0]

    def progress(done, total):
        if time.time() - last[0] > 30:
            last[0] = time.time()
            log(f"  {done}/{total} in {time.time() - t0:.0f}s")

    results = precompile(p, configs, progress=progress)
    wall = time.time() - t0
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    res["compile"] = {
        "feasible": len(configs),
        "wall_s": wall,
        "workers": os.cpu_count(),
        "status_counts": counts,
        "failures": [(r.config_id, r.status, r.message[:300]) for r in results if r.status != "ok"][:40],
        "ok_ids": [r.config_id for r in results if r.status == "ok"],
    }
    log(f"compile: {counts} in {wall:.0f}s")
    return [KernelConfig.from_id(r.config_id) for r in results if r.status == "ok"]


def phase_time(dev: DeviceSpec, res: dict, problems, configs, deadline: float, out_dir: Path) -> None:
    timer = Timer()
    ceil = res.get("env", {}).get("ceilings", {})
    rows, raw = [], []
    # Warm every config in this process once on a tiny problem with the same binaries (loads them from disk).
    tiny = problems[0].shrunk()
    ta, tb, to = tiny.make_inputs("cuda")
    tcall = validate(ta, tb, to)
    tout = torch.empty(tcall.out_shape, dtype=tcall.out_dtype, device="cuda")
    t0 = time.time()
    for c in configs:
        launch(tcall, c, tout)
    torch.cuda.synchronize()
    log(f"time: warmed {len(configs)} configs in {time.time() - t0:.0f}s")
    for p in problems:
        if time.time() > deadline:
            log(f"time: deadline reached, {p.name} and later skipped")
            break
        t0 = time.time()
        a, b, offs = p.make_inputs("cuda", seed=1)
        call = validate(a, b, offs)
        out = torch.empty(call.out_shape, dtype=call.out_dtype, device="cuda")
        fns = {c.config_id: (lambda c=c, call=call, out=out: launch(call, c, out)) for c in configs}
        screened = timer.screen(fns)
        ranked = sorted((t.median_ms, cid) for cid, t in screened.items() if not t.censored)
        finals = {cid: bench_ms(fns[cid]) for _, cid in ranked[:5]}
        best_id = min(finals, key=finals.get)
        best = finals[best_id]
        aten = bench_ms(lambda a=a, b=b, offs=offs: torch._grouped_mm(a, b, offs))
        ours = launch(call, KernelConfig.from_id(best_id), out).clone()
        err = relative_error(ours, torch._grouped_mm(a, b, offs).float())
        flops, nbytes = p.flops(), p.min_bytes()
        all_ms = sorted(t.median_ms for t in screened.values())
        roof_ms = max(flops / (ceil.get("matmul_TFLOPs", 790) * 1e9), nbytes / (ceil.get("copy_GBps", 3000) * 1e6))
        row = {
            "problem": p.name, "G": p.groups, "rows": p.total, "N": p.n, "K": p.k, "mean_rows": p.mean_size(),
            "aten_ms": aten, "best_ms": best, "speedup": aten / best, "best_config": best_id,
            "TFLOPs": flops / best / 1e9, "GBps": nbytes / best / 1e6, "roofline_frac": roof_ms / best,
            "aten_roofline_frac": roof_ms / aten, "median_cfg_ms": all_ms[len(all_ms) // 2], "worst_cfg_ms": all_ms[-1],
            "censored": sum(t.censored for t in screened.values()), "configs": len(screened),
            "rel_err_vs_aten": err, "seconds": time.time() - t0,
        }  # fmt: skip
        rows.append(row)
        raw += [(p.name, cid, t.median_ms, t.spread, t.reps, int(t.censored)) for cid, t in screened.items()]
        log(
            f"{p.name:34s} aten {aten:7.3f} best {best:7.3f} x{aten / best:5.2f} {best_id:26s} "
            f"{row['TFLOPs']:6.0f} TF/s {row['GBps']:6.0f} GB/s roof {row['roofline_frac']:.2f} ({row['seconds']:.0f}s)"
        )
        res["time"] = rows
        (out_dir / "proof.json").write_text(json.dumps(res, indent=1))
    with open(out_dir / "screen.csv", "w") as f:
        f.write("problem,config_id,median_ms,spread,reps,censored\n")
        for r in raw:
            f.write(f"{r[0]},{r[1]},{r[2]:.5f},{r[3]:.4f},{r[4]},{r[5]}\n")
    if rows:
        sp = [r["speedup"] for r in rows]
        res["summary"] = {
            "geomean_speedup": math.exp(sum(math.log(s) for s in sp) / len(sp)),
            "min_speedup_memory_bound": min((r["speedup"] for r in rows if r["mean_rows"] <= 256), default=None),
            "min_speedup_compute_bound": min((r["speedup"] for r in rows if r["mean_rows"] > 256), default=None),
        }
        log("summary:", res["summary"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phases", default="env,correct,compile,time")
    ap.add_argument("--out", default=os.environ.get("OUT", "proof_out"))
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop starting new problems after this long")
    ap.add_argument("--problems", default="", help="comma-separated substrings of problem names to keep")
    args = ap.parse_args(argv)
    t_start = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        log("no CUDA GPU: this script proves the kernel on a GPU")
        return 2
    phases = args.phases.split(",")
    dev = DeviceSpec.from_torch()
    prev = out_dir / "proof.json"
    res: dict = json.loads(prev.read_text()) if prev.exists() else {}
    problems = public_problems()
    if args.problems:
        problems = [p for p in problems if any(s in p.name for s in args.problems.split(","))]
    if "env" in phases:
        res["env"] = {
            "device": dev.to_dict(), "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "python": sys.version.split()[0], "space_hash": SPACE_HASH,
            "date": time.strftime("%Y-%m-%d"), "ceilings": measure_ceilings(),
        }  # fmt: skip
        log("env:", json.dumps(res["env"]))
    if "correct" in phases:
        phase_correct(dev, res)
    configs = None
    if "compile" in phases:
        configs = phase_compile(dev, res, problems)
    (out_dir / "proof.json").write_text(json.dumps(res, indent=1))
    if "time" in phases:
        if configs is None:
            ids = res.get("compile", {}).get("ok_ids")
            configs = [KernelConfig.from_id(c) for c in ids] if ids else phase_compile(dev, res, problems)
        phase_time(dev, res, problems, configs, t_start + args.budget_s, out_dir)
    (out_dir / "proof.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
