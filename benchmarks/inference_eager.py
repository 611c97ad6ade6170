"""Issue 5 eager benchmarks (GPU): first-call tuning vs exhaustive, the tuned kernel vs the exhaustive winner and
torch._grouped_mm, and the steady-state cost of a cached call with CUDA graphs off and on.

Phases (``--phases``, comma-separated):
  tune       per public problem, in a fresh spawned process with an empty Triton cache and no autoheur cache (a true
             first call; the model is loaded before the clock starts, as a serving process loads it once):
             - first_call_s: wall time of the first `autoheur.grouped_mm` call (top-10 predicted, compiled in parallel
               and checked, timed on the call's inputs, the winner launched);
             - chosen_ms, aten_ms, oracle_ms: `triton.testing.do_bench` medians (L2 flushed) of the chosen config
               ("aten" where torch._grouped_mm, timed beside the predicted configs, won: AUTOHEUR_ATEN), of
               `torch._grouped_mm`, and of the exhaustive winner recorded for this problem in the shipped dataset,
               all on the same inputs in the same process;
             - triton_config, triton_ms: what a Triton-only tuning (AUTOHEUR_ATEN=off, a second tuner in the same
               process: the same prediction, its own timing) chose, and its do_bench median;
             - interleaved: the same kernels (each distinct one once: chosen, ATen, Triton-only, exhaustive winner)
               timed again in INTERLEAVED_ROUNDS rounds of one do_bench each (rep INTERLEAVED_REP_MS), in a new
               seeded order every round; *_ms_il are the medians over the rounds. The figures above are taken one
               after the other, so a drift of the clocks between them (long compute-bound kernels draw the most
               power) lands on whichever kernel was timed at the wrong moment; interleaved, it falls on all alike.
               gpu_state: the SM clock, power, temperature and throttle reasons (nvidia-smi) after each round;
             - prepared_first_call_s: with `--prepared`, the same first call in another fresh process after
               `autoheur.inference.prepare(wait=True)` (the model loaded and the kernel imported; with
               AUTOHEUR_COMPILE_IN=processes also the compile workers up, as a serving process has them);
             - exhaustive_s: with `--exhaustive-live N`, the first N problems are also tuned with AUTOHEUR_TUNE=
               exhaustive in another fresh process (every feasible config compiled on all cores, checked and timed):
               the measured wall time of exhaustive tuning.
  overhead   one small problem, tuned once, then host microseconds per call (median of 2000 calls per variant,
             the variants interleaved in 10 rounds of 200, no sync inside a round) for: the direct launch of the
             chosen config (the jitted kernel called with its grid and arguments worked out beforehand, allocating
             its output, and into a preallocated one), the compiled launch (Triton's launcher of the compiled kernel,
             every argument bound beforehand: no jitted dispatch), its BoundLaunch, `kernels.launch` (which works the
             grid and arguments out per call), the kernel wrapper with that config, and the cached
             `autoheur.grouped_mm`, with offsets checked and trusted (AUTOHEUR_CHECK_OFFSETS); the cached call's parts
             alone (its signature, the output allocation); overhead_us = trusted cached call - direct launch,
             overhead_vs_compiled_us = trusted cached call - compiled launch; whether the cached call computed what
             `launch` computes and ran through the kept compiled kernel. Then the GPU time per call of 100 calls
             captured in a CUDA graph, for the direct launch and the cached call.

Where the dataset is too big to carry to the GPU machine, save its public oracles first (no GPU needed) and pass
them instead: `--data DATA --write-oracles FILE`, then `--oracles FILE`.

Example (one H100):
  TRITON_CACHE_DIR=$PWD/.cache/triton python benchmarks/inference_eager.py --out $OUT --exhaustive-live 2
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import geomean, run_env  # noqa: E402

INTERLEAVED_ROUNDS = 5
INTERLEAVED_REP_MS = 100


def _gpu_state() -> str | None:
    """nvidia-smi's SM clock (MHz), power (W), temperature (C) and active throttle reasons; None where it fails."""
    import subprocess

    query = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    try:
        res = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def _interleaved_ms(fns: dict, rounds: int = INTERLEAVED_ROUNDS, rep_ms: int = INTERLEAVED_REP_MS, seed: int = 0):
    """name -> median over `rounds` of do_bench medians, each round timing every kernel once in a new seeded order;
    also the per-round figures and the GPU state after each round."""
    import random

    from autoheur.collect.timing import bench_ms

    rng = random.Random(seed)
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    states = []
    for _ in range(rounds):
        order = list(fns)
        rng.shuffle(order)
        for name in order:
            per_round[name].append(bench_ms(fns[name], rep_ms=rep_ms))
        states.append(_gpu_state())
    return {name: statistics.median(ts) for name, ts in per_round.items()}, per_round, states


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _first_call(problem, mode: str, oracle_id: str | None, prepared: bool = False) -> dict:
    """In a fresh process: the first autoheur.grouped_mm call on `problem` under AUTOHEUR_TUNE=`mode`; `prepared`:
    after `autoheur.inference.prepare(wait=True)` (with AUTOHEUR_COMPILE_IN=processes, the compile workers already
    up, as in a serving process)."""
    import torch

    import autoheur
    from autoheur.collect.timing import bench_ms
    from autoheur.inference.aten import run_choice
    from autoheur.inference.tuner import Tuner, default_tuner
    from autoheur.kernels import KernelConfig, launch, validate
    from autoheur.kernels.reference import reference_grouped_mm, relative_error

    a, b, offs = problem.make_inputs("cuda")
    call = validate(a, b, offs)
    tuner = default_tuner()
    tuner.model(call.device)  # loaded before the clock: once per process in real use
    if prepared:
        tuner.prepare(wait=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = autoheur.grouped_mm(a, b, offs)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    row = {"problem": problem.name, "mode": mode, "first_call_s": first}
    if mode == "exhaustive" or prepared:
        return row
    cfg = tuner.config_for(call)
    row.update(config=cfg.config_id, rel_err=relative_error(out, reference_grouped_mm(a, b, offs, call.out_dtype)))
    buf = torch.empty_like(out)
    row["chosen_ms"] = bench_ms(lambda: run_choice(call, cfg, buf))
    row["aten_ms"] = bench_ms(lambda: torch._grouped_mm(a, b, offs))
    prev = os.environ.get("AUTOHEUR_ATEN")
    os.environ["AUTOHEUR_ATEN"] = "off"
    triton_cfg = Tuner().config_for(call)
    if prev is None:
        del os.environ["AUTOHEUR_ATEN"]
    else:
        os.environ["AUTOHEUR_ATEN"] = prev
    launch(call, triton_cfg, buf)  # compiled outside any timed region
    row.update(triton_config=triton_cfg.config_id, triton_ms=bench_ms(lambda: launch(call, triton_cfg, buf)))
    if oracle_id:
        oracle = KernelConfig.from_id(oracle_id)
        launch(call, oracle, buf)  # compiled outside any timed region
        row.update(oracle=oracle_id, oracle_ms=bench_ms(lambda: launch(call, oracle, buf)))
    kernels = {"aten": lambda: torch._grouped_mm(a, b, offs)}
    for c in (cfg, triton_cfg) + ((oracle,) if oracle_id else ()):
        if c.config_id not in kernels:
            kernels[c.config_id] = lambda c=c: run_choice(call, c, buf)
    medians, per_round, states = _interleaved_ms(kernels)
    row.update(
        chosen_ms_il=medians[cfg.config_id], aten_ms_il=medians["aten"], triton_ms_il=medians[triton_cfg.config_id],
        interleaved_rounds=per_round, gpu_state=states,
    )  # fmt: skip
    if oracle_id:
        row["oracle_ms_il"] = medians[oracle_id]
    return row


def _in_fresh_process(env: dict, fn, *args) -> dict:
    """`fn(*args)` in a new spawned process with `env` set before anything is imported there. Not a Pool: its daemon
    workers may not start the tuner's own compile processes."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_set_env, initargs=(env,)) as pool:
        return pool.submit(fn, *args).result()


def _cold(mode: str, cache_dir: str) -> dict:
    return {"TRITON_CACHE_DIR": cache_dir, "AUTOHEUR_CACHE": "0", "AUTOHEUR_TUNE": mode}


def oracles(data: Path) -> dict[str, tuple[str, float]]:
    """problem_id -> (fastest usable config, its recorded ms) in a dataset."""
    from autoheur.collect.store import DatasetStore

    df = DatasetStore.load(data).read(["problem_id", "config_id", "median_ms", "status"])
    df = df[(df.status == "ok")]
    best = df.loc[df.groupby("problem_id").median_ms.idxmin()]
    return {r.problem_id: (r.config_id, r.median_ms) for r in best.itertuples()}


def public_oracles(data: Path) -> dict[str, list]:
    """`oracles` of the public problems only: what `--write-oracles` saves, so that a run on a GPU machine needs the
    few rows it uses instead of the whole dataset (which, with the model and the xgboost wheel, no longer fits in
    what a device call carries)."""
    from autoheur.collect.schema import problem_id
    from autoheur.collect.workloads import public_problems

    best = oracles(data)
    ids = [problem_id(p) for p in public_problems()]
    missing = [i for i in ids if i not in best]
    if missing:
        raise SystemExit(f"{data}: no usable timing for {len(missing)} public problems: collect them first")
    return {i: list(best[i]) for i in ids}


def phase_tune(args, out: Path) -> list[dict]:
    from autoheur.collect.schema import problem_id
    from autoheur.collect.workloads import public_problems
    from autoheur.device import current_device_spec

    spec = current_device_spec()
    if args.oracles:
        saved = json.loads(args.oracles.read_text())
        if saved.get("device") != spec.name:
            raise SystemExit(f"{args.oracles} holds the oracles of {saved.get('device')!r}, this GPU is {spec.name!r}")
        best = {k: tuple(v) for k, v in saved["oracles"].items()}
    else:
        data = Path(args.data or ROOT / "data" / spec.slug)
        best = oracles(data) if data.exists() else {}
    rows = []
    for i, p in enumerate(public_problems()[: args.limit]):
        if i < args.start:
            continue
        oracle = best.get(problem_id(p), (None, math.nan))
        with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
            row = _in_fresh_process(_cold("predicted", cold), _first_call, p, "predicted", oracle[0])
        row["dataset_oracle_ms"] = oracle[1]
        if args.prepared:
            with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
                prep = _in_fresh_process(_cold("predicted", cold), _first_call, p, "predicted", None, True)
                row["prepared_first_call_s"] = prep["first_call_s"]
        if i < args.exhaustive_live:
            with tempfile.TemporaryDirectory(prefix="triton-cold-") as cold:
                ex = _in_fresh_process(_cold("exhaustive", cold), _first_call, p, "exhaustive", None)
                row["exhaustive_s"] = ex["first_call_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "tune.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok = [r for r in rows if r.get("oracle_ms")]
    summary = {
        "problems": len(rows),
        "first_call_s_median": statistics.median(r["first_call_s"] for r in rows),
        "prepared_first_call_s_median": statistics.median(r["prepared_first_call_s"] for r in rows)
        if args.prepared
        else None,
        "vs_oracle_geomean": geomean([r["oracle_ms"] / r["chosen_ms"] for r in ok]),
        "vs_aten_geomean": geomean([r["aten_ms"] / r["chosen_ms"] for r in rows]),
        "chose_aten": sum(r.get("config") == "aten" for r in rows),
        "triton_only_vs_aten_geomean": geomean([r["aten_ms"] / r["triton_ms"] for r in rows if "triton_ms" in r]),
        "triton_only_vs_oracle_geomean": geomean([r["oracle_ms"] / r["triton_ms"] for r in ok if "triton_ms" in r]),
        "interleaved": {
            "rounds": INTERLEAVED_ROUNDS,
            "rep_ms": INTERLEAVED_REP_MS,
            "vs_aten_geomean": geomean([r["aten_ms_il"] / r["chosen_ms_il"] for r in rows]),
            "triton_only_vs_aten_geomean": geomean([r["aten_ms_il"] / r["triton_ms_il"] for r in rows]),
            "vs_oracle_geomean": geomean([r["oracle_ms_il"] / r["chosen_ms_il"] for r in ok]),
            "triton_only_vs_oracle_geomean": geomean([r["oracle_ms_il"] / r["triton_ms_il"] for r in ok]),
            "slower_than_aten": sum(r["chosen_ms_il"] > r["aten_ms_il"] for r in rows),
        },
        "exhaustive_over_first_call": [r["exhaustive_s"] / r["first_call_s"] for r in rows if "exhaustive_s" in r],
    }
    print(json.dumps(summary), flush=True)
    (out / "tune_summary.json").write_text(json.dumps(summary, indent=1))
    return rows


def _host_us(fns: dict, rounds: int = 10, calls: int = 200) -> dict[str, float]:
    """Median host microseconds per call (CPU enqueue cost; the GPU runs behind) of each of `fns`, measured
    interleaved: each round runs `calls` calls of every variant in turn, then syncs, so drift of the machine or of
    the launch queue's depth hits all variants alike; the result is the median over all calls of all rounds."""
    import torch

    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()  # keep the launch queue from filling
    return {name: statistics.median(ts) for name, ts in times.items()}


def _graph_us(fn, calls: int = 100, replays: int = 20) -> float:
    """GPU microseconds per call of `calls` calls captured in one CUDA graph."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (calls * replays)


def phase_overhead(args, out: Path) -> dict:
    import torch

    import autoheur
    import autoheur.inference.api as api
    import autoheur.kernels.grouped_gemm as gg
    from autoheur.collect.timing import bench_ms
    from autoheur.collect.workloads import public_problems
    from autoheur.kernels import grouped_mm as kernel_grouped_mm
    from autoheur.kernels import launch, validate
    from autoheur.kernels.grouped_gemm import launch_args
    from autoheur.kernels.launcher import BoundLaunch

    p = next(q for q in public_problems() if q.name == args.overhead_problem)
    a, b, offs = p.make_inputs("cuda")
    os.environ["AUTOHEUR_ATEN"] = "off"  # what a cached call adds over launching the Triton kernel it chose
    autoheur.grouped_mm(a, b, offs)  # tunes once
    call = validate(a, b, offs)
    from autoheur.inference.tuner import default_tuner

    cfg = default_tuner().config_for(call)
    buf = torch.empty(call.out_shape, dtype=call.out_dtype, device="cuda")
    res = {"problem": p.name, "config": cfg.config_id}

    # The direct launch: the jitted kernel called with its grid and every argument worked out beforehand, the output
    # allocated as the cached call allocates it. Nothing a caller could leave out.
    bound = BoundLaunch(call, cfg)
    grid, scalars, kwargs = launch_args(call, cfg)
    kernel = gg.grouped_gemm_kernel[grid]
    shape, dtype = call.out_shape, call.out_dtype

    def direct():
        kernel(a, b, a.new_empty(shape, dtype=dtype), offs, *scalars, **kwargs)

    def direct_into():
        kernel(a, b, buf, offs, *scalars, **kwargs)

    # Triton's own entry point for the compiled kernel, every argument (constexprs included) bound beforehand: the
    # launch with none of the jitted dispatch, which the cached call uses once it knows the compiled kernel.
    import triton

    from autoheur.kernels.launcher import full_args

    compiled = kernel(a, b, buf, offs, *scalars, **kwargs)
    runner = compiled[(*grid, 1, 1)[:3]]
    tail = full_args(gg.grouped_gemm_kernel, (a, b, buf, offs), scalars, kwargs)[0][4:]
    drv = triton.runtime.driver.active

    def compiled_launch():
        dev = drv.get_current_device()
        runner(a, b, a.new_empty(shape, dtype=dtype), offs, *tail, stream=drv.get_current_stream(dev))

    def cached(check: bool):
        def call_it():
            api.CHECK_OFFSETS = check
            return autoheur.grouped_mm(a, b, offs)

        return call_it

    res.update({f"{name}_us": us for name, us in _host_us({
        "direct_launch": direct,
        "direct_launch_into": direct_into,
        "compiled_launch": compiled_launch,
        "bound_launch": lambda: bound(a, b, offs),
        "launch": lambda: launch(call, cfg, buf),
        "launch_alloc": lambda: launch(call, cfg, torch.empty_like(buf)),
        "kernel_wrapper": lambda: kernel_grouped_mm(a, b, offs, config=cfg),
        "kernel_wrapper_trusted": lambda: kernel_grouped_mm(a, b, offs, config=cfg, check_offsets=False),
        "cached_call_checked": cached(True),
        "cached_call_trusted": cached(False),
        # the parts, alone (no launch)
        "part_signature": lambda: api._signature(a, b, offs, None),
        "part_new_empty": lambda: a.new_empty(shape, dtype=dtype),
        "part_empty_device": lambda: torch.empty(shape, dtype=dtype, device=a.device),
    }).items()})  # fmt: skip
    api.CHECK_OFFSETS = True
    res["overhead_us"] = res["cached_call_trusted_us"] - res["direct_launch_us"]
    res["overhead_vs_compiled_us"] = res["cached_call_trusted_us"] - res["compiled_launch_us"]
    res["cached_call_equals_launch"] = bool(
        torch.equal(autoheur.grouped_mm(a, b, offs), launch(call, cfg, torch.empty_like(buf)))
    )
    cached_bound = default_tuner().fast[api._signature(a, b, offs, None)][1]
    res["cached_call_through_compiled_kernel"] = cached_bound is not None and cached_bound._fast is not None
    res["graph_launch_us"] = _graph_us(direct_into)
    res["graph_cached_call_us"] = _graph_us(lambda: autoheur.grouped_mm(a, b, offs))
    res["kernel_ms"] = bench_ms(lambda: launch(call, cfg, buf))
    print(json.dumps(res), flush=True)
    (out / "overhead.json").write_text(json.dumps(res, indent=1))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phases", default="overhead,tune")
    ap.add_argument("--data", help="dataset with the exhaustive winners (default: data/<this GPU's slug>)")
    ap.add_argument("--limit", type=int, default=None, help="first N public problems only")
    ap.add_argument("--start", type=int, default=0, help="skip the first N public problems (to split a run)")
    ap.add_argument("--exhaustive-live", type=int, default=0, help="also tune the first N problems exhaustively")
    ap.add_argument("--prepared", action="store_true", help="also time each first call after prepare(wait=True)")
    ap.add_argument("--overhead-problem", default="qwen3-30b-a3b/gate_up/decode")
    ap.add_argument("--oracles", type=Path, help="the exhaustive winners from a --write-oracles file, not --data")
    ap.add_argument("--write-oracles", type=Path, metavar="FILE",
                    help="no GPU: save --data's public problems' exhaustive winners to FILE, and stop")  # fmt: skip
    args = ap.parse_args(argv)
    if args.write_oracles:
        if not args.data:
            ap.error("--write-oracles needs --data")
        from autoheur.collect.store import DatasetStore

        device = DatasetStore.load(args.data).meta.device_name
        saved = {"data": args.data, "device": device, "oracles": public_oracles(Path(args.data))}
        args.write_oracles.write_text(json.dumps(saved, indent=1) + "\n")
        print(f"wrote {len(saved['oracles'])} public problems' oracles of {args.data} to {args.write_oracles}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    env = run_env()
    (args.out / "env.json").write_text(json.dumps(env, indent=1))
    for phase in args.phases.split(","):
        {"tune": phase_tune, "overhead": phase_overhead}[phase](args, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
