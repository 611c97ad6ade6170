"""The passes that measure a collected dataset's configs again (`autoheur data retime | refine | polish`): per
problem, the configs a pass selects from its rows are checked and timed again on the same inputs, and written as the
problem's file of that pass (`store.py`), which reads overlay on the first measurement. Resumable like `collect`,
one worker a GPU (`--gpus`)."""

from __future__ import annotations

import json
import math
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import torch

from autoheur.collect import runner
from autoheur.collect.precompile import CompileResult
from autoheur.collect.runner import CollectOptions
from autoheur.collect.schema import Metadata, problem_from_row, problem_id, rows_for
from autoheur.collect.store import PAST, DatasetStore, check_retime_metadata, one_writer
from autoheur.collect.timing import RETIME_SPREAD, Timer, WallTimer
from autoheur.device import INTERPRETER_NAME
from autoheur.kernels.validate import interpreting
from autoheur.problem import Problem

REFINE_WITHIN = 1.15  # refine: ok configs within this factor of the problem's best ...
REFINE_TOP = 48  # ... at most this many of them, fastest first
REFINE_REPS = 20  # ... each timed this many rounds
POLISH_WITHIN = 1.04  # polish: ok configs within this factor of the best after the refine ...
POLISH_TOP = 16  # ... at most this many of them, fastest first
POLISH_REPS = 48  # ... each timed this many rounds
# Each pass's default options (frozen: shared safely as defaults).
RETIME_OPTIONS, REFINE_OPTIONS, POLISH_OPTIONS = (
    CollectOptions(),
    CollectOptions(reps=REFINE_REPS),
    CollectOptions(reps=POLISH_REPS),
)


def configs_to_retime(part: pa.Table, spread_above: float = RETIME_SPREAD) -> tuple[str, ...]:
    """The configs of one problem's rows whose timed runs disagreed: status ok and spread above `spread_above`."""
    status = part.column("status").to_pylist()
    spread = part.column("spread").to_pylist()
    ids = part.column("config_id").to_pylist()
    return tuple(sorted(c for c, st, sp in zip(ids, status, spread, strict=True) if st == "ok" and sp > spread_above))


def configs_to_refine(rows: pa.Table, within: float = REFINE_WITHIN, top: int = REFINE_TOP) -> tuple[str, ...]:
    """The near-best configs of one problem's rows: ok, at most `within` x the best ok time, the `top` fastest (ties
    by config id)."""
    _check_refine(within, top)
    status = rows.column("status").to_pylist()
    ms = rows.column("median_ms").to_pylist()
    ids = rows.column("config_id").to_pylist()
    ok = sorted((t, c) for c, st, t in zip(ids, status, ms, strict=True) if st == "ok" and not math.isnan(t))
    if not ok:
        return ()
    limit = within * ok[0][0]
    return tuple(sorted(c for t, c in ok[:top] if t <= limit))


def _check_refine(within: float, top: int) -> None:
    if not within >= 1 or top < 1:  # a NaN compares false: it picked no config, and every problem was recorded done
        raise ValueError(f"within={within} must be >= 1 and top={top} >= 1")


