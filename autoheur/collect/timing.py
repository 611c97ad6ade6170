"""Timing many configs of one problem: fast, honest, and with slow configs cut short.

Protocol (`Timer.screen`), for callables whose binaries are loaded:
  round 1  every config runs once; with a `check` (verify.OutputCheck, collection), its output is checked against
           the reference right after that run, outside the timed region, and a wrong config (or one whose launch
           raised) leaves the screen there, before the best round-1 time is taken;
  abort    a config slower than `abort_factor` x the best round-1 time stops there and is recorded as censored: its
           one time stands as a lower bound (a hopeless config, ruled out without spending more runs on it);
  round 2  every other config runs `reps - 1` more times; its figure is the median of all its runs and its spread
           (p75 - p25) / median (max - min over median below four runs).
  round 3  a config whose runs disagree (spread above `retime_spread`) runs `reps` more times, once, and its figure
           is taken over all its runs: a transient stall during two of three runs would otherwise become its median
           (0.9% of the configs of the first v2 H100 dataset had a spread above 25%).
  confirm  (`confirm_aborts=True`; collection since v4, and the run-time tuner): an aborted config runs once more.
           It is censored only if that run is slow too (its figure: the faster of the two); otherwise the first run
           is dropped as a stall and the config rejoins round 2. Without this, a stall during the one run of round 1
           rules a fast config out for good: the H100 retest found blocks of configs censored in one collection and
           within 10% of the best in the other. `confirm_slack_ms` limits it to aborted configs whose run was at most
           that much above the abort line: a stall adds time (a host gap, a preemption), it does not multiply it, so
           a 5 ms kernel recorded at 30 ms was slow, not stalled; without the limit, confirming doubled round 1 of
           the largest problems, whose aborted configs are most of their GPU time (collection: 1 ms).

`Timer.rounds` is the refinement protocol (`autoheur data refine`, passes.refine): every config runs once per round,
in a fresh shuffled order each round, for `reps` rounds, with no abort; its figure is the median of its runs. It
measures a problem's near-best configs again to a tighter precision, interleaved so that a slow drift of the clocks
falls on all of them alike: the minimum of a screen's noisy figures is biased low (the configs that win a noisy
screen are partly the ones that drew fast runs), and that bias decides which config is the oracle.

On the GPU each run is preceded by an L2 flush (a memset of twice the L2 size, outside the timed region) and
bracketed by CUDA events. Runs are enqueued in batches behind a GPU sleep long enough for the host to enqueue the
whole batch: the events then time the kernel on the GPU, never the host's launch overhead (tens of microseconds for a
Triton launch from Python, longer than many small grouped GEMMs). One host sync per batch.

TIMING_VERSION names this protocol; datasets record it and refuse to mix timings taken under another. Version 1
(no sleep: the start event could fire before the kernel was launched) timed launch overhead into kernels under
about 0.1 ms; version 2 had no round 3; version 3 checked outputs in a pass of its own before the screen (which also
warmed every config), confirmed no abort, and aborted at 3x.
`WallTimer` is the same protocol with the host clock, for the CPU interpreter (real code path, meaningless numbers).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

MIN_FLUSH_BYTES = 64 << 20
TIMING_VERSION = 4
RETIME_SPREAD = 0.25  # round 3's threshold: runs whose spread (IQR over median) is above this disagree


@dataclass(frozen=True, slots=True)
class Timing:
    median_ms: float
    spread: float  # interquartile range over median; 0 for one run
    reps: int
    censored: bool  # True: aborted after one run, median_ms is a lower bound


class _Protocol:
    """The screening protocol; subclasses supply `_times(fns, names, runs, after)`: names -> list of ms per run,
    calling `after(name)` (when given) right after each run, outside its timed region."""

    def _times(
        self,
        fns: dict[str, Callable[[], object]],
        names: list[str],
        runs: int,
        after: Callable[[str], None] | None = None,
    ) -> dict[str, list[float]]:
        raise NotImplementedError

    def screen(
        self,
        fns: dict[str, Callable[[], object]],
        reps: int = 5,
        abort_factor: float = 3.0,
        retime_spread: float = RETIME_SPREAD,
        confirm_aborts: bool = False,
        confirm_slack_ms: float = math.inf,
        check=None,
    ) -> dict[str, Timing]:
        """Time every callable in `fns`; see the module docstring for the protocol. With a `check`, the configs it
        finds wrong in round 1 are left out of the result (its `verdicts()` says why)."""
        if reps < 1 or abort_factor < 1 or retime_spread <= 0:
            raise ValueError(
                f"reps={reps} must be >= 1, abort_factor={abort_factor} >= 1 and retime_spread={retime_spread} > 0"
            )
        names = list(fns)
        if not names:
            return {}
        first = {n: t[0] for n, t in self._times(fns, names, 1, _after(check)).items()}
        names = _passed(names, check)
        if not names:
            return {}
        best = min(first[n] for n in names)
        keep = [n for n in names if first[n] <= abort_factor * best]
        runs = {n: [first[n]] for n in names}
        if confirm_aborts and len(keep) < len(names):
            limit = abort_factor * best
            doubt = [n for n in names if limit < first[n] <= limit + confirm_slack_ms]
            for n, t in self._times(fns, doubt, 1).items():
                if t[0] <= abort_factor * best:  # rejoins; the contradicted run is dropped as a stall
                    runs[n] = [t[0]]
                    keep.append(n)
                else:
                    runs[n].append(t[0])
        more = self._times(fns, keep, reps - 1) if reps > 1 else {}
        for n, extra in more.items():
            runs[n].extend(extra)
        redo = [n for n in keep if len(runs[n]) > 1 and summarize(runs[n]).spread > retime_spread]
        for n, extra in (self._times(fns, redo, reps) if redo else {}).items():
            runs[n].extend(extra)
        kept = set(keep)
        return {n: summarize(runs[n]) if n in kept else Timing(min(runs[n]), 0.0, len(runs[n]), True) for n in names}

    def rounds(
        self, fns: dict[str, Callable[[], object]], reps: int = 20, seed: int = 0, check=None
    ) -> dict[str, Timing]:
        """Time every callable `reps` times, one run each per round, in a new seeded order every round. With a
        `check`, an untimed first pass checks every config (and loads it); the wrong ones are left out."""
        if reps < 1:
            raise ValueError(f"reps={reps} must be >= 1")
        names = list(fns)
        if check is not None and names:
            self._times(fns, names, 1, check.after)
            names = _passed(names, check)
        runs: dict[str, list[float]] = {n: [] for n in names}
        rng = random.Random(seed)
        for _ in range(reps):
            order = names[:]
            rng.shuffle(order)
            for n, t in self._times(fns, order, 1).items():
                runs[n].extend(t)
        return {n: summarize(runs[n]) for n in names}


class Timer(_Protocol):
    """CUDA-event timing with an L2 flush before every run."""

    def __init__(self, device: torch.device | str | int = "cuda", batch_runs: int = 128):
        device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
        self.flush = torch.empty(max(MIN_FLUSH_BYTES, 2 * l2), dtype=torch.int8, device=device)
        # timed runs enqueued between two host syncs; each is 4 queue entries, well inside the launch queue
        self.batch_runs = batch_runs
        self.host_us_per_run = 200.0  # refined after every batch
        self.cycles_per_us = _sleep_rate()

    def _hold(self, runs: int) -> None:
        """Keep the GPU busy while the host enqueues `runs` runs (1.5x the last measured host rate, +0.5 ms)."""
        us = 1.5 * self.host_us_per_run * runs + 500.0
        torch.cuda._sleep(int(us * self.cycles_per_us))

    def run(self, fn: Callable[[], object], reps: int) -> list[float]:
        """`reps` timed runs of `fn` (already warm); milliseconds each."""
        return self._times({"f": fn}, ["f"], reps)["f"]

    def _times(self, fns, names, runs, after=None):
        out: dict[str, list[float]] = {n: [] for n in names}
        if runs < 1:
            return out
        per_batch = max(1, self.batch_runs // runs)
        for i in range(0, len(names), per_batch):
            pending = []
            part = names[i : i + per_batch]
            self._hold(len(part) * runs)
            t0 = time.perf_counter()
            for name in part:
                for _ in range(runs):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    self.flush.zero_()
                    start.record()
                    fns[name]()
                    end.record()
                    if after is not None:
                        after(name)
                    pending.append((name, start, end))
            self.host_us_per_run = (time.perf_counter() - t0) * 1e6 / len(pending)
            torch.cuda.synchronize()
            for name, start, end in pending:
                out[name].append(start.elapsed_time(end))
        return out


def _sleep_rate() -> float:
    """GPU clock cycles per microsecond of `torch.cuda._sleep`, measured once."""
    torch.cuda._sleep(1000)  # warm
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 2_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end) * 1e3, 1.0)


class WallTimer(_Protocol):
    """The same protocol on the host clock, for callables that run synchronously (the CPU interpreter)."""

    def run(self, fn: Callable[[], object], reps: int) -> list[float]:
        return self._times({"f": fn}, ["f"], reps)["f"]

    def _times(self, fns, names, runs, after=None):
        out: dict[str, list[float]] = {}
        for name in names:
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                fns[name]()
                times.append((time.perf_counter() - t0) * 1e3)
                if after is not None:
                    after(name)
            out[name] = times
        return out


def _after(check):
    return None if check is None else check.after


def _passed(names: list[str], check) -> list[str]:
    """The names whose round-1 check passed (all of them without a check)."""
    if check is None:
        return names
    verdicts = check.verdicts()
    return [n for n in names if verdicts.get(n) == "ok"]


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
