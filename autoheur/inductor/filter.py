"""The choice filter Inductor calls before autotuning, and `enable()` / `disable()` to install it.

Decision, per autotuning call (one list of choices):
  - not a grouped-mm list (no `triton_grouped_mm_*` choice): untouched;
  - no model, a problem that cannot be read, a problem outside the model's training range by more than
    RANGE_MARGIN of a feature's span there, or k or fewer template choices: untouched (logged at INFO with the reason);
  - otherwise: every non-template choice (ATen and any other backend) in its place, plus the k template choices the
    model scores best (their order in the list kept), logged at INFO;
  - the filter itself raising (a model's ranker or range check failing): untouched, warned of once per filter.
Each decision is also kept in `ChoiceFilter.decisions` (what was kept and why), the latest MAX_DECISIONS of them: a
long-running process lowering ever new shapes would grow it without end (`dropped` counts the older ones let go).
Symbolic sizes (dynamic shapes: torch.compile recompiles so on a second row count) are read at Inductor's size hints,
at which Inductor itself benchmarks the choices and picks one kernel for every size. It skips its pruning by rows per
group then, so the model ranks only the choices a static shape of the hinted sizes is offered (Inductor's own pruning
called at the hints: the model's training distribution); where that pruning cannot be called, the list stays whole.
The model is anything with `ranker.rank(problem, configs, device) -> scores` and `device` (a `TrainedModel`); by
default the one shipped for this GPU's Inductor grid, `models/inductor-<device-slug>.joblib`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import warnings
import weakref
from pathlib import Path

from autoheur.inductor.choices import config_from_kwargs, read_choices, template_kwargs, tile_key

log = logging.getLogger("autoheur")

# How far outside its training range (a share of each problem feature's span in training) the model still narrows
# the list. Measured by benchmarks/extrapolation.py on the dev sets of both Inductor datasets, two seeds (BENCHMARKS.md,
# "The Inductor filter's range margin", stop 83; the rule fixed before the H100's figures were read: the widest bin
# whose best-of-10 geomean stays within 0.005 and P10 within 0.02 of the same model's inner GroupKFold, on both sets
# and seeds). Up to 0.02 of a span out: H100 0.982 / P10 0.969 (inner CV 0.956-0.967 / 0.900-0.964), H200 0.998-0.999
# / 0.996-0.999; 0.02-0.05 out the H100's seed 0 fell to 0.961 / 0.925, and 0.05-0.1 to 0.934-0.939 / 0.81-0.83.
RANGE_MARGIN = 0.02

# The most records a filter keeps in `decisions` (the latest; a record is a few hundred bytes). A model's compile lowers
# one list per grouped-mm shape (three a training step), so a compile's records fit; a process that keeps lowering new
# shapes (recompiles, dynamic sizes, many models) keeps its latest ones, and counts the rest in `dropped`.
MAX_DECISIONS = 1000


class ChoiceFilter:
    """Callable on Inductor's choice list; see the module docstring."""

    lists_seen = 0  # grouped_mm choice lists every filter of the process has seen (_Scope: did its block see one)

    def __init__(
        self,
        model=None,
        top_k: int = 10,
        device: dict | None = None,
        range_margin: float = RANGE_MARGIN,
        max_decisions: int = MAX_DECISIONS,
    ):
        """Arguments checked here, when `enable()` is called: a wrong one otherwise surfaced inside torch.compile's
        lowering (a path as the model, a device name), or filtered Inductor's grid with a model of another space."""
        from autoheur.device import DeviceSpec
        from autoheur.features.device import device_params
        from autoheur.models.artifact import TrainedModel, check_margin

        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise ValueError(f"top_k={top_k!r} must be a positive integer")
        if not isinstance(max_decisions, int) or isinstance(max_decisions, bool) or max_decisions < 1:
            raise ValueError(f"max_decisions={max_decisions!r} must be a positive integer")
        range_margin = check_margin(range_margin, "range_margin")
        if model is not None:
            if not callable(getattr(getattr(model, "ranker", None), "rank", None)):  # a TrainedModel, or its likes
                raise TypeError(f"model must be a TrainedModel (TrainedModel.load(path)) or None, got "
                                f"{type(model).__name__}")  # fmt: skip
            family = model.meta.get("family", "triton") if isinstance(model, TrainedModel) else "inductor"
            if family != "inductor":
                raise ValueError(f"model is of the {family!r} family: the filter ranks Inductor's template grid, so it "
                                 "takes an Inductor-grid model (models/inductor-<device-slug>.joblib)")  # fmt: skip
        if isinstance(device, DeviceSpec):
            device = device.to_dict()
        if device is not None and (not isinstance(device, dict) or not device):
            raise TypeError(f"device must be a DeviceSpec or its to_dict() (or None: the model's), got {device!r}")
        if device is not None and isinstance(model, TrainedModel):
            try:  # what its ranking reads of the device: else refused only inside torch.compile's lowering
                device_params(device)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"device {device!r} cannot be ranked on: {exc}") from None
        self.model, self.top_k, self.device, self.range_margin = model, top_k, device, range_margin
        # one record per grouped-mm list seen, what was kept and why: the latest max_decisions, `dropped` the older
        self.decisions: list[dict] = []
        self.max_decisions, self.dropped = max_decisions, 0
        self.failed = False  # the filter raised on a list (left whole): warned of once

    def __call__(self, choices: list) -> list:
        kwargs = [template_kwargs(c) for c in choices]
        templates = [(i, config_from_kwargs(kw)) for i, kw in enumerate(kwargs) if kw is not None]
        if not templates:
            return choices
        try:
            keep, why = self._select(choices, templates)
        except Exception as exc:  # a model or a choice this code does not expect: never an error inside torch.compile
            keep, why = list(range(len(choices))), f"filter failed ({type(exc).__name__}: {exc}): full list"
            if not self.failed:
                self.failed = True
                warnings.warn(
                    f"autoheur.inductor: the grouped_mm choice filter failed ({type(exc).__name__}: {exc}); Inductor "
                    "autotunes its whole choice list instead (each such list is logged at INFO, and in "
                    "ChoiceFilter.decisions)",
                    stacklevel=2,
                )
        record = {"choices": len(choices), "templates": len(templates), "kept": len(keep), "why": why}
        self.decisions.append(record)
        if len(self.decisions) > self.max_decisions:  # the oldest go (a list still: benchmarks write it as JSON)
            over = len(self.decisions) - self.max_decisions
            del self.decisions[:over]
            self.dropped += over
        ChoiceFilter.lists_seen += 1
        log.info("autoheur.inductor: grouped_mm: kept %d of %d choices (%s)", len(keep), len(choices), why)
        return [choices[i] for i in keep]

    def _select(self, choices, templates) -> tuple[list[int], str]:
        everything = list(range(len(choices)))
        if self.model is None:
            return everything, "no model for this GPU: full list"
        if len(templates) <= self.top_k:
            return everything, f"{len(templates)} template choices <= top_k={self.top_k}: full list"
        if any(cfg is None for _, cfg in templates):
            return everything, "a template choice could not be read: full list"
        template_ids = {i for i, _ in templates}  # every template choice: those not chosen below are dropped
        read = read_choices(choices)
        if read is None:
            return everything, "problem not readable: full list"
        problem, dynamic = read.problem, ""
        if read.symbolic:
            if read.static_offer is None:
                return everything, f"symbolic sizes ({', '.join(read.symbolic)}) and no static pruning: full list"
            offered = len(templates)
            templates = [(i, cfg) for i, cfg in templates if tile_key(cfg) in read.static_offer]
            if not templates:
                return everything, f"symbolic sizes ({', '.join(read.symbolic)}), none statically offered: full list"
            dynamic = (f"; symbolic {', '.join(read.symbolic)}: ranked at the size hints among the {len(templates)} "
                       f"of {offered} template choices a static shape of those sizes is offered")  # fmt: skip
        device = self.device or self.model.device
        extrapolation = getattr(self.model, "extrapolation", None)
        # a model of the older protocol, extrapolation(problem, device), is asked as before: no margin
        takes = extrapolation is not None and _takes_margin(extrapolation)
        if extrapolation is None:
            outside = []
        elif takes:
            outside = extrapolation(problem, device, margin=self.range_margin)
        else:
            outside = extrapolation(problem, device)
        if outside:
            ranges = any("(trained on " in why for why in outside)  # not only an operand layout never trained on
            by = f" by more than {self.range_margin:g} of a span" if takes and ranges else ""
            return everything, f"outside the model's training range{by} ({', '.join(outside[:3])}): full list"
        near = extrapolation(problem, device) if takes and self.range_margin else []
        scores = list(self.model.ranker.rank(problem, [cfg for _, cfg in templates], device))
        ranked = sorted(range(len(templates)), key=lambda j: -scores[j])[: self.top_k]
        chosen = {templates[j][0] for j in ranked}
        keep = [i for i in everything if i not in template_ids or i in chosen]
        return keep, f"model top-{self.top_k} of {len(templates)} template choices for {problem.layout} " + (
            f"g={problem.groups} n={problem.n} k={problem.k} rows={problem.total}"
        ) + (f"; within the range margin: {', '.join(near[:3])}" if near else "") + dynamic