def retime(
    root: Path | str,
    opts: CollectOptions = RETIME_OPTIONS,
    *,
    spread_above: float = RETIME_SPREAD,
    gpus: int = 1,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict:
    """Measure again, under this version's protocol, every config of a dataset whose runs disagreed.

    For datasets collected under timing protocol v2, which had no round 3: a stall during two of a config's three
    runs became its median (the H100 retest, BENCHMARKS.md, found 96% of the configs measured >1.2x slower than in a
    second collection among these). Per problem the selected configs are checked and screened again on the same
    inputs (`opts.seed` must be the collection's; 0 unless it was collected with --seed), with no abort (they were
    all ok), and written as the problem's retime file (`store.py`): the first measurement stays on disk, reads see
    the new one. Resumable like `collect`: problems already retimed are skipped. One GPU.
    """
    if math.isnan(spread_above):  # it picks no config, and every problem would be recorded retimed
        raise ValueError(f"spread_above={spread_above}: expected a number (the spread above which a config is retimed)")
    return _remeasure(
        root,
        opts,
        "retime",
        lambda rows: configs_to_retime(rows, spread_above),
        f"with spread above {spread_above}",
        log,
        gpus=gpus,
    )


def refine(
    root: Path | str,
    opts: CollectOptions = REFINE_OPTIONS,
    *,
    within: float = REFINE_WITHIN,
    top: int = REFINE_TOP,
    gpus: int = 1,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict:
    """Measure each problem's near-best configs again, `opts.reps` interleaved rounds each (`Timer.rounds`).

    A screen's best figure is the minimum of noisy figures, biased low, and which near-tied config is the oracle is
    partly chance: the retest (BENCHMARKS.md) found the same oracle in two collections of one problem only 27-34% of
    the time. The selection (`configs_to_refine`) reads the rows as they stand after the retime pass; the new
    figures are written as the problem's refine file and overlay the others on read. Same inputs, resumable, one GPU.
    """
    _check_refine(within, top)
    return _remeasure(
        root,
        opts,
        "refine",
        lambda rows: configs_to_refine(rows, within, top),
        f"within {within}x of the best (at most {top})",
        log,
        after=("retime",),
        rounds=True,
        record={"within": within, "top": top},
        gpus=gpus,
    )


def polish(
    root: Path | str,
    opts: CollectOptions = POLISH_OPTIONS,
    *,
    within: float = POLISH_WITHIN,
    top: int = POLISH_TOP,
    gpus: int = 1,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict:
    """Measure each problem's near-tied front again after the refine: its `top` fastest ok configs within `within` of
    the best, `opts.reps` interleaved rounds each (`Timer.rounds`), in a session of their own.

    Why a third pass: a refined figure is a median of 20 runs, about 0.2-0.5% of standard error (more for kernels
    under 0.02 ms), and half of the problems have several configs within 0.5% of the best, so which one is the
    oracle still turns on noise. The retest (BENCHMARKS.md) showed what a second measurement buys: the ranker's
    held-out picks held the oracle of two refined measurements combined (88%) more often than that of either (82-83%).
    The selection reads the rows after the retime and the refine. The new figures overlay the others on read, put on
    their scale (`store.align_session`: a session may run a problem's kernels a few percent faster or slower), so
    what the pass adds is the order of the near-tied front. Since the selection is a problem's fastest configs, no
    config it leaves out can then come ahead of the best it measured: the config whose new / earlier ratio is the
    smallest reads, aligned, at most its earlier figure, which no left-out config undercuts. Same inputs, resumable,
    one GPU. A problem the refine has not done yet (a refine stopped by its time limit) waits for a later polish:
    polished first, its front would be picked from the first measurement's few runs, and the refine's figures of the
    configs it left out would then compete with the polished ones.
    """
    _check_refine(within, top)
    return _remeasure(
        root,
        opts,
        "polish",
        lambda rows: configs_to_refine(rows, within, top),
        f"within {within}x of the refined best (at most {top})",
        log,
        after=("retime", "refine"),
        rounds=True,
        record={"within": within, "top": top},
        needs="refine",
        gpus=gpus,
    )


def _pass_worker(
    rank: int,
    todo: list[tuple[Problem, tuple[str, ...]]],
    root: str,
    meta: Metadata,
    kind: str,
    opts: CollectOptions,
    ropts: CollectOptions,
    compiled: dict[str, dict[str, CompileResult]],
    rounds: bool,
    extra: dict,
    deadline: float | None,
    gpus: int,
    report: Callable[[dict], None],
) -> None:
    """`_remeasure`'s problems `todo` on GPU `rank` (the CPU under the interpreter): each one's configs timed again
    and written as its retime file of `kind`, one line of the run log each (a log of its own per worker)."""
    gpu = torch.cuda.is_available() and not interpreting()
    if gpu:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    spec = runner.device_spec(rank)
    timer = Timer(device) if gpu else WallTimer()
    store = DatasetStore.load(Path(root))
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{socket.gethostname()}" + (f"-{rank}" if gpus > 1 else "")
    log_path = store.root / "runs" / f"{stamp}-{kind}.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for p, ids in todo:
        if runner.parent_gone():  # the run that spawned this worker was killed (runner._die_with_parent)
            return
        if deadline is not None and time.time() > deadline:
            report({"kind": "stopped", "rank": rank})
            return
        results: list = []
        record = {"problem_id": problem_id(p), "name": p.name, PAST[kind]: len(ids), "reps": opts.reps, **extra}
        if ids:
            configs = runner.feasible_for(p, spec, replace(ropts, config_ids=ids))
            compiled_p = compiled[runner.compile_key(p, spec)]
            results, stats = runner.measure_problem(p, configs, compiled_p, ropts, device, timer, rounds=rounds)
            record.update(asdict(stats))
        try:
            store.write_retime(p, rows_for(p, results), meta, kind)
        except FileExistsError:
            continue
        with log_path.open("a") as f:
            f.write(json.dumps({"kind": kind, **record}) + "\n")
        report({"kind": "done", "rank": rank, "configs": len(ids), "record": record})
    report({"kind": "finished", "rank": rank})


def _remeasure(root: Path | str, *args, **kwargs) -> dict:
    """`_remeasure_locked` under the dataset's writer lock (`store.one_writer`): a pass and a collection, or two
    passes, writing one directory at once would each measure the other's problems and pack the same parts. A path
    that is no directory goes straight on, for DatasetStore.load to say what is wrong with it."""
    if not Path(root).is_dir():
        return _remeasure_locked(root, *args, **kwargs)
    with one_writer(Path(root)):
        return _remeasure_locked(root, *args, **kwargs)


def _remeasure_locked(
    root: Path | str,
    opts: CollectOptions,
    kind: str,
    select: Callable[[pa.Table], tuple[str, ...]],
    what: str,
    log: Callable[[str], None],
    rounds: bool = False,
    record: dict | None = None,
    after: tuple[str, ...] = (),
    needs: str | None = None,
    gpus: int = 1,
) -> dict:
    """The pass of `kind` over a dataset: per unfinished problem, check and time again the configs `select` picks
    from its rows (its part, with the retime kinds `after` applied) and write them as the problem's retime file of
    that kind (an empty one when none is selected). `record`: fields every problem's line in the run log carries
    (the pass's selection). `needs`: one of `after` whose file a problem must have before this pass takes it; the
    others wait, counted in the summary's "waiting". `gpus`: one worker a GPU, each on every `gpus`-th problem (as
    `collect --gpus`); a pass on one GPU fell behind a collection on two at stop 74 (116-147 problems refined in the 45
    s a call left it, of 275-355 collected)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus={gpus!r}: expected a count of GPUs, at least 1")
    extra = dict(record or {})
    if opts.family != "triton":
        raise ValueError(f"{kind} measures autoheur's kernel (family 'triton'); Inductor's datasets have no spread")
    t0 = time.time()
    deadline = t0 + opts.time_limit_s if opts.time_limit_s else None
    store = DatasetStore.load(Path(root))
    if store.meta.family != "triton":
        raise ValueError(f"{root} holds the {store.meta.family!r} family: {kind} measures the 'triton' family only")
    if not (torch.cuda.is_available() or interpreting()):  # else the fingerprint names the interpreter, not set
        if store.meta.device_name == INTERPRETER_NAME:
            raise ValueError(f"{root} was collected in the Triton interpreter: set TRITON_INTERPRET=1 to run data "
                             f"{kind} there too")  # fmt: skip
        raise ValueError(f"no CUDA GPU here: run data {kind} on the GPU that collected {root} "
                         f"({store.meta.device_name})")  # fmt: skip
    meta = replace(runner.dataset_metadata(0, "triton"), configs=store.meta.configs)  # a trial stays one
    if meta.device_name != store.meta.device_name:  # the plain case first (a host without the dataset's GPU)
        raise ValueError(f"{root} was collected on {store.meta.device_name}, and this host's device is "
                         f"{meta.device_name}: run data {kind} on the GPU that collected it")  # fmt: skip
    try:  # the check write_retime makes, before any GPU work
        check_retime_metadata(store.meta, meta)
    except ValueError as exc:
        why = str(exc).replace("the retime was measured", "this host measures")
        raise ValueError(f"{root}: {why}; run data {kind} on the GPU, toolchain and kernel that collected it") from None
    done = store.retimes(kind)
    todo: list[tuple[Problem, tuple[str, ...]]] = []
    waiting = 0
    index = {k: store.retimes(k) for k in after}  # listed once, not per problem
    ready = index[needs] if needs else None
    for pid, part in store.parts().items():
        if pid in done:
            continue
        if ready is not None and pid not in ready:
            waiting += 1
            continue
        rows = store.read_problem(pid, index=index, part=part)
        todo.append((problem_from_row(rows.slice(0, 1).to_pylist()[0]), select(rows)))
    n_configs = sum(len(ids) for _, ids in todo)
    log(f"dataset {root}: {len(done)} problems already done; this {kind}: {n_configs} configs {what} in {len(todo)}")
    if waiting:
        log(f"waiting for `autoheur data {needs}` first: {waiting} problems, for a later {kind}")
    summary = {"root": str(root), "kind": kind, "todo": len(todo), "already_done": len(done), "done": 0, "configs": 0}
    if needs:
        summary["waiting"] = waiting
    if not todo:
        summary.update(runner.pack_summary(store.pack(kind)))  # what a run killed before its end left unpacked
        return summary
    ropts = replace(opts, abort_factor=math.inf)
    spec = runner.device_spec(0)
    t_c = time.time()
    compiled: dict[str, dict[str, CompileResult]] = {}
    by_key: dict[str, tuple[Problem, set[str]]] = {}
    for p, ids in todo:  # compile, per compile key, only the configs its problems need
        if ids:
            by_key.setdefault(runner.compile_key(p, spec), (p, set()))[1].update(ids)
    for p, ids in by_key.values():
        compiled.update(runner.precompile_all([p], spec, replace(ropts, config_ids=tuple(sorted(ids))), log))
    summary["precompile_s"] = time.time() - t_c

    progress = runner.Progress(len(todo))
    args = (str(root), meta, kind, opts, ropts, compiled, rounds, extra, deadline, gpus)

    def report(rec: dict) -> None:
        if rec["kind"] == "done":
            summary["done"] += 1
            summary["configs"] += rec["configs"]
            progress.update(rec["record"])
        elif rec["kind"] == "stopped":
            log("time limit reached: the remaining problems are left for the next run")
        elif rec["kind"] == "error":
            summary.setdefault("errors", []).append(rec)
            log(f"GPU worker {rec['rank']} failed: {rec['message']}")

    if gpus == 1:
        _pass_worker(0, todo, *args, report)
    else:
        runner._spawn_workers(_pass_worker, [(r, todo[r::gpus], *args) for r in range(gpus)], report)
    summary.update(runner.pack_summary(store.pack(kind)))  # this pass's files, and earlier runs' of it, into one
    summary["wall_s"] = time.time() - t0
    return summary
