"""`autoheur collect`: time every feasible config of every problem and log each outcome.

For a problem list (a workload or a --shapes file) and one dataset directory:
  1. fingerprint the device (properties, measured copy bandwidth and matmul rate, clocks, driver, versions) and open
     the dataset: a rerun resumes it, skipping finished problems; other devices, versions or spaces are refused;
  2. precompile, once per compile signature (layout, dtype, majors, residues mod 16), every feasible config on all
     CPU cores: each is compiled and checked on a tiny twin of the problem (`precompile.py`); the outcome is kept
     next to Triton's cache so a rerun on the same machine skips it;
  3. per problem, on each GPU: draw the inputs, compute the fp32 reference, load the binaries once per compile key
     (`warm_binaries`), then screen every config that compiled (`timing.py`: L2 flushed, CUDA events, median and
     spread, hopeless configs censored); each config's output is checked against the reference right after its
     first timed run (`verify.py`), and a wrong config is recorded as "wrong" and timed no further;
  4. write the problem's rows as one atomic part (`store.py`). A killed run loses at most the problem in flight.

`--gpus all` runs one process per GPU over disjoint shares; `--shard i/N` takes every N-th problem from i, for
spreading one collection over machines (merge the datasets with `autoheur data merge`).
The passes that time a collected dataset's configs again (`autoheur data retime | refine | polish`) are in
`passes.py`; they share this module's measurement, precompile and worker code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from autoheur.collect.precompile import TOLERANCE, CompileResult, check_many
from autoheur.collect.schema import (
    Metadata,
    device_fingerprint,
    kernel_source_hash,
    problem_id,
    rows_for,
)
from autoheur.collect.store import DatasetStore, _has_content, one_writer
from autoheur.collect.timing import Timer, Timing, WallTimer
from autoheur.device import H100_SXM, INTERPRETER_NAME, DeviceSpec
from autoheur.kernels.config import SPACE_HASH, KernelConfig, feasible_configs
from autoheur.kernels.validate import interpreting
from autoheur.problem import Problem

FAMILIES = ("triton", "inductor")


@dataclass(frozen=True)
class CollectOptions:
    reps: int = 5  # timed runs per config that survives round 1
    abort_factor: float = 2.0  # round-1 time above this x the best: censored (relevance is 0 beyond 1.5x anyway)
    confirm_aborts: bool = True  # an aborted config runs once more before it is censored (timing.py: confirm)
    confirm_slack_ms: float = 1.0  # ... if its run was at most this much above the abort line
    workers: int | None = None  # precompile processes (default: all cores)
    time_limit_s: float | None = None  # start no new problem after this many seconds
    config_sample: int | None = None  # time a fixed random subset of each problem's feasible configs (quick runs)
    config_ids: tuple[str, ...] | None = None  # or exactly these configs (those feasible for the problem)
    seed: int = 0  # inputs and the config sample
    family: str = "triton"  # "triton": autoheur's kernel over its space; "inductor": Inductor's template (its grid)

    def __post_init__(self) -> None:
        """Every option checked here, before a collection or pass opens a dataset (else a bad one was found after
        the precompile, with a dataset directory begun)."""
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r}: expected one of {FAMILIES}")
        bad = []
        if not _is_int(self.reps) or self.reps < 1:
            bad.append(f"reps={self.reps!r} (at least 1)")
        factor = self.abort_factor  # inf: censor nothing (the passes)
        if not isinstance(factor, int | float) or math.isnan(factor) or factor < 1:
            bad.append(f"abort_factor={factor!r} (a number >= 1)")
        if self.workers is not None and (not _is_int(self.workers) or self.workers < 0):
            bad.append(f"workers={self.workers!r} (at least 1; 0 or none: all cores)")
        if self.time_limit_s is not None and not (self.time_limit_s >= 0 and math.isfinite(self.time_limit_s)):
            bad.append(f"time_limit={self.time_limit_s!r} (seconds > 0; 0 or none: no limit)")
        if self.config_sample is not None and (not _is_int(self.config_sample) or self.config_sample < 1):
            bad.append(f"sample_configs={self.config_sample!r} (at least 1)")
        if not _is_int(self.seed) or not -(2**63) <= self.seed < 2**64:  # what torch's manual_seed takes
            bad.append(f"seed={self.seed!r} (an integer of 64 bits)")
        if self.family == "inductor" and (self.config_ids is not None or self.config_sample is not None):
            bad.append("configs / sample_configs: the inductor family times Inductor's whole grid (no subsets)")
        if self.config_ids is not None:
            if not self.config_ids:
                bad.append("configs: none given")
            elif self.family == "triton":
                unknown = [c for c in self.config_ids if not _known_config(c)]
                if unknown:
                    bad.append(f"configs: {unknown[:3]} {'are' if len(unknown) > 1 else 'is'} not in the space")
        if bad:
            raise ValueError("bad collection options: " + "; ".join(bad))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _known_config(config_id: str) -> bool:
    try:
        KernelConfig.from_id(config_id)
    except ValueError:
        return False
    return True


# -- the device fingerprint -------------------------------------------------------------------------------------------


def device_spec(index: int = 0) -> DeviceSpec:
    """The GPU's spec; under the interpreter, H100 feasibility rules under a name that says it is not an H100."""
    if interpreting() or not torch.cuda.is_available():
        return replace(H100_SXM, name=INTERPRETER_NAME)
    return DeviceSpec.from_torch(index)