def _takes_margin(extrapolation) -> bool:
    """Whether a model's `extrapolation` takes `margin=` (a TrainedModel's does; a stand-in's may not)."""
    try:
        params = inspect.signature(extrapolation).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): asked without one
        return False
    return any(p.kind is p.VAR_KEYWORD or (p.name == "margin" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
               for p in params)  # fmt: skip


def default_model(directory: Path | None = None):
    """The Inductor-grid model shipped for this GPU (`autoheur train` on a `--family inductor` dataset), or None."""
    from autoheur.device import current_device_spec
    from autoheur.models.artifact import model_for_device

    try:
        name = current_device_spec().name
    except Exception as exc:  # no GPU here
        log.info("autoheur.inductor: no device to pick a model for (%s)", exc)
        return None
    model, how = model_for_device(name, Path(directory) if directory else None, family="inductor")
    log.info("autoheur.inductor: %s", how)
    return model


_ACTIVE: list[ChoiceFilter] = []
# enable()'s filters not yet removed, the installed one last, each with its block (a weak reference: an enable() without
# `with` drops it, and nothing below its filter can come back then). A block's exit takes its own out, wherever it is,
# and installs the one left last if its own was installed: blocks of several threads need not nest.
_STACK: list[tuple[ChoiceFilter, weakref.ref]] = []
# Inductor's hook list, _ACTIVE and _STACK change together under it: enable(), disable() and a block's exit each read,
# remove and install as one step. Without it, threads enabling and disabling at once left two filters installed, or
# none (the one a block replaced lost), or a block's filter installed after its exit.
_LOCK = threading.Lock()


def registry(attr: str = "preprocessing_fns") -> list | None:
    """One of Inductor's hook lists (`preprocessing_fns`, `feedback_saver_fns`) on its global AlgorithmSelectorCache,
    or None where this torch keeps them elsewhere."""
    from torch._inductor import select_algorithm as sa

    get = getattr(sa, "get_algorithm_selector_cache", None)
    cache = get() if get is not None else getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None)
    fns = getattr(cache, attr, None)
    return fns if isinstance(fns, list) else None


