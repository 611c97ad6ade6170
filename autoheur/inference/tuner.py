"""Choosing a config at run time: predicted top-k, timed briefly on the real inputs, the winner cached.

Modes (environment variable AUTOHEUR_TUNE):
  predicted   (default) the GPU's model (its own, or borrowed: below) predicts the top AUTOHEUR_TOP_K (default 10)
              configs; each is compiled and timed on the call's own inputs (the collection's screening protocol, 3
              runs, aborts confirmed);
              on a GPU the screen's leaders (up to LEADERS_MAX within LEADERS_WITHIN of its best) are then timed
              again in LEADER_ROUNDS interleaved rounds, a fresh order each round; the fastest is cached
  off         the model's top-1, never timed (no model: the first of the best fixed list)
  exhaustive  every feasible config is timed (minutes on a new shape: the collection's cost, for comparison)
On a GPU the candidates are first compiled in parallel (AUTOHEUR_COMPILE_WORKERS at a time, default one per
candidate up to the core count; 1 compiles each on its first timed launch instead): each config is compiled on a tiny
twin of the problem that shares its binaries (`Problem.shrunk`) and its output checked against the reference. A
config that fails or computes a wrong result is dropped before timing. Where (AUTOHEUR_COMPILE_IN):
  threads     (default) threads of this process, which already has torch, triton and a CUDA context: nothing to
              start, so a process's first tuning costs what later ones do. A compiler crash or GPU fault in a check
              would take this process down (no shipped dataset records a crashed config).
  processes   spawned worker processes, which leave the binaries in Triton's on-disk cache for this process to load
              and absorb crashes. They are kept between tunings and shut down after AUTOHEUR_COMPILE_POOL_IDLE_S
              seconds without work (default 120; each idle worker holds an interpreter with torch and a CUDA
              context); starting them costs seconds (importing torch), which `prepare()` can pay ahead of time.
Exhaustive tuning always compiles on processes: hundreds of configs need every core, not one interpreter's GIL.
`prepare()` (also `autoheur.inference.prepare`) loads the model, imports the kernel, and with processes starts the
workers, ahead of the first call.
Without a model of its own, a GPU borrows the shipped model of the nearest GPU of its architecture (one warning;
`artifact.model_for_device`), and where there is none (or AUTOHEUR_BORROW_MODEL=0) the best fixed list of a shipped
model stands in for the prediction, with one warning.
On a GPU, torch._grouped_mm is timed beside the predicted configs and kept where it is fastest (AUTOHEUR_ATEN,
aten.py); mode "off" never times anything.
Each tuning decision is logged at INFO on the "autoheur" logger.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings

import torch

from autoheur import SettingError, env_flag
from autoheur.device import INTERPRETER_NAME, DeviceSpec
from autoheur.inference.aten import ATEN_ID, AtenChoice, aten_for, aten_grouped_mm, aten_setting, choice_from_id
from autoheur.inference.cache import TuneCache
from autoheur.inference.key import TuneKey, tune_key
from autoheur.kernels.config import KernelConfig, feasible_configs, infeasible_reason
from autoheur.kernels.launcher import BoundLaunch
from autoheur.kernels.validate import BF16_ON_CPU, GemmCall, interpreting
from autoheur.problem import LAYOUTS, PaddedProblem, Problem

log = logging.getLogger("autoheur")
Choice = KernelConfig | AtenChoice  # what tuning picks: a Triton config, or torch._grouped_mm
MODES = ("predicted", "off", "exhaustive")
MODE_RANK = {"off": 0, "predicted": 1, "exhaustive": 2}  # a cached choice answers its own mode and weaker ones
# The settle round (`settle_leaders`). A screen times each config's runs back to back in one batch behind a GPU sleep,
# so a config's place in the batch is part of its figure: on long compute-bound kernels the clocks fall as the power
# draw rises, and one H100 run timed one config at 5.73 and 5.23 ms in one process. The leaders are timed again
# interleaved, in a new order every round, so that drift falls on all of them alike; this costs LEADER_ROUNDS runs of
# at most LEADERS_MAX kernels (0.2 s for 5 ms kernels, far less for the rest).
LEADERS_WITHIN = 0.05
LEADERS_MAX = 4
LEADER_ROUNDS = 7
LAYOUT_NAMES = {ragged: name for name, ragged in LAYOUTS.items()}


def tune_mode() -> str:
    mode = os.environ.get("AUTOHEUR_TUNE", "predicted").strip().lower()
    if mode not in MODES:
        raise SettingError(f"AUTOHEUR_TUNE={mode!r}: expected one of {MODES}")
    return mode


def _positive_int_env(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        n = int(text)
    except ValueError:
        raise SettingError(f"{name}={text!r}: expected a positive integer") from None
    if n < 1:
        raise SettingError(f"{name}={n}: expected a positive integer")
    return n


COMPILE_PLACES = ("threads", "processes")


def compile_in() -> str:
    where = os.environ.get("AUTOHEUR_COMPILE_IN", "threads").strip().lower()
    if where not in COMPILE_PLACES:
        raise SettingError(f"AUTOHEUR_COMPILE_IN={where!r}: expected one of {COMPILE_PLACES}")
    return where


def top_k_setting() -> int:
    return _positive_int_env("AUTOHEUR_TOP_K", 10)


def compile_workers(candidates: int, gpu: bool) -> int:
    """Threads or processes that compile `candidates` configs before timing; 1 means compile each on its first timed
    launch instead."""
    n = _positive_int_env("AUTOHEUR_COMPILE_WORKERS", os.cpu_count() or 1)
    if not gpu or candidates < 2:  # the interpreter compiles nothing; one config gains nothing from a pool
        return 1
    return max(1, min(n, candidates))


def pool_idle_seconds() -> float:
    text = os.environ.get("AUTOHEUR_COMPILE_POOL_IDLE_S", "120")
    try:
        idle = float(text)
    except ValueError:
        raise SettingError(f"AUTOHEUR_COMPILE_POOL_IDLE_S={text!r}: expected seconds (a number >= 0)") from None
    if not 0 <= idle <= threading.TIMEOUT_MAX:  # inf or 1e300: the idle timer's thread died with an OverflowError
        raise SettingError(f"AUTOHEUR_COMPILE_POOL_IDLE_S={text!r}: expected seconds (a number >= 0, at most "
                           f"{threading.TIMEOUT_MAX:.0f}, threading.TIMEOUT_MAX)")  # fmt: skip
    return idle


def problem_of(call: GemmCall, padded: bool = False) -> Problem:
    """The `Problem` of a validated call (reads the offsets back: done once per new tuning key); `padded`: a
    `PaddedProblem`, whose drawn inputs are valid as the call's are."""
    sizes: tuple[int, ...] = ()
    if call.offs is not None:
        ends = call.offs.tolist()
        sizes = tuple(e - s for s, e in zip([0, *ends[:-1]], ends, strict=True))
    return (PaddedProblem if padded else Problem)(
        layout=LAYOUT_NAMES[call.ragged],
        groups=call.groups,
        sizes=sizes,
        m=call.m,
        n=call.n,
        k=call.k,
        dtype=str(call.a.dtype).removeprefix("torch."),
        b_major="n" if call.b_n_contig else "k",
        a_major="k" if call.a_k_contig else "m",
        name="runtime",
    )