def measure_device(index: int = 0) -> dict:
    """Measured copy bandwidth (GB/s) and dense matmul rate (TFLOP/s, bf16 8192^3) of a GPU; tiny on the CPU."""
    from autoheur.collect.timing import bench_ms

    if interpreting() or not torch.cuda.is_available():
        x = torch.randn(1 << 22)
        t0 = time.perf_counter()
        y = x.clone()
        copy = 2 * x.numel() * 4 / max(time.perf_counter() - t0, 1e-9) / 1e9
        a = torch.randn(512, 512)
        t0 = time.perf_counter()
        a @ a
        mm = 2 * 512**3 / max(time.perf_counter() - t0, 1e-9) / 1e12
        del y
        return {"copy_GBps": round(copy, 1), "matmul_TFLOPs": round(mm, 3)}
    with torch.cuda.device(index):
        copy = _copy_GBps(bench_ms)
        a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        ms = bench_ms(lambda: a @ b, rep_ms=300)
        return {"copy_GBps": round(copy, 1), "matmul_TFLOPs": round(2 * 8192**3 / ms / 1e9, 1)}


def _copy_GBps(bench_ms) -> float:
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda").normal_()  # 1 GiB, freed on return
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), rep_ms=200)
    return 2 * src.numel() * 2 / ms / 1e6


def query_clocks(index: int = 0) -> tuple[dict | None, str | None]:
    """(max and current SM / memory clocks in MHz, driver version) from nvidia-smi; (None, None) without it."""
    fields = "clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,driver_version"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--id={index}", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None, None
    vals = [v.strip() for v in out.split(",")]
    if len(vals) != 5:
        return None, None

    def num(v: str):
        try:
            return int(float(v))
        except ValueError:
            return None

    return {"max_sm_mhz": num(vals[0]), "max_mem_mhz": num(vals[1]), "sm_mhz": num(vals[2]), "mem_mhz": num(vals[3])}, (
        vals[4]
    )


def fingerprint(index: int = 0) -> dict:
    clocks, driver = query_clocks(index) if not interpreting() else (None, None)
    return device_fingerprint(device_spec(index), clocks=clocks, driver=driver, **measure_device(index))


