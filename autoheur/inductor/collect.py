"""Collecting Inductor's own grouped-mm timings: the `inductor` kernel family of `autoheur collect`.

For each problem, `torch.compile(mode="max-autotune")` of one `torch._grouped_mm` call with every cache off: Inductor
builds its choices (ATen plus its Triton template over the grid, pruned by its own rules), compiles and benchmarks
them, and hands every choice's time to a feedback saver (`torch._inductor.select_algorithm.add_feedback_saver`). Each
template choice becomes one row under its twin config id (choices.py); grid configs Inductor pruned for the problem are
recorded as `invalid` (never offered), and choices that failed (an infinite time) as `compile_error`. The ATen time
goes to the run log. Where Inductor timed no template choice at all (it offered or kept ATen alone), the problem is
refused rather than recorded as every config `invalid`.

Refused while autoheur's choice filter is installed (`autoheur.inductor.enable()`, `why_filtered`): it narrows
Inductor's list to a model's top-k before the benchmarks, and the configs it dropped were recorded `invalid` as if
Inductor had pruned them (a stand-in model keeping 5, on the CPU: 35 of the 40 configs Inductor offered). Refused
rather than the filter taken out for the collection: Inductor's hook is one for the process, so taking it out would
leave unfiltered any compile another thread makes meanwhile (why enable() swaps it under a lock), and a collection that
quietly changes what its caller installed hides that it ran under it; disable() or the block's end is one line away.
Another preprocessing function of the caller's that drops choices is not detected.

The problem recorded is the one Inductor benchmarks: the workload problem's shapes with offsets split evenly
(`inductor_problem`), since Inductor never sees the routing. Timings are Inductor's benchmarker's, one figure per
choice (spread unknown: 0); `TIMING_VERSION` names that protocol in the dataset's metadata.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

import torch

from autoheur.collect.timing import Timing
from autoheur.inductor.choices import TEMPLATE_PREFIX, even_split, grid_configs, offsets_decrease, template_config
from autoheur.kernels.config import KernelConfig, Ragged
from autoheur.problem import Problem

FAMILY = "inductor"
TIMING_VERSION = 1001  # Inductor's autotuning benchmarker, as the feedback saver reports it


def as_benchmarked(problem: Problem) -> Problem:
    """The problem Inductor times for `problem`'s shapes: the same operands, offsets split evenly (16-byte steps)."""
    if problem.ragged == Ragged.NONE:
        return problem
    sizes = even_split(problem.total, problem.groups, 16 // problem.torch_dtype.itemsize)
    return dataclasses.replace(problem, sizes=sizes)


def benchmark_crashes(problem: Problem) -> bool:
    """Whether Inductor's max-autotune of `problem`'s shapes ends the process: its benchmark offsets decrease
    (choices.offsets_decrease), and the ATen choice fails a device-side assert on them."""
    if problem.ragged == Ragged.NONE:
        return False
    return offsets_decrease(problem.total, problem.groups, 16 // problem.torch_dtype.itemsize)


def autotune_timings(problem: Problem, device: torch.device) -> tuple[dict, float]:
    """Inductor's max-autotune of `problem` with caches off: ({choice: ms} of the grouped_mm choices, wall seconds)."""
    from torch._inductor import config
    from torch._inductor import select_algorithm as sa

    seen: dict = {}

    def saver(timings, name, input_nodes, choices, profiler_bench_fn, *rest):  # 5 arguments in 2.9, 6 from 2.10
        if name in ("grouped_mm", "scaled_grouped_mm"):
            seen.update(timings)

    if why := why_filtered():  # here too: a filter installed after the collection's check, by this process
        raise ValueError(why)
    a, b, offs = problem.make_inputs(device)
    torch._dynamo.reset()
    sa.add_feedback_saver(saver)
    t0 = time.perf_counter()
    try:
        with config.patch(max_autotune=True, max_autotune_gemm_backends="ATEN,TRITON", force_disable_caches=True):
            fn = torch.compile(lambda a, b, o: torch._grouped_mm(a, b, o), fullgraph=True, dynamic=False)
            fn(a, b, offs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    finally:
        _remove_saver(sa, saver)
        torch._dynamo.reset()
    return seen, time.perf_counter() - t0


def _remove_saver(sa, saver) -> None:
    from autoheur.inductor.filter import registry

    fns = registry("feedback_saver_fns")
    if fns is not None and saver in fns:
        fns.remove(saver)
    else:
        sa.clear_feedback_savers()


def results_from_timings(timings: dict, grid: Sequence[KernelConfig] | None = None):
    """(config, status, Timing) for every grid config, from the feedback saver's {choice: ms}; plus ATen's ms."""
    grid = list(grid if grid is not None else grid_configs())
    measured: dict[str, float] = {}
    aten_ms = math.nan
    for choice, ms in timings.items():
        cfg = template_config(choice)
        if cfg is None:
            if "triton" not in str(getattr(choice, "name", "")):
                aten_ms = float(ms)
            continue
        measured[cfg.config_id] = float(ms)
    if not any(str(getattr(c, "name", "")).startswith(TEMPLATE_PREFIX) for c in timings):
        # else every grid config recorded `invalid` (never offered) and the problem counted as done
        raise ValueError(
            "Inductor timed no grouped_mm template choice for this problem: its max-autotune offered or kept ATen "
            "alone (a GPU below sm_90, torch._inductor.config.deterministic, or a preprocessing function removing "
            "them); collect on an H100/H200 with those off"
        )
    unknown = set(measured) - {c.config_id for c in grid}
    if unknown:
        raise ValueError(f"Inductor timed configs outside its grid as installed: {sorted(unknown)[:3]}")
    results = []
    for cfg in grid:
        ms = measured.get(cfg.config_id)
        if ms is None:
            results.append((cfg, "invalid", None))  # pruned by Inductor for this problem: never offered
        elif not math.isfinite(ms):
            results.append((cfg, "compile_error", None))
        else:
            results.append((cfg, "ok", Timing(ms, 0.0, 1, False)))
    return results, aten_ms


def why_no_template_here() -> str | None:
    """Why Inductor offers no grouped_mm Triton template on this host, or None. Its rule (torch/_inductor/kernel/
    mm_grouped.py, `can_use_triton_kernel`): a CUDA GPU of sm_90 or newer, not ROCm. Elsewhere max-autotune times ATen
    alone, and a collection would find that out problem by problem (`results_from_timings` refuses it)."""
    if not torch.cuda.is_available():
        return "no CUDA GPU here: the Inductor family is timed by Inductor's own max-autotune on a GPU"
    if torch.version.hip:
        return "a ROCm GPU: Inductor offers its grouped_mm Triton template on CUDA GPUs of sm_90 or newer only"
    major, minor = torch.cuda.get_device_capability(0)
    if (major, minor) < (9, 0):
        return (f"this GPU is sm_{major}{minor}: Inductor offers its grouped_mm Triton template on sm_90 or newer only "
                "(an H100 or H200)")  # fmt: skip
    return None


def why_filtered() -> str | None:
    """Why this process cannot collect Inductor's timings now: autoheur's choice filter is installed (see the module
    docstring), or None."""
    from autoheur.inductor.filter import installed

    if not installed():
        return None
    return ("autoheur's Inductor choice filter is installed (autoheur.inductor.enable()): it narrows Inductor's "
            "grouped_mm choices to a model's top-k, and the collection would record every config it drops as "
            "`invalid` (pruned by Inductor). Call autoheur.inductor.filter.disable(), or leave the `with enable()` "
            "block, before collecting")  # fmt: skip


def measure(problem: Problem, device: torch.device):
    """One problem's rows and run-log figures: Inductor's autotuning of it, every grid config accounted for."""
    timings, wall = autotune_timings(problem, device)
    results, aten_ms = results_from_timings(timings)
    return results, {"aten_ms": aten_ms, "autotune_s": wall}