class Tuner:
    """Per-process tuner: one cache and one model per device."""

    def __init__(self):
        self._caches: dict[str, TuneCache] = {}
        self._models: dict[str, object] = {}
        self._identities: dict[str, str] = {}
        self._warned: set[str] = set()
        self._chosen: dict[tuple, Choice] = {}  # one dict lookup, no parsing, no lock
        # The hot path (api.py): tensor signature -> (a validated call's fields without its tensors, the chosen
        # config's BoundLaunch, or None for torch._grouped_mm).
        self.fast: dict[tuple, tuple[dict, BoundLaunch | None]] = {}
        self._lock = threading.RLock()
        self._pool = None  # the compile workers, kept between tunings (precompile.WorkerPool)

    FAST_ENTRIES = 4096  # signatures change with every token count; past this many, start over

    def remember(self, sig: tuple, fields: dict, bound: BoundLaunch | None) -> None:
        if len(self.fast) >= self.FAST_ENTRIES:
            self.fast.clear()
        self.fast[sig] = (fields, bound)

    def cache(self, device_name: str, aten: bool = False) -> TuneCache:
        """The cache of this GPU's choices; those made with torch._grouped_mm among the candidates (`aten`) are kept
        apart from Triton-only ones, so that AUTOHEUR_ATEN=off never reads back an "aten"."""
        with self._lock:
            if (device_name, aten) not in self._caches:
                disk = env_flag("AUTOHEUR_CACHE", True)
                self._caches[device_name, aten] = TuneCache(device_name, disk=disk, aten=aten)
            return self._caches[device_name, aten]

    def model(self, spec: DeviceSpec):
        """The model for this GPU (loaded once per process): its own, or the nearest GPU's of its architecture
        (`model_for_device`; said in one warning), or None: the fallback list stands in (one warning)."""
        from autoheur.models.artifact import model_for_device

        name = spec.name
        with self._lock:
            if name not in self._models:
                # In the interpreter a model of one's own interpreter data comes first (train-then-use on a CPU)
                own, how = model_for_device(INTERPRETER_NAME) if interpreting() else (None, "")
                if own is not None:
                    log.info("autoheur: in the interpreter, %s", how)
                    self._models[name] = own
                    return own
                model, how = model_for_device(name, spec=spec.to_dict())
                borrowed = model is not None and model.device.get("name") != name
                if (model is None or borrowed) and name not in self._warned:
                    warnings.warn(f"autoheur: {how}", stacklevel=4)
                    self._warned.add(name)
                self._models[name] = model
            return self._models[name]

    def model_identity(self, spec: DeviceSpec) -> str:
        """Which model ranks this GPU's candidates (`artifact.lookup_identity`, from the side-cars: once a process, no
        model loaded): recorded with each choice, whose cached copy a later model's process tunes again."""
        from autoheur.models.artifact import lookup_identity

        with self._lock:
            if spec.name not in self._identities:
                names = [INTERPRETER_NAME, spec.name] if interpreting() else [spec.name]
                self._identities[spec.name] = lookup_identity(names, spec.to_dict())
            return self._identities[spec.name]

    def ranker_identity(self, spec: DeviceSpec) -> str:
        """`model_identity`, or "fixed list" where the model it names is unusable (`model` is None: a borrowed model
        that does not load stands down for the fixed list): the ranker a choice made now is recorded with. Loads the
        model; `_lookup` asks it only where a cached choice's record is not `model_identity`'s."""
        identity = self.model_identity(spec)
        return "fixed list" if self.model(spec) is None else identity

    def compile_pool(self):
        """The compile workers of this process (started on first use, shut down after AUTOHEUR_COMPILE_POOL_IDLE_S
        seconds without work, default 120)."""
        from autoheur.collect.precompile import WorkerPool

        with self._lock:
            if self._pool is None:
                n = _positive_int_env("AUTOHEUR_COMPILE_WORKERS", os.cpu_count() or 1)
                self._pool = WorkerPool(n, idle_s=pool_idle_seconds())
            return self._pool

    def prepare(self, device: int | None = None, wait: bool = False) -> None:
        """Load this GPU's model, ready to score, and import the kernel now (with AUTOHEUR_COMPILE_IN=processes, also
        start the compile workers), so that the first call of a new shape pays for compiling and timing its
        candidates only (a serving process calls this once at start-up). `wait`: return once every worker is up."""
        check_settings()
        import autoheur.kernels.grouped_gemm  # noqa: F401  (triton and the kernel's module)
        from autoheur.device import current_device_spec
        from autoheur.kernels.validate import _device_spec

        gpu = torch.cuda.is_available() and not interpreting()
        spec = _device_spec(device) if gpu and device is not None else current_device_spec()
        model = self.model(spec)
        if model is not None:
            model.prepare_scoring()
        workers = compile_workers(top_k_setting(), gpu)  # as many as a predicted top-k uses, not every core
        if gpu and tune_mode() != "off" and workers > 1 and compile_in() == "processes":
            started = self.compile_pool().warm(workers)
            if wait:
                for fut in started:
                    fut.result()

    def candidates(self, call: GemmCall, mode: str, k: int) -> tuple[list[KernelConfig], str]:
        feasible = feasible_configs(call.signature, call.device)
        if mode == "exhaustive":
            return list(feasible), "whole space"
        ok = {c.config_id for c in feasible}
        model = self.model(call.device)
        want = 1 if mode == "off" else k
        if model is not None:
            problem, device = problem_of(call), _fingerprint(call, model)
            # the call's signature, not the problem's: an operand broadcast along its rows goes by pointers though
            # its shape would take TMA, and TMA picks left no candidate (stop 78)
            picks = [c for c, _ in model.top_k(problem, want, device=device, signature=call.signature)]
            picks = [c for c in picks if c.config_id in ok]
            if picks:
                source = f"model {model.meta.get('model')} top-{want}"
                outside = model.extrapolation(problem, device)
                if outside:  # said in the tuning's log line: the model never saw such a problem
                    source += f", extrapolating on {'; '.join(outside)}"
                return picks, source
        from autoheur.models.artifact import feasible_fallback

        picks = feasible_fallback(call.signature, call.device)[:want]
        if not picks:  # nothing shipped: a safe middle-of-the-space config
            picks = [feasible[len(feasible) // 2]]
        return picks, f"best fixed list top-{len(picks)}"

    def config_for(self, call: GemmCall) -> Choice:
        """The tuned choice for a validated call: a KernelConfig, or ATEN (run torch._grouped_mm; aten.py). A bf16 call
        on the CPU is refused: the Triton interpreter computes bf16 products wrongly (its dot), not merely roughly."""
        if call.a.dtype == torch.bfloat16 and call.a.device.type == "cpu":
            raise TypeError(BF16_ON_CPU)
        tkey = tune_key(call)
        aten = aten_for(call)
        chosen = self._chosen.get((tkey, aten))
        if chosen is not None:
            return chosen
        with self._lock:  # one tuning per key at a time in this process
            chosen = self._lookup(tkey, call, aten)
            if chosen is None:
                chosen = self._tune(tkey.to_str(), call, aten)
            self._chosen[tkey, aten] = chosen
            return chosen

    def _lookup(self, tkey: TuneKey, call: GemmCall, aten: bool) -> Choice | None:
        """A choice tuned earlier (this process or, through the disk cache, another one); None for a miss, for a
        choice made in a weaker mode than the current one (an untimed AUTOHEUR_TUNE=off pick is no answer to
        `predicted`, nor a predicted top-k to `exhaustive`: MODE_RANK; nor the best of a shorter predicted list to a
        longer one: AUTOHEUR_TOP_K), and for a cached config that cannot run this call (check_config would refuse
        it); each is then tuned again and overwritten rather than kept for good."""
        hit = self.cache(call.device.name, aten).get(tkey.to_str())
        if hit is None:
            return None
        mode = tune_mode()
        if MODE_RANK.get(hit.get("mode"), MODE_RANK["predicted"]) < MODE_RANK[mode]:
            log.info("autoheur: cached choice for %s was made with AUTOHEUR_TUNE=%s: tuning again (%s)",
                     tkey.to_str(), hit.get("mode"), mode)  # fmt: skip
            return None
        listed = hit.get("top_k") if mode == "predicted" and hit.get("mode") == "predicted" else None
        if listed is not None and listed < top_k_setting():  # (AUTOHEUR_TOP_K=1: an untimed pick; absent: kept)
            log.info("autoheur: cached choice for %s was the best of a top %d: tuning again (top %d)",
                     tkey.to_str(), listed, top_k_setting())  # fmt: skip
            return None
        ranked_by = hit.get("model")  # absent in entries of earlier versions: kept
        if ranked_by is not None and ranked_by != self.model_identity(call.device):  # (an exhaustive choice: none)
            now = self.ranker_identity(call.device)
            if ranked_by != now:
                log.info("autoheur: cached choice for %s was ranked by %s, this GPU's model is now %s: tuning again",
                         tkey.to_str(), ranked_by, now)  # fmt: skip
                return None
        choice = choice_from_id(hit["config"])
        reason = None if isinstance(choice, AtenChoice) else infeasible_reason(choice, call.signature, call.device)
        if reason is not None:
            log.warning(
                "autoheur: cached config %s cannot run %s (%s): tuning again", choice.config_id, tkey.to_str(), reason
            )
            return None
        return choice

    def _tune(self, key: str, call: GemmCall, aten: bool) -> Choice:
        cache = self.cache(call.device.name, aten)
        mode, k = tune_mode(), top_k_setting()
        aten = aten and mode != "off"
        t0 = time.perf_counter()
        if mode != "exhaustive":  # the lookup's model, read before the model that ranks is loaded
            self.model_identity(call.device)
        cands, source = self.candidates(call, mode, k)
        cands = [c for c in cands if infeasible_reason(c, call.signature, call.device) is None]
        if mode == "off" or (len(cands) == 1 and not aten):
            winner, ms = cands[0], None
        else:
            where = "processes" if mode == "exhaustive" else compile_in()
            cands = compile_in_parallel(call, cands, self.compile_pool(), where=where)
            winner, ms = time_candidates(call, cands, aten=aten)
        wall = time.perf_counter() - t0
        source += " + aten" if aten else ""
        ranked_by = {} if mode == "exhaustive" else {"model": self.ranker_identity(call.device)}
        listed = {"top_k": k} if mode == "predicted" else {}
        cache.put(key, {"config": winner.config_id, "ms": ms, "mode": mode, "source": source,
                        "candidates": len(cands) + aten, "tune_s": round(wall, 3), **ranked_by, **listed})  # fmt: skip
        log.info(
            "autoheur: tuned %s: %s from %d candidates (%s) in %.2f s%s",
            key, winner.config_id, len(cands) + aten, source, wall, "" if ms is None else f", {ms:.4f} ms",
        )  # fmt: skip
        return winner


def _fingerprint(call: GemmCall, model) -> dict:
    """The model's device record with this GPU's properties (measured rates: the model's, the same GPU type)."""
    return {**model.device, **call.device.to_dict()}


def compile_in_parallel(
    call: GemmCall, configs: list[KernelConfig], pool=None, where: str | None = None
) -> list[KernelConfig]:
    """Compile and check `configs` (see the module docstring) on threads of this process or on processes (`where`,
    default AUTOHEUR_COMPILE_IN), the processes of a kept `pool` when given; the ones that passed."""
    where = where or compile_in()
    if where not in COMPILE_PLACES:
        raise ValueError(f"where={where!r}: expected one of {COMPILE_PLACES}")
    workers = compile_workers(len(configs), call.a.is_cuda and not interpreting())
    if workers == 1:
        return configs
    from autoheur.collect.precompile import precompile

    t0 = time.perf_counter()
    threads = where == "threads"
    pool = None if threads else pool
    # the call is valid: its problem's drawn inputs are padded where dense ones would not be (a padded view, a padded
    # gradient), or every candidate would fail the check
    problem = problem_of(call, padded=True)
    results = precompile(problem, configs, workers=workers, pool=pool, threads=threads, device=call.a.device)
    passed = [c for c, r in zip(configs, results, strict=True) if r.status == "ok"]
    for c, r in zip(configs, results, strict=True):
        if r.status != "ok":
            log.warning("autoheur: config %s dropped: %s %s", c.config_id, r.status, r.message[:200])
    log.info("autoheur: compiled %d configs on %d %s in %.2f s", len(configs), workers, where, time.perf_counter() - t0)
    if not passed:
        raise RuntimeError(f"none of the {len(configs)} candidate configs compiled and computed a correct result")
    return passed


def time_candidates(call: GemmCall, configs: list[KernelConfig], aten: bool = False) -> tuple[Choice, float]:
    """Compile (first launch) and time each config on the call's inputs, and torch._grouped_mm with `aten`; the
    fastest. Failures are skipped (ATen's too: a call it does not support)."""
    from autoheur.collect.timing import Timer, WallTimer
    from autoheur.kernels.grouped_gemm import launch

    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=call.a.device)
    fns = {}
    for cfg in configs:
        try:
            launch(call, cfg, out)  # compiles on first use
        except Exception as exc:  # a config that cannot run here is skipped, not fatal
            log.warning("autoheur: config %s failed on this call: %s", cfg.config_id, exc)
            continue
        fns[cfg.config_id] = lambda c=cfg: launch(call, c, out)
    if aten:
        try:
            aten_grouped_mm(call)
            fns[ATEN_ID] = lambda: aten_grouped_mm(call)
        except (RuntimeError, NotImplementedError, TypeError) as exc:  # a dtype or layout ATen does not take
            log.info("autoheur: torch._grouped_mm cannot run this call, not a candidate: %s", str(exc)[:200])
    if not fns:
        raise RuntimeError(f"none of the {len(configs)} candidate configs could run this call")
    gpu = call.a.is_cuda and not interpreting()
    timer = Timer(call.a.device) if gpu else WallTimer()
    # The one winner is cached for good, so an abort is confirmed: a stall during one run cannot rule the best out.
    timings = timer.screen(fns, reps=3, abort_factor=3.0, confirm_aborts=True)
    if gpu:  # in the interpreter the figures mean nothing, and more runs only cost time
        timings = settle_leaders(timer, fns, timings)
    best = min((t.median_ms, cid) for cid, t in timings.items() if not t.censored)
    return choice_from_id(best[1]), best[0]


def settle_leaders(
    timer, fns: dict, timings: dict, within: float = LEADERS_WITHIN, limit: int = LEADERS_MAX, reps: int = LEADER_ROUNDS
) -> dict:
    """The screen's leaders timed again: the fastest uncensored configs, at most `limit`, whose figure is within
    `within` of the best, each run once per round in a new shuffled order for `reps` rounds (`Timer.rounds`). Returns
    their timings alone, the winner to be picked among them: the settled figures and the screen's are taken under
    different conditions and are not compared. Fewer than two leaders: the screen's timings unchanged."""
    if within < 0 or limit < 1 or reps < 1:
        raise ValueError(f"within={within} must be >= 0, limit={limit} and reps={reps} >= 1")
    ranked = sorted((t.median_ms, name) for name, t in timings.items() if not t.censored)
    if not ranked:
        return timings
    line = ranked[0][0] * (1.0 + within)
    leaders = [name for ms, name in ranked[:limit] if ms <= line]
    if len(leaders) < 2:
        return timings
    settled = timer.rounds({name: fns[name] for name in leaders}, reps=reps)
    log.debug("autoheur: settled %s", {n: round(t.median_ms, 5) for n, t in settled.items()})
    return settled


def check_settings() -> None:
    """Every AUTOHEUR_* knob of the run time read once, so that a bad value is refused on a process's first call (and
    by `prepare`), not first when the path that reads it runs: a bad AUTOHEUR_TOP_K would otherwise pass every call
    whose key the disk cache already holds, and fail on the first new shape, in production. Each knob is still read
    where it is used (a test or a caller may change one between calls); SettingError names the first bad one."""
    from autoheur.models import artifact, forest

    for read in (tune_mode, top_k_setting, compile_in, pool_idle_seconds, aten_setting, forest.enabled,
                 artifact.borrow_enabled):  # fmt: skip
        read()
    _positive_int_env("AUTOHEUR_COMPILE_WORKERS", 1)
    for flag in ("AUTOHEUR_CACHE", "AUTOHEUR_CHECK_OFFSETS"):
        env_flag(flag, True)


_TUNER: Tuner | None = None


def default_tuner() -> Tuner:
    global _TUNER
    if _TUNER is None:
        check_settings()
        _TUNER = Tuner()
    return _TUNER