def dataset_metadata(index: int = 0, family: str = "triton") -> Metadata:
    from autoheur.collect.timing import TIMING_VERSION

    device = fingerprint(index)
    if family == "inductor":
        from autoheur.inductor import collect as ind
        from autoheur.inductor.choices import grid_hash, template_source_hash

        return Metadata(device, grid_hash(), template_source_hash(), timing_version=ind.TIMING_VERSION, family=family)
    return Metadata(device, space_hash=SPACE_HASH, kernel_hash=kernel_source_hash(), timing_version=TIMING_VERSION)


# -- precompilation ---------------------------------------------------------------------------------------------------


def compile_key(problem: Problem, spec: DeviceSpec) -> str:
    """Problems with one key run the same binaries: the shrunk twin keeps everything Triton specializes on."""
    from autoheur.collect.schema import toolchain_versions

    tiny = problem.shrunk()
    call = _validated(tiny)
    # The ints the kernel is specialized on, by residue: not G (unspecialized); the strides, which carry the ragged
    # total only where it is a leading stride (e.g. ragged N's output, a row-major ragged-K operand), so problems that
    # differ in it share a key exactly when they share binaries.
    strides = [s % 16 for s in (*call.a_strides, *call.b_strides, *call.c_strides)]
    # The operands' contiguity as the kernel sees it (constexprs), not as the problem declares it: an operand with a
    # size-1 dim is contiguous along it either way (a 2D x 2D problem whose reduction is one token runs A_K_CONTIG).
    # G itself only where it passes the one-loop schedule's limit (problem.shrunk keeps that).
    spec_key = [tiny.layout, tiny.dtype, tiny.a_major, tiny.b_major, call.a_k_contig, call.b_n_contig, tiny.m,
                tiny.n, tiny.k, strides]  # fmt: skip
    if tiny.groups > 4:
        spec_key.append(tiny.groups)
    text = json.dumps([spec_key, spec.name, kernel_source_hash(), SPACE_HASH, toolchain_versions()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ledger_dir() -> Path:
    """Beside Triton's cache: precompile outcomes are only worth keeping while its binaries are."""
    cache = os.environ.get("TRITON_CACHE_DIR") or str(Path.home() / ".triton" / "cache")
    return Path(cache) / "autoheur-precompile"


def _validated(problem: Problem):
    """The validated call of a (tiny) problem's inputs, on the GPU unless the interpreter runs kernels."""
    from autoheur.kernels.validate import validate

    where = "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"
    return validate(*problem.make_inputs(where), check_offsets=False)


def configs_label(opts: CollectOptions) -> str:
    """What `feasible_for` keeps of each problem's space, for the dataset's metadata (`Metadata.configs`): "all", or
    the subset a trial takes, so that a trial and a full-space collection never share a dataset."""
    if opts.config_ids is not None:
        return "list:" + hashlib.sha256(",".join(sorted(set(opts.config_ids))).encode()).hexdigest()[:12]
    if opts.config_sample is not None:
        return f"sample:{opts.config_sample}:seed{opts.seed}"
    return "all"


def feasible_for(problem: Problem, spec: DeviceSpec, opts: CollectOptions) -> list[KernelConfig]:
    """The configs a problem's rows cover: its feasible space, or the requested subset of it."""
    feas = feasible_configs(_validated(problem.shrunk()).signature, spec)
    if opts.config_ids is not None:
        wanted = set(opts.config_ids)
        return [c for c in feas if c.config_id in wanted]
    if opts.config_sample is not None and opts.config_sample < len(feas):
        gen = torch.Generator().manual_seed(opts.seed)
        pick = sorted(torch.randperm(len(feas), generator=gen)[: opts.config_sample].tolist())
        return [feas[i] for i in pick]
    return feas


def precompile_all(
    problems: Sequence[Problem], spec: DeviceSpec, opts: CollectOptions, log: Callable[[str], None]
) -> dict[str, dict[str, CompileResult]]:
    """compile key -> config_id -> outcome, for every key among `problems` (from the ledger when it has it)."""
    out: dict[str, dict[str, CompileResult]] = {}
    for p in problems:
        key = compile_key(p, spec)
        if key in out:
            continue
        configs = feasible_for(p, spec, opts)
        path = ledger_dir() / f"{key}.json"
        done: dict[str, CompileResult] = {}
        if path.exists():
            try:
                done = {r["config_id"]: CompileResult(**r) for r in json.loads(path.read_text())}
            except (ValueError, TypeError, KeyError):
                done = {}
        todo = [c for c in configs if c.config_id not in done]
        if todo:
            t0 = time.perf_counter()
            label = f"{p.layout} {p.dtype} a:{p.a_major} b:{p.b_major}"
            log(f"precompiling {len(todo)} configs for {label} (key {key}) on {opts.workers or os.cpu_count()} cores")
            results = check_many([(p.shrunk(), c) for c in todo], workers=opts.workers)
            done.update({r.config_id: r for r in results})
            bad = sum(r.status != "ok" for r in results)
            log(f"  compiled and checked in {time.perf_counter() - t0:.1f} s; {bad} not ok")
            if not interpreting():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps([asdict(r) for r in done.values()]))
                tmp.replace(path)
        out[key] = done
    return out


# -- one problem ------------------------------------------------------------------------------------------------------

_WARMED: set[tuple[str, str]] = set()  # (compile key, device) whose binaries this process has loaded


def warm_binaries(problem: Problem, configs: Sequence[KernelConfig], device: torch.device) -> None:
    """Load the binaries of `configs` for `problem`'s compile key into this process, once per key and device, by
    launching each on the problem's tiny twin (the same binaries: `compile_key`). Round 1 of the screen is timed and
    also a config's first launch here; without this, loading a binary (host time, up to milliseconds) could outlast
    the GPU sleep the runs are enqueued behind and be timed into the run."""
    from autoheur.kernels.grouped_gemm import launch
    from autoheur.kernels.validate import validate

    if device.type != "cuda":
        return  # the interpreter has no binaries to load
    key = (compile_key(problem, device_spec(device.index or 0)), str(device))
    if key in _WARMED:
        return
    call = validate(*problem.shrunk().make_inputs(device), check_offsets=False)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=device)
    for cfg in configs:
        try:
            launch(call, cfg, out)
        except Exception:  # noqa: S110 - the problem's own round 1 records what fails, with its status
            pass
    torch.cuda.synchronize(device)
    _WARMED.add(key)


