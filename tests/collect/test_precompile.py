"""Precompilation's worker pool: each job runs the real kernel in a spawned process (on the GPU when there is one,
else in the interpreter)."""

from __future__ import annotations

import time

import pytest
import torch

from autoheur.collect.precompile import WorkerPool, check_many
from autoheur.device import H100_SXM
from autoheur.kernels.config import feasible_configs
from autoheur.kernels.validate import validate
from autoheur.problem import Problem

TINY = Problem(layout="2d3d", groups=2, sizes=(8, 3), m=0, n=16, k=16, dtype="float32")


def _configs(n: int):
    sig = validate(*TINY.make_inputs("cuda" if torch.cuda.is_available() else "cpu")).signature
    small = sorted(feasible_configs(sig, H100_SXM), key=lambda c: (c.block_m * c.block_n * c.block_k, c.config_id))
    return [c for c in small if c.load == "ptr"][:n]  # the interpreter is slow: the smallest tiles


def test_a_kept_pool_reuses_its_workers_then_shuts_down_when_idle():
    """A run-time tuner compiles batch after batch: the second batch finds the first one's processes (no new spawn,
    no new imports); once idle for `idle_s` the workers are shut down."""
    cfgs = _configs(2)
    pool = WorkerPool(2, idle_s=3.0)
    first = check_many([(TINY, c) for c in cfgs], pool=pool)
    assert [r.status for r in first] == ["ok", "ok"]
    executor, pids = pool._executor, set(pool._executor._processes)
    second = check_many([(TINY, c) for c in reversed(cfgs)], pool=pool)
    assert [r.config_id for r in second] == [c.config_id for c in reversed(cfgs)]
    assert pool._executor is executor and set(executor._processes) == pids
    deadline = time.monotonic() + 30
    while pool.started and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pool.started


def test_a_broken_pool_is_replaced():
    """A worker that dies breaks the executor; the pool drops it and the next batch gets a fresh one."""
    import os

    pool = WorkerPool(1, idle_s=60.0)
    ex = pool.acquire()
    try:
        fut = ex.submit(os._exit, 1)
        try:
            fut.result(timeout=60)
        except Exception:
            pass
    finally:
        pool.release()
    results = check_many([(TINY, c) for c in _configs(1)], pool=pool)
    assert [r.status for r in results] == ["ok"]
    assert pool._executor is not ex
    pool.discard()


def test_warm_starts_the_workers_that_then_compile():
    pool = WorkerPool(2, idle_s=60.0)
    warmed = {f.result(timeout=120) for f in pool.warm()}
    assert warmed <= set(pool._executor._processes) and len(pool._executor._processes) == 2
    executor = pool._executor
    assert [r.status for r in check_many([(TINY, c) for c in _configs(2)], pool=pool)] == ["ok", "ok"]
    assert pool._executor is executor and warmed <= set(executor._processes)  # compiled by the warmed workers
    pool.discard()


def _use_a_kept_pool_then_return(results) -> None:
    pool = WorkerPool(1, idle_s=600.0)
    results.put([r.status for r in check_many([(TINY, c) for c in _configs(1)], pool=pool)])


