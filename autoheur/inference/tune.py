"""`autoheur tune`: the run-time tuning of a problem list, problem by problem, optionally against the exhaustive one.

For each problem: the predicted top-k (the GPU's model, or its nearest kin's, else the best fixed list) compiled and
timed on the problem's inputs (compiled in parallel first, where AUTOHEUR_COMPILE_IN says, as at run time;
torch._grouped_mm timed beside them where AUTOHEUR_ATEN says, as at run time), the chosen config ("aten" when
torch's own won), its time and
the tuning wall time (compile included); with `compare_exhaustive`, the same for every feasible config (compiled on
processes, as exhaustive tuning is). A problem whose call never launches the kernel (no rows or columns: an empty
output, which the run time returns at once) is a row of its name and "skipped" alone. Nothing is cached: this
measures tuning, it does not feed the run-time cache.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import torch

from autoheur.inference.aten import aten_for
from autoheur.inference.tuner import Tuner, check_settings, compile_in_parallel, time_candidates
from autoheur.kernels.config import feasible_configs
from autoheur.kernels.validate import interpreting, validate
from autoheur.problem import Problem


def tune_problems(problems: Sequence[Problem], k: int = 10, compare_exhaustive: bool = False) -> Iterator[dict]:
    if not (torch.cuda.is_available() or interpreting()):
        raise ValueError("no CUDA GPU here: set TRITON_INTERPRET=1 to run the kernel on the CPU (its timings are then "
                         "the interpreter's, not a GPU's)")  # fmt: skip
    device = "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"
    bf16 = [p for p in problems if p.dtype == "bfloat16" and p.launches]  # one that never launches: skipped below
    if device == "cpu" and bf16:  # as Tuner.config_for refuses: the interpreter's bf16 dot is wrong, not rough
        raise ValueError(
            f"{len(bf16)} of the {len(problems)} problems are bfloat16 (e.g. {bf16[0].name or bf16[0]!r}; the "
            "default dtype of a shapes line), which the Triton interpreter computes wrongly: tune them on a GPU, or "
            "give float16 or float32 (dtype in the shapes file)"
        )
    check_settings()  # a bad AUTOHEUR_* knob before the first problem's work
    tuner = Tuner()
    for p in problems:
        if not p.launches:  # an empty output: the run time returns it before any tuning, as collect skips it
            yield {"problem": p.name, "skipped": "never launches the kernel (an empty output): nothing to tune"}
            continue
        a, b, offs = p.make_inputs(device)
        try:
            call = validate(a, b, offs)
        except (ValueError, TypeError) as exc:  # say which problem: a shapes file may hold many
            raise ValueError(f"problem {p.name!r}: {exc}") from exc
        try:
            row = _tune_one(tuner, p, call, k, compare_exhaustive)
        except (RuntimeError, ValueError) as exc:  # e.g. no candidate compiled or ran: say which problem
            raise type(exc)(f"problem {p.name!r}: {exc}") from exc
        yield row


def _tune_one(tuner: Tuner, p: Problem, call, k: int, compare_exhaustive: bool) -> dict:
    t0 = time.perf_counter()
    cands, source = tuner.candidates(call, "predicted", k)
    aten = aten_for(call)
    cfg, ms = time_candidates(call, compile_in_parallel(call, cands, tuner.compile_pool()), aten=aten)
    row = {"problem": p.name, "source": source + (" + aten" if aten else ""), "candidates": len(cands) + aten,
           "config": cfg.config_id, "ms": ms, "tune_s": time.perf_counter() - t0}  # fmt: skip
    if compare_exhaustive:
        t1 = time.perf_counter()
        every = list(feasible_configs(call.signature, call.device))
        every_ok = compile_in_parallel(call, every, tuner.compile_pool(), where="processes")
        best, best_ms = time_candidates(call, every_ok, aten=aten)
        row.update({"exhaustive_config": best.config_id, "exhaustive_ms": best_ms,
                    "exhaustive_configs": len(every), "exhaustive_s": time.perf_counter() - t1,
                    "efficiency": best_ms / ms if ms else float("nan")})  # fmt: skip
    return row