@dataclass(frozen=True)
class ProblemStats:
    problem_id: str
    name: str
    configs: int
    timed: int
    censored: int
    failed: int
    best_ms: float
    median_ms: float
    worst_ms: float
    best_config: str
    check_s: float
    timing_s: float
    wall_s: float

    @property
    def timings_per_s(self) -> float:
        return self.timed / self.timing_s if self.timing_s > 0 else math.nan


def measure_problem(
    problem: Problem,
    configs: Sequence[KernelConfig],
    compiled: dict[str, CompileResult],
    opts: CollectOptions,
    device: torch.device,
    timer,
    rounds: bool = False,
) -> tuple[list[tuple[KernelConfig, str, Timing | None]], ProblemStats]:
    """Check and time every config of one problem; returns (config, status, timing) per config and stats.

    The timing is `timer.screen`, which checks each config's output in round 1 (`verify.OutputCheck`), or
    `timer.rounds` (`opts.reps` interleaved rounds, no abort, after an untimed checking pass) when `rounds`."""
    from autoheur.collect.precompile import classify_error
    from autoheur.collect.verify import OutputCheck
    from autoheur.kernels.launcher import BoundLaunch
    from autoheur.kernels.reference import reference_grouped_mm
    from autoheur.kernels.validate import validate

    t_start = time.perf_counter()
    a, b, offs = problem.make_inputs(device, seed=opts.seed)
    call = validate(a, b, offs)
    ref = reference_grouped_mm(a, b, offs, torch.float32)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=device)

    status: dict[str, str] = {}
    fns: dict[str, Callable[[], object]] = {}
    for cfg in configs:
        r = compiled.get(cfg.config_id)
        if r is None or r.status != "ok":
            status[cfg.config_id] = r.status if r is not None else "crashed"
            continue
        try:
            bound = BoundLaunch(call, cfg)
        except Exception as exc:  # its launch arguments do not apply to this problem: recorded, never launched
            status[cfg.config_id] = classify_error(exc)
            continue
        fns[cfg.config_id] = lambda bound=bound: bound(a, b, offs, out)
    check = OutputCheck(out, ref, list(fns), TOLERANCE[problem.dtype], classify_error)
    fns = {cid: check.guard(cid, fn) for cid, fn in fns.items()}
    if fns:
        warm_binaries(problem, [c for c in configs if c.config_id in fns], device)
    check_s = time.perf_counter() - t_start  # inputs, reference and binding; the check itself runs in round 1

    t0 = time.perf_counter()
    if not fns:
        timings = {}
    elif rounds:
        timings = timer.rounds(fns, reps=opts.reps, seed=opts.seed, check=check)
    else:
        timings = timer.screen(
            fns,
            reps=opts.reps,
            abort_factor=opts.abort_factor,
            confirm_aborts=opts.confirm_aborts,
            confirm_slack_ms=opts.confirm_slack_ms,
            check=check,
        )
    status.update(check.verdicts())
    timing_s = time.perf_counter() - t0

    results = [(c, status[c.config_id], timings.get(c.config_id)) for c in configs]
    ok = sorted((t.median_ms, cid) for cid, t in timings.items() if not t.censored)
    all_t = sorted(t.median_ms for t in timings.values())
    stats = ProblemStats(
        problem_id=problem_id(problem),
        name=problem.name,
        configs=len(configs),
        timed=len(timings),
        censored=sum(t.censored for t in timings.values()),
        failed=sum(s != "ok" for s in status.values()),
        best_ms=ok[0][0] if ok else math.nan,
        median_ms=all_t[len(all_t) // 2] if all_t else math.nan,
        worst_ms=all_t[-1] if all_t else math.nan,
        best_config=ok[0][1] if ok else "",
        check_s=check_s,
        timing_s=timing_s,
        wall_s=time.perf_counter() - t_start,
    )
    return results, stats


def measure_inductor(problem: Problem, device: torch.device):
    """The `inductor` family: Inductor's own autotuning of the problem (autoheur/inductor/collect.py)."""
    from autoheur.inductor.collect import measure

    t0 = time.perf_counter()
    results, extra = measure(problem, device)
    timed = sorted((t.median_ms, c.config_id) for c, s, t in results if t is not None)
    stats = ProblemStats(
        problem_id=problem_id(problem),
        name=problem.name,
        configs=len(results),
        timed=len(timed),
        censored=0,
        failed=sum(s not in ("ok", "invalid") for _, s, _ in results),
        best_ms=timed[0][0] if timed else math.nan,
        median_ms=timed[len(timed) // 2][0] if timed else math.nan,
        worst_ms=timed[-1][0] if timed else math.nan,
        best_config=timed[0][1] if timed else "",
        check_s=0.0,
        timing_s=extra["autotune_s"],  # compile and benchmark together: Inductor does both
        wall_s=time.perf_counter() - t0,
    )
    return results, stats, extra


# -- the run ----------------------------------------------------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected i/N, e.g. 0/4") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard {text!r}: need 0 <= i < N")
    return i, n


def shard(problems: Sequence[Problem], index: int, count: int) -> list[Problem]:
    """Every count-th problem from index: disjoint shares that together cover the list."""
    return list(problems[index::count])


def _worker(
    rank: int,
    problems: list[Problem],
    root: str,
    meta: Metadata,
    opts: CollectOptions,
    compiled: dict[str, dict[str, CompileResult]],
    deadline: float | None,
    report: Callable[[dict], None],
) -> None:
    """Collect `problems` on GPU `rank` (the CPU under the interpreter) into the dataset at `root`."""
    gpu = torch.cuda.is_available() and not interpreting()
    if gpu:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    spec = device_spec(rank)
    store = DatasetStore.open(Path(root), meta)
    timer = Timer(device) if gpu else WallTimer()
    log_path = Path(root) / "runs" / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{socket.gethostname()}-{rank}.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for p in problems:
        if parent_gone():  # the run that spawned this worker was killed: no one to report to, and a rerun may start
            return
        if deadline is not None and time.time() > deadline:
            report({"kind": "stopped", "rank": rank})
            return
        pid = problem_id(p)
        if pid in store.done_problems():  # another worker or run got there first
            report({"kind": "skipped", "rank": rank, "problem_id": pid})
            continue
        extra = {}
        if opts.family == "inductor":
            results, stats, extra = measure_inductor(p, device)
        else:
            configs = feasible_for(p, spec, opts)
            results, stats = measure_problem(p, configs, compiled[compile_key(p, spec)], opts, device, timer)
        try:
            store.write_problem(p, rows_for(p, results))
        except FileExistsError:
            report({"kind": "skipped", "rank": rank, "problem_id": pid})
            continue
        record = {**asdict(stats), "timings_per_s": stats.timings_per_s, "rank": rank, **extra}
        with log_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        report({"kind": "done", **record})
        if gpu:
            torch.cuda.empty_cache()
    report({"kind": "finished", "rank": rank})


def pack_summary(result: dict[str, int]) -> dict[str, int]:
    """A run summary's account of `DatasetStore.pack_parts` or `pack`: "packed" (problems moved into a pack), and the
    leftovers of a killed run it removed, where there were any."""
    return {"packed": result["moved"], **{k: v for k, v in result.items() if k != "moved" and v}}


_PARENT: int | None = None  # in a spawned worker: the pid of the run that spawned it


def parent_gone() -> bool:
    """In a spawned worker: whether the run that spawned it has ended (its pid is no longer our parent's)."""
    return _PARENT is not None and os.getppid() != _PARENT


def _die_with_parent(parent: int) -> None:
    """End this worker when the run that spawned it ends. Why: a parent killed with SIGKILL left its workers running
    and writing problems, and a rerun then ran beside them. On Linux the kernel kills the worker at once
    (PR_SET_PDEATHSIG); elsewhere the workers check `parent_gone` before each problem and finish the one in flight."""
    global _PARENT
    _PARENT = parent
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no libc or no prctl: the check before each problem still stops it
            pass


def _spawned(work, parent, rank, *args) -> None:
    """`work(rank, *args[:-1], report)` in a worker spawned by process `parent`, reporting on the queue that is the
    last of `args`; the worker ends with its parent (`_die_with_parent`)."""
    _die_with_parent(parent)
    if parent_gone():  # it ended before the line above took effect
        return
    queue = args[-1]
    try:
        work(rank, *args[:-1], queue.put)
    except BaseException as exc:  # tell the parent, then die: the problem in flight is simply not written
        queue.put({"kind": "error", "rank": rank, "message": f"{type(exc).__name__}: {exc}"})
        raise


class Progress:
    """One line per finished problem: count, rate, ETA and the problem's figures (to stderr)."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.stream = stream or sys.stderr
        self.timed = 0
        self.timing_s = 0.0

    def update(self, rec: dict) -> None:
        self.done += 1
        self.timed += rec.get("timed", 0)
        self.timing_s += rec.get("timing_s", 0.0)
        el = time.time() - self.t0
        eta = el / self.done * (self.total - self.done)
        pct = 100 * self.done / max(self.total, 1)
        rate = self.timed / self.timing_s if self.timing_s > 0 else float("nan")
        bar = "#" * int(pct / 5)
        self.stream.write(
            f"[{bar:<20s}] {self.done}/{self.total} {pct:3.0f}% {_hms(el)} elapsed, ETA {_hms(eta)}, "
            f"{rate:.0f} timings/s | {rec.get('name') or rec.get('problem_id')}: best {rec.get('best_ms', 0):.4f} ms "
            f"{rec.get('best_config', '')} ({rec.get('wall_s', 0):.1f} s)\n"
        )
        self.stream.flush()


def _hms(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def collect(
    problems: Sequence[Problem],
    root: Path | str,
    opts: CollectOptions = CollectOptions(),
    *,
    new: bool = False,
    gpus: int = 1,
    shard_spec: tuple[int, int] = (0, 1),
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict:
    """Collect `problems` (this shard's share) into the dataset at `root`; returns a summary of the run. One run into
    a directory at a time (`store.one_writer`: a second is refused with a ValueError)."""
    if opts.family == "inductor":  # before the directory is made (one_writer)
        _check_inductor_here()
    with contextlib.ExitStack() as held:
        held.enter_context(one_writer(Path(root)))
        return _collect(problems, root, opts, new=new, gpus=gpus, shard_spec=shard_spec, log=log, held=held)


def _check_inductor_here() -> None:
    """ValueError where this host cannot time Inductor's grouped_mm template: no CUDA GPU (or the interpreter), or one
    Inductor offers the template on none of (below sm_90, ROCm); or where this process has autoheur's choice filter
    installed (its dropped configs were recorded `invalid`)."""
    from autoheur.inductor.collect import why_filtered, why_no_template_here

    if interpreting() or not torch.cuda.is_available():
        raise ValueError("the inductor family needs a CUDA GPU: Inductor offers its grouped_mm template only there")
    if why := why_no_template_here():
        raise ValueError(f"the inductor family cannot be collected here: {why}")
    if why := why_filtered():
        raise ValueError(f"the inductor family cannot be collected now: {why}")


def run_problems(
    problems: Sequence[Problem],
    family: str = "triton",
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> list[Problem]:
    """The problems a collection of `problems` runs, in its order, before a shard takes its share of them: each
    distinct problem once; for the inductor family, as Inductor benchmarks it, less the shapes whose benchmark ends the
    process; less those that never launch the kernel. `collect --dry-run` lists a shard's share of these, so that it
    lists what the run collects (a dataset's finished problems aside): the shares are taken after the duplicates go."""
    ids = [problem_id(p) for p in problems]
    if len(set(ids)) != len(ids):
        dup = len(ids) - len(set(ids))
        log(f"{dup} duplicate problems in the list: each is collected once")
        problems = list({pid: p for pid, p in zip(ids, problems, strict=True)}.values())
    if family == "inductor":  # what Inductor times: the shapes with an even split (it never sees the routing)
        from autoheur.inductor.collect import as_benchmarked, benchmark_crashes

        problems = list({problem_id(q): q for q in map(as_benchmarked, problems)}.values())
        crashes = [benchmark_crashes(p) for p in problems]
        if any(crashes):
            crash = [p for p, c in zip(problems, crashes, strict=True) if c]
            log(
                f"{len(crash)} problems left out (e.g. {crash[0].name or crash[0]}): Inductor's own benchmark offsets "
                "for their shapes decrease, and its ATen choice then fails a device-side assert that ends the process"
            )
            problems = [p for p, c in zip(problems, crashes, strict=True) if not c]
    idle = [p for p in problems if not p.launches]
    if idle:
        log(f"{len(idle)} problems never launch the kernel (empty output, e.g. {idle[0].name or idle[0]}): skipped")
        problems = [p for p in problems if p.launches]
    return problems


def _collect(problems, root, opts, *, new, gpus, shard_spec, log, held: contextlib.ExitStack) -> dict:
    t0 = time.time()
    deadline = t0 + opts.time_limit_s if opts.time_limit_s else None
    mine = shard(run_problems(problems, opts.family, log), *shard_spec)
    meta = replace(dataset_metadata(0, opts.family), configs=configs_label(opts))
    aside = new and _has_content(Path(root))  # (under the lock, which goes aside with the old dataset's directory)
    store = DatasetStore.open(Path(root), meta, new=new)
    if aside:  # the new directory's lock too, or a second run would be let into it
        held.enter_context(one_writer(Path(root)))
    done = store.done_problems()
    todo = [p for p in mine if problem_id(p) not in done]
    spec = device_spec(0)
    # A config list (--configs) may hold no config feasible for a problem: it has no rows, and a part of none is
    # refused by the store, which ended the run at that problem (every rerun too). Left out, and counted.
    runnable = [opts.config_ids is None or bool(feasible_for(p, spec, opts)) for p in todo]
    unrunnable = [p for p, ok in zip(todo, runnable, strict=True) if not ok]
    if unrunnable:
        log(
            f"{len(unrunnable)} problems left out: none of the listed configs is feasible for them (e.g. "
            f"{unrunnable[0].name or unrunnable[0]})"
        )
        todo = [p for p, ok in zip(todo, runnable, strict=True) if ok]
    log(
        f"dataset {root}: device {meta.device_name}, {len(done)} problems already there; "
        f"this run: {len(todo)} of {len(mine)} problems in shard {shard_spec[0]}/{shard_spec[1]}"
    )
    summary = {"root": str(root), "todo": len(todo), "already_done": len(mine) - len(todo) - len(unrunnable), "done": 0,
               "errors": []}  # fmt: skip
    if unrunnable:
        summary["no_feasible_config"] = len(unrunnable)
    if not todo:
        summary.update(pack_summary(store.pack_parts()))  # what a run killed before its end left in parts of their own
        return summary
    t_c = time.time()
    compiled = precompile_all(todo, spec, opts, log) if opts.family == "triton" else {}
    summary["precompile_s"] = time.time() - t_c

    progress = Progress(len(todo))
    records = []
    gpu_count = max(1, gpus)

    def report(rec):
        if rec["kind"] == "done":
            records.append(rec)
            progress.update(rec)
        elif rec["kind"] == "skipped":  # another run into this directory wrote it first: counted, not lost
            summary["done_by_another_run"] = summary.get("done_by_another_run", 0) + 1
        elif rec["kind"] == "error":
            summary["errors"].append(rec)
            log(f"GPU worker {rec['rank']} failed: {rec['message']}")

    if gpu_count == 1:
        _worker(0, todo, str(root), meta, opts, compiled, deadline, report)
    else:
        shares = [(r, shard(todo, r, gpu_count), str(root), meta, opts, compiled, deadline) for r in range(gpu_count)]
        _spawn_workers(_worker, shares, report)
    # every worker has ended (one writer again): this run's parts into one pack (store.pack_parts; reads unchanged)
    summary.update(pack_summary(store.pack_parts()))
    summary["done"] = len(records)
    summary["wall_s"] = time.time() - t0
    if records:
        timed = sum(r["timed"] for r in records)
        timing_s = sum(r["timing_s"] for r in records)
        summary["timings"] = timed
        summary["timings_per_s_per_gpu"] = timed / timing_s if timing_s else math.nan
        summary["seconds_per_problem"] = sum(r["wall_s"] for r in records) / len(records)
    return summary


# -- retiming ---------------------------------------------------------------------------------------------------------


def _spawn_workers(work, per_worker: list[tuple], report: Callable[[dict], None]) -> None:
    """Run `work(*args, report)` for each args of `per_worker` (the rank first) in a spawned process of its own,
    passing what they report to `report` until each has finished, stopped or failed (or all died without a word)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_spawned, args=(work, os.getpid(), *args, queue)) for args in per_worker]
    for pr in procs:
        pr.start()
    live = len(procs)
    while live:
        try:
            rec = queue.get(timeout=5)
        except Exception:  # queue.Empty: check for workers that died without a word
            if not any(pr.is_alive() for pr in procs):
                break
            continue
        report(rec)
        if rec["kind"] in ("finished", "stopped", "error"):
            live -= 1
    for pr in procs:
        pr.join()
