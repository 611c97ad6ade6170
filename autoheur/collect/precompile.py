"""Parallel precompilation of many configs for one problem signature, with a correctness check of each.

Each worker process launches every config of its share on a tiny problem that specializes exactly like the real one
(`Problem.shrunk`: every int keeps its residue mod 16, so Triton picks the same binary), checks the poisoned output
against the fp32 reference, and leaves the binary in Triton's on-disk cache, where the timing process finds it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import util as mp_util

from autoheur.kernels.config import KernelConfig
from autoheur.problem import Problem

# Relative-error bounds against the fp32 reference, per input dtype (bf16/fp16 outputs round at 2^-8 / 2^-11).
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-3}


@dataclass(frozen=True, slots=True)
class CompileResult:
    config_id: str
    status: str  # "ok", "invalid", "compile_error", "out_of_resources", "wrong", "crashed"
    seconds: float
    rel_err: float
    message: str = ""


def classify_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfResources" in text or "out of resource" in text.lower():
        return "out_of_resources"
    return "compile_error"


def check_config(problem: Problem, cfg: KernelConfig, seed: int = 0, device=None) -> CompileResult:
    """Compile (first launch) and run `cfg` on `problem`, output poisoned with NaN; compare with the reference.
    `device`: the GPU to run on (default: the current one); the interpreter runs on the CPU."""
    import torch

    where = _check_device(device)
    if where.type == "cpu":
        return _check(problem, cfg, seed, where)
    with torch.cuda.device(where):  # a launch goes to the thread's current device: make it the inputs' one
        return _check(problem, cfg, seed, where)


def _check_device(device=None):
    """Where checks run: the CPU under the interpreter, else the GPU `device` names (default: the calling thread's
    current one), with its index."""
    import torch

    from autoheur.kernels.validate import interpreting

    if interpreting():
        return torch.device("cpu")
    gpu = torch.device("cuda" if device is None else device)
    return gpu if gpu.index is not None else torch.device("cuda", torch.cuda.current_device())


def _check(problem: Problem, cfg: KernelConfig, seed: int, device) -> CompileResult:
    import torch

    from autoheur.kernels.grouped_gemm import launch
    from autoheur.kernels.reference import reference_grouped_mm, relative_error
    from autoheur.kernels.validate import check_config as check_feasible
    from autoheur.kernels.validate import validate

    a, b, offs = problem.make_inputs(device, seed=seed)
    t0 = time.perf_counter()
    try:
        call = validate(a, b, offs)
        check_feasible(cfg, call)
    except (ValueError, TypeError) as exc:  # refused before launch: the config or layout does not apply
        return CompileResult(cfg.config_id, "invalid", 0.0, float("nan"), str(exc)[:500])
    try:
        out = torch.full(call.out_shape, float("nan"), dtype=call.out_dtype, device=device)
        launch(call, cfg, out)
        if out.is_cuda:
            torch.cuda.synchronize(out.device)
    except Exception as exc:  # recorded, never raised: one bad config must not stop a sweep
        return CompileResult(cfg.config_id, classify_error(exc), time.perf_counter() - t0, float("nan"), str(exc)[:500])
    seconds = time.perf_counter() - t0
    ref = reference_grouped_mm(a, b, offs, call.out_dtype)
    err = relative_error(out, ref)
    status = "ok" if err <= TOLERANCE[problem.dtype] else "wrong"
    return CompileResult(cfg.config_id, status, seconds, err)


def _worker_init(cache_dir: str | None) -> None:
    if cache_dir:
        os.environ["TRITON_CACHE_DIR"] = cache_dir


def _run_chunk(jobs: list[tuple[Problem, str]], device=None) -> list[tuple[int, CompileResult]]:
    return [(i, check_config(p, KernelConfig.from_id(c), device=device)) for i, (p, c) in jobs]


def split_jobs(jobs: list, workers: int, chunk: int = 4) -> list[list]:
    """Jobs in chunks of up to `chunk` (fewer round trips on a big sweep), but never so large that a worker idles:
    a run-time top-10 on 10 workers is 10 chunks of one, not 3 of four."""
    size = max(1, min(chunk, len(jobs) // workers))
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


class WorkerPool:
    """Spawned compile workers kept between calls of `check_many`.

    A run-time tuner compiles one small batch per new tuning key; a fresh pool per batch pays, per worker, a spawn
    and the imports of torch and triton (seconds) before the first compile. This pool keeps its workers for
    `idle_s` seconds after its last batch, then shuts them down, so idle workers do not hold memory and CUDA contexts
    indefinitely. `warm()` starts the workers ahead of the first batch. Safe to share between threads.

    The workers are shut down when the process exits. That needs a multiprocessing finalizer, not only the executor's
    own exit hook: in a process that is itself a multiprocessing child (a spawned rank, a DataLoader or pool worker),
    multiprocessing joins its children before that hook runs, and idle workers never end on their own, so the process
    would hang at exit.
    """

    def __init__(self, workers: int, idle_s: float = 120.0):
        import threading

        self.workers = workers
        self.idle_s = idle_s
        self._executor: ProcessPoolExecutor | None = None
        self._timer = None
        self._lock = threading.Lock()
        self._busy = 0
        self._finalizer = None

    def close(self) -> None:
        """Shut the workers down now and wait for them to exit (a later `acquire()` starts new ones)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            fin = self._drop()
        if fin is not None:
            fin()

    def _drop(self):
        """Forget the executor (under the lock); the returned finalizer shuts it down when called."""
        fin, self._executor, self._finalizer = self._finalizer, None, None
        return fin

    def acquire(self) -> ProcessPoolExecutor:
        """The executor, started if need be; pair with `release()`."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._executor is None:
                init_args = (os.environ.get("TRITON_CACHE_DIR"),)
                ex = ProcessPoolExecutor(
                    self.workers, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=init_args
                )
                # At exit, multiprocessing's exit function runs finalizers of priority >= 0 before it joins this
                # process's children, the highest first: 100 runs before the executor's own queues stop their
                # feeder threads (priority 10), which would leave the workers' stop sentinels undelivered.
                stop = {"wait": True, "cancel_futures": True}
                self._finalizer = mp_util.Finalize(ex, ex.shutdown, kwargs=stop, exitpriority=100)
                self._executor = ex
            self._busy += 1
            return self._executor

    def release(self) -> None:
        import threading

        with self._lock:
            self._busy -= 1
            if self._busy == 0 and self._executor is not None:
                self._timer = threading.Timer(self.idle_s, self._shut_if_idle)
                self._timer.daemon = True
                self._timer.start()

    def warm(self, n: int | None = None) -> list:
        """Start `n` workers now (default: all; each imports torch, triton and the kernel, and initializes CUDA where
        there is one); the futures of that work, to wait on or not."""
        ex = self.acquire()
        try:
            return [ex.submit(_warm_worker) for _ in range(min(n or self.workers, self.workers))]
        finally:
            self.release()

    def discard(self) -> None:
        """Drop the executor (after a worker died and broke it); the next `acquire()` starts a new one."""
        with self._lock:
            fin = self._drop()
        if fin is not None:
            fin()

    @property
    def started(self) -> bool:
        return self._executor is not None

    def _shut_if_idle(self) -> None:
        fin = None
        with self._lock:
            if self._busy == 0:
                fin = self._drop()
            self._timer = None
        if fin is not None:
            fin()


def _warm_worker() -> int:
    import torch

    import autoheur.kernels.grouped_gemm  # noqa: F401  (triton and the kernel's module)

    if torch.cuda.is_available():
        torch.cuda.init()
    return os.getpid()


def stop_now(executor: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers at once. A `with` block's exit would instead wait for every queued
    job (minutes of compiling, after a Ctrl-C during a precompile), and a second Ctrl-C would then leave the workers
    running on."""
    workers = list((getattr(executor, "_processes", None) or {}).values())  # private: read defensively
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        if proc.is_alive():
            proc.terminate()
    for proc in workers:
        proc.join(timeout=5)