def installed() -> list[ChoiceFilter]:
    """The choice filters Inductor calls now: `enable()`'s, or one added to its hook by hand (where the hook list
    cannot be read, enable()'s). A collection of Inductor's timings refuses to run under one (inductor/collect.py)."""
    with _LOCK:
        fns = registry()
        return list(_ACTIVE) if fns is None else [f for f in fns if isinstance(f, ChoiceFilter)]


def enable(
    model=None, top_k: int = 10, device: dict | None = None, range_margin: float = RANGE_MARGIN
) -> contextlib.AbstractContextManager:
    """Install the filter (replacing one installed before); usable as a context manager whose exit removes it and
    puts back the filter it replaced, if any (an `enable()` without `with` stays until `disable()`, a block inside its
    reach too). It acts while Inductor lowers a graph: torch.compile does that on a function's first call (or a
    recompile), not where the function is wrapped, so with `with` make that call inside the block. Thread-safe: the
    hook is swapped under a lock, and once the blocks of several threads (which need not nest) have all exited, the
    filter installed before them is back. Inductor's hook is one for the process: inside them, the latest one acts."""
    if model is None:
        model = default_model()
        if model is None:
            warnings.warn(
                "autoheur.inductor: no Inductor-grid model for this GPU (models/inductor-<device-slug>.joblib): "
                "Inductor's grouped_mm choices are left whole",
                stacklevel=2,
            )
    # its arguments checked before the filter installed now is removed
    flt = ChoiceFilter(model, top_k, device, range_margin)
    scope = _Scope(flt)
    with _LOCK:
        dropped = [i for i, (_, block) in enumerate(_STACK) if block() is None]  # enable()s without `with`
        del _STACK[: dropped[-1] if dropped else 0]  # the latest stays until disable(): none below it comes back
        _uninstall()
        _STACK.append((flt, weakref.ref(scope)))
        _install(flt)
    return scope


