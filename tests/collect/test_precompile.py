"""Precompilation's worker pool: each job runs the real kernel in a spawned process (on the GPU when there is one,
else in the interpreter)."""

from __future__ import annotations

import time

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