def test_a_child_process_with_a_kept_pool_still_exits():
    """In a process that is itself a multiprocessing child (a spawned rank, a pool worker), multiprocessing joins the
    process's children at exit before the executor's own exit hook runs: idle kept workers must be shut down first,
    or the process hangs at exit (as a benchmark's spawned worker did on the H100)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=_use_a_kept_pool_then_return, args=(results,))  # joined by this thread alone
    child.start()
    try:
        assert results.get(timeout=300) == ["ok"]
        child.join(timeout=60)  # a deadlock check, not a speed target: a healthy exit takes about a second
        assert child.exitcode == 0, f"a process holding a kept WorkerPool did not exit (exit code {child.exitcode})"
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_threads_check_every_job_in_order_and_overlap(monkeypatch):
    """The run-time batch on threads: one result per job, in job order, several jobs in flight at once."""
    import threading

    from autoheur.collect import precompile as pre

    in_flight, peak, names, lock = [0], [0], set(), threading.Lock()

    devices = set()

    def fake_check(problem, cfg, seed=0, device=None):
        devices.add(device)
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            names.add(threading.current_thread().name)
        time.sleep(0.2)  # long enough that a pool of 3 threads has all three jobs running together
        with lock:
            in_flight[0] -= 1
        return pre.CompileResult(cfg.config_id, "ok", 0.2, 0.0)

    monkeypatch.setattr(pre, "check_config", fake_check)
    cfgs = _configs(3)
    results = pre.precompile(TINY, cfgs, workers=3, threads=True, device="cuda:1")
    assert [r.config_id for r in results] == [c.config_id for c in cfgs]
    assert peak[0] == 3 and all(n.startswith("autoheur-compile") for n in names)
    assert devices == {"cuda:1"}  # every thread checks on the caller's GPU, not on GPU 0, each new thread's default
    peak[0] = 0
    one = pre.precompile(TINY, cfgs, workers=1, threads=True)  # one thread: this thread, one job at a time
    assert [r.config_id for r in one] == [c.config_id for c in cfgs] and peak[0] == 1


@pytest.mark.gpu
def test_threads_compile_and_check_real_configs_on_the_gpu():
    """Concurrent compiles of one Triton kernel in one process (each thread its own constexprs) all pass the check."""
    from autoheur.collect.precompile import precompile

    big = Problem(layout="2d3d", groups=4, sizes=(40, 0, 77, 11), m=0, n=256, k=128, dtype="bfloat16")
    sig = validate(*big.make_inputs("cuda")).signature
    cfgs = [c for c in feasible_configs(sig, H100_SXM) if c.block_k == 64][::40][:8]
    results = precompile(big, cfgs, workers=8, threads=True)
    assert [r.status for r in results] == ["ok"] * len(cfgs), [(r.config_id, r.message) for r in results]


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("threads", [True, False])
def test_checks_run_on_the_callers_gpu_not_gpu_0(threads):
    """A tuning for tensors on GPU 1 checks its configs there. On threads (whose own current device is GPU 0) a launch
    on the wrong device faults on GPU 1's pointers, so this fails without the fix; on worker processes it checks that
    passing the device through works."""
    from autoheur.collect.precompile import precompile

    cfgs = _configs(2)
    with torch.cuda.device(0):  # the caller's current device is not the target: the device argument decides
        results = precompile(TINY, cfgs, workers=2, threads=threads, device=torch.device("cuda", 1))
    assert [r.status for r in results] == ["ok", "ok"], [r.message for r in results]


def test_an_interrupt_stops_the_workers_at_once(monkeypatch):
    """Ctrl-C during a precompile: the queued jobs are cancelled and the workers ended, not waited for (a `with`
    block's exit waited for every queued job: minutes, and a second Ctrl-C left the workers running)."""
    from autoheur.collect import precompile as pc
    from autoheur.kernels.config import KernelConfig
    from autoheur.problem import Problem

    seen = {}

    class Worker:
        def __init__(self):
            self.alive, self.joined = True, False

        def is_alive(self):
            return self.alive

        def terminate(self):
            self.alive = False

        def join(self, timeout=None):
            self.joined = True

    class Executor:
        def __init__(self, *args, **kwargs):
            self._processes = {1: Worker(), 2: Worker()}
            seen["executor"] = self

        def submit(self, fn, *args):
            return object()

        def shutdown(self, wait=True, cancel_futures=False):
            seen["shutdown"] = (wait, cancel_futures)

    def interrupted(futures):
        raise KeyboardInterrupt

    monkeypatch.setattr(pc, "ProcessPoolExecutor", Executor)
    monkeypatch.setattr(pc, "as_completed", interrupted)
    problem = Problem("2d3d", 2, (16, 16), 0, 32, 32, "float32")
    jobs = [(problem, KernelConfig(64, 64, 32, 2, 4))] * 8
    with pytest.raises(KeyboardInterrupt):
        pc.check_many(jobs, workers=2)
    assert seen["shutdown"] == (False, True)
    assert all(not w.alive and w.joined for w in seen["executor"]._processes.values())