def _install(flt: ChoiceFilter) -> None:
    from torch._inductor import select_algorithm as sa

    sa.add_preprocessing_fn(flt)
    _ACTIVE.append(flt)


def disable() -> None:
    """Remove the filter if installed; other preprocessing functions stay."""
    with _LOCK:
        _STACK.clear()
        _uninstall()


def _uninstall() -> None:
    fns = registry()
    while _ACTIVE:
        flt = _ACTIVE.pop()
        if fns is not None and flt in fns:
            fns.remove(flt)
        elif fns is None:  # an Inductor without a reachable list: clear user functions (its defaults come back)
            from torch._inductor import select_algorithm as sa

            sa.clear_preprocessing_fns()


class _Scope(contextlib.AbstractContextManager):
    """`enable()`'s block: its exit removes the block's filter and puts back the one it replaced. Where the block's
    filter is no longer the installed one (a `disable()` or another `enable()` without `with` inside the block), the
    exit leaves what is installed as it is. Before, the exit removed whatever filter was installed: a block inside the
    reach of an `enable()` without `with` left no filter after it. What it puts back is the latest filter enabled and
    not removed since (_STACK): with blocks of two threads that do not nest (A enters, B enters, A exits, B exits), B's
    exit put back A's filter, left installed after A's block."""

    def __init__(self, flt: ChoiceFilter):
        self.filter = flt
        self.lists_before = ChoiceFilter.lists_seen

    def __exit__(self, exc_type, *exc) -> None:
        with _LOCK:
            mine = [i for i, (flt, _) in enumerate(_STACK) if flt is self.filter]
            if mine:  # else removed by a disable() since
                del _STACK[mine[0]]
            if _ACTIVE and _ACTIVE[-1] is self.filter:
                _uninstall()
                if _STACK:
                    _install(_STACK[-1][0])
        seen = ChoiceFilter.lists_seen > self.lists_before  # by this block's filter or one of a block inside it
        if exc_type is None and not seen:  # the README's first example did this, and filtered nothing
            warnings.warn(
                "autoheur.inductor.enable(): no grouped_mm choice list reached the filter in this block, so it "
                "narrowed nothing. torch.compile compiles on a function's first call, not where it is wrapped: make "
                "that call inside the block, or call enable() without `with`. (A graph without grouped_mm, or one "
                "served from Inductor's caches, is lowered with no choice list: then this is expected.)",
                stacklevel=2,
            )
