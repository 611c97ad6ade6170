"""Where a cold first call's compile time goes (GPU): worker start-up against compiling, and processes against threads.

Every variant runs in a fresh spawned process with its own empty Triton cache, on the first public problem's
predicted top 10 (the shipped model of this GPU), compiling and checking each config on the problem's tiny twin as
`autoheur.collect.precompile` does:

  worker_imports   per worker of a fresh pool of N: seconds to import torch, the kernel module (triton), and to
                   initialize CUDA (N = 1 and N = 10: how much concurrent start-up slows each worker)
  pool_warm        a fresh WorkerPool of 10, warmed: seconds until all 10 report ready
  pool_cold_batch  a fresh WorkerPool of 10, not warmed: seconds to compile and check the 10 configs (what a cold
                   first call pays before timing)
  pool_warm_batch  the same batch on a pool warmed beforehand (what a call after `prepare()` pays)
  threads          the 10 configs compiled and checked in this process by 10 threads (whether Triton's compiler
                   releases the GIL enough for threads to overlap)
  serial           the 10 configs compiled and checked in this process one after another

Example (one H100): python benchmarks/compile_startup.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _in_fresh_process(fn, *args):
    with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=ctx, initializer=_set_env, initargs=({"TRITON_CACHE_DIR": cold},)) as ex:
            return ex.submit(fn, *args).result()


def _timed_imports() -> dict:
    t0 = time.perf_counter()
    import torch

    t1 = time.perf_counter()
    import autoheur.kernels.grouped_gemm  # noqa: F401

    t2 = time.perf_counter()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    return {"torch": t1 - t0, "kernel_module": t2 - t1, "cuda_init": t3 - t2, "pid": os.getpid()}


def _worker_imports(n: int) -> dict:
    t0 = time.perf_counter()
    with ProcessPoolExecutor(n, mp_context=mp.get_context("spawn")) as ex:
        rows = [f.result() for f in [ex.submit(_timed_imports) for _ in range(n)]]
        ready = time.perf_counter() - t0
    keys = ("torch", "kernel_module", "cuda_init")
    return {"workers": n, "all_ready_s": ready, **{k: max(r[k] for r in rows) for k in keys},
            "distinct_workers": len({r["pid"] for r in rows})}  # fmt: skip


def _problem_and_configs():
    import torch

    from autoheur.collect.workloads import public_problems
    from autoheur.device import DeviceSpec
    from autoheur.models.artifact import model_for_device

    problem = public_problems()[0]
    spec = DeviceSpec.from_torch()
    model, how = model_for_device(torch.cuda.get_device_name(), spec=spec.to_dict())  # its own, or its kin's
    if model is None:
        raise SystemExit(f"compile_startup: {how}: this benchmark times the model's top 10")
    return problem, [c for c, _ in model.top_k(problem, 10, device={**model.device, **spec.to_dict()})]


def _variant(name: str) -> dict:
    from autoheur.collect.precompile import WorkerPool, check_config, precompile

    problem, configs = _problem_and_configs()
    tiny = problem.shrunk()
    out = {"variant": name, "problem": problem.name, "configs": [c.config_id for c in configs]}
    t0 = time.perf_counter()
    if name == "pool_warm":
        pool = WorkerPool(10)
        for f in pool.warm(10):
            f.result()
        out["seconds"] = time.perf_counter() - t0
        pool.close()
    elif name in ("pool_cold_batch", "pool_warm_batch"):
        pool = WorkerPool(10)
        if name == "pool_warm_batch":
            for f in pool.warm(10):
                f.result()
            t0 = time.perf_counter()
        results = precompile(problem, configs, pool=pool)
        out["seconds"] = time.perf_counter() - t0
        out["statuses"] = [r.status for r in results]
        pool.close()
    elif name == "threads":
        import torch

        torch.cuda.init()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(len(configs)) as ex:
            results = list(ex.map(lambda c: check_config(tiny, c), configs))
        out["seconds"] = time.perf_counter() - t0
        out["statuses"] = [r.status for r in results]
    elif name == "serial":
        import torch

        torch.cuda.init()
        t0 = time.perf_counter()
        results = [check_config(tiny, c) for c in configs]
        out["seconds"] = time.perf_counter() - t0
        out["per_config_s"] = [round(r.seconds, 3) for r in results]
        out["statuses"] = [r.status for r in results]
    else:
        raise ValueError(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(args.repeats):
        for n in (1, 10):
            rows.append({"rep": rep, "variant": "worker_imports", **_in_fresh_process(_worker_imports, n)})
            print(json.dumps(rows[-1]), flush=True)
        for name in ("pool_warm", "pool_cold_batch", "pool_warm_batch", "threads", "serial"):
            rows.append({"rep": rep, **_in_fresh_process(_variant, name)})
            print(json.dumps(rows[-1]), flush=True)
        (args.out / "compile_startup.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