def check_many(
    jobs: list[tuple[Problem, KernelConfig]],
    workers: int | None = None,
    chunk: int = 4,
    progress=None,
    pool: WorkerPool | None = None,
    device=None,
) -> list[CompileResult]:
    """Compile, run and check every (problem, config) job on `workers` spawned processes (default: all cores), or on
    the processes of a kept `pool`; on GPU `device` (default: each process's current one)."""
    workers = pool.workers if pool is not None else (workers or os.cpu_count() or 1)
    if workers == 1 and pool is None:  # in this process: no pool to spawn (the CPU interpreter, tests, debugging)
        out = []
        for i, (p, c) in enumerate(jobs):
            out.append(check_config(p, c, device=device))
            if progress:
                progress(i + 1, len(jobs))
        return out
    chunks = split_jobs([(i, (p, c.config_id)) for i, (p, c) in enumerate(jobs)], workers, chunk)
    results: dict[int, CompileResult] = {}

    def run_on(executor: ProcessPoolExecutor, pending: list) -> None:
        for fut in as_completed([executor.submit(_run_chunk, c, device) for c in pending]):
            results.update(fut.result())
            if progress:
                progress(len(results), len(jobs))

    for attempt in range(2):  # a worker that dies (a CUDA fault) breaks the pool: retry the rest once
        pending = [c for c in chunks if c[0][0] not in results]
        if not pending:
            break
        try:
            if pool is not None:
                executor = pool.acquire()
                try:
                    run_on(executor, pending)
                finally:
                    pool.release()
            else:
                init_args = (os.environ.get("TRITON_CACHE_DIR"),)
                ctx = mp.get_context("spawn")
                ex = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init, initargs=init_args)
                try:
                    run_on(ex, pending)
                except BaseException:  # Ctrl-C (or an error): stop now, not after every queued job
                    stop_now(ex)
                    raise
                ex.shutdown(wait=True)
        except BrokenProcessPool:
            if pool is not None:
                pool.discard()
            if attempt == 1:
                break
    return [
        results.get(i, CompileResult(c.config_id, "crashed", 0.0, float("nan"), "worker process died"))
        for i, (_, c) in enumerate(jobs)
    ]


