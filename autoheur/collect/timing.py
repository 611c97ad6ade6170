"""Timing many configs of one problem on the GPU: fast, honest, and with slow configs cut short.

Every timed run is preceded by an L2 flush (a 256 MB memset outside the timed region) and bracketed by CUDA events.
Round 1 runs each config once; a config already `abort_factor` times slower than the best so far stops there and is
recorded as censored: its one time stands as a lower bound, enough to rule it out. The rest get `reps` runs: the median
is the figure, the spread is (p75 - p25) / median.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Timing:
    median_ms: float
    spread: float  # interquartile range over median; 0 for one run
    reps: int
    censored: bool  # True: aborted after one run, median_ms is a lower bound


class Timer:
    """CUDA-event timing with an L2 flush before every run."""

    def __init__(self, device: torch.device | str = "cuda"):
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)

    def run(self, fn: Callable[[], object], reps: int) -> list[float]:
        """`reps` timed runs of `fn` (already warm); milliseconds each."""
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, end in events:
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in events]

    def screen(
        self,
        fns: dict[str, Callable[[], object]],
        reps: int = 5,
        abort_factor: float = 3.0,
        batch: int = 32,
    ) -> dict[str, Timing]:
        """Time every warm callable in `fns`; see the module docstring for the protocol."""
        first: dict[str, float] = {}
        names = list(fns)
        for i in range(0, len(names), batch):  # batches keep the GPU busy between host syncs
            part = names[i : i + batch]
            events = []
            for name in part:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                self.flush.zero_()
                start.record()
                fns[name]()
                end.record()
                events.append((name, start, end))
            torch.cuda.synchronize()
            for name, start, end in events:
                first[name] = start.elapsed_time(end)
        best = min(first.values())
        out: dict[str, Timing] = {}
        for name in names:
            if first[name] > abort_factor * best:
                out[name] = Timing(first[name], 0.0, 1, True)
                continue
            times = [first[name], *self.run(fns[name], reps - 1)] if reps > 1 else [first[name]]
            out[name] = summarize(times)
        return out


def summarize(times: list[float]) -> Timing:
    med = statistics.median(times)
    if len(times) >= 4:
        q = statistics.quantiles(times, n=4)
        spread = (q[2] - q[0]) / med if med > 0 else 0.0
    else:
        spread = (max(times) - min(times)) / med if med > 0 else 0.0
    return Timing(med, spread, len(times), False)


def bench_ms(fn: Callable[[], object], rep_ms: int = 200) -> float:
    """Final figure for a single callable: triton.testing.do_bench's median (it flushes L2 before every run)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))