def check_in_threads(jobs: list[tuple[Problem, KernelConfig]], threads: int, device=None) -> list[CompileResult]:
    """`check_config` of every job on `threads` threads of this process, results in job order.

    For a run-time batch of a few configs in a process that already has torch, triton and a CUDA context: nothing to
    spawn or import. Triton's compiler spends much of a compile outside the GIL (ptxas runs as a subprocess), so the
    threads overlap; on an H100, 10 configs took 2.5 s on 10 threads against 5.7 s one after another, and 7.3 s on a
    fresh pool of 10 processes, whose start-up (importing torch) is most of it (benchmarks/compile_startup.py). The
    price is isolation: a compiler crash or a GPU fault in a check takes this process down with it, which a worker
    process would have absorbed. `device`: the GPU (default: the calling thread's current one, not each new
    thread's, which is GPU 0)."""
    if device is None:
        device = _check_device()  # resolved here, in the calling thread
    if threads <= 1 or len(jobs) <= 1:
        return [check_config(p, c, device=device) for p, c in jobs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(jobs)), thread_name_prefix="autoheur-compile") as ex:
        return list(ex.map(lambda job: check_config(*job, device=device), jobs))


def precompile(
    problem: Problem,
    configs: list[KernelConfig],
    workers: int | None = None,
    progress=None,
    pool: WorkerPool | None = None,
    threads: bool = False,
    device=None,
):
    """Compile and check `configs` for `problem`'s signature, on a tiny problem that shares its binaries: on worker
    processes (a kept `pool`'s, else a fresh pool of `workers`), or with `threads` on `workers` threads of this
    process (a run-time batch, see `check_in_threads`); on GPU `device` (default: the current one)."""
    tiny = problem.shrunk()
    jobs = [(tiny, c) for c in configs]
    if threads:
        return check_in_threads(jobs, workers or os.cpu_count() or 1, device=device)
    return check_many(jobs, workers=workers, progress=progress, pool=pool, device=device)
