"""The Inductor choice filter on real choice lists: Inductor's own grouped_mm lowering (torch on this CPU machine),
told it runs on a Hopper GPU, builds its real TritonTemplateCaller choices; the filter reads and narrows them. The
Triton choices are then dropped before Inductor would compile them (there is no GPU here), so ATen runs."""

from __future__ import annotations

import warnings

import pytest
import torch

from autoheur.inductor import ChoiceFilter, disable, enable, grid_configs, inductor_problem, template_config
from autoheur.inductor.choices import ChoicesRead, even_split, tile_key

from .conftest import Recorder, compile_and_run, preprocessing

sa = pytest.importorskip("torch._inductor.select_algorithm")


class ScoreByTile:
    """A stand-in model: prefers big tiles (deterministic, so the kept set is known)."""

    device = {"name": "test"}

    class ranker:  # noqa: N801
        @staticmethod
        def rank(problem, configs, device):
            return [c.block_m * 1000 + c.block_n + c.block_k / 1000 + c.num_stages / 1e4 for c in configs]

    @staticmethod
    def extrapolation(problem, device, margin=0.0):
        return []


def test_real_choices_are_read(hopper):
    rec = Recorder()
    compile_and_run(rec)
    (choices,) = rec.lists
    templates = [c for c in choices if c.name.startswith("triton_grouped_mm_")]
    assert len(choices) - len(templates) == 1 and choices[0].name == "_grouped_mm"  # the ATen choice
    configs = [template_config(c) for c in templates]
    assert all(c is not None for c in configs)
    assert set(configs) <= set(grid_configs()) and len(grid_configs()) == 144
    assert len(set(configs)) == len(configs)
    assert min(c.block_m for c in configs) == 64  # 128 rows per group: Inductor prunes BLOCK_M <= 32
    problem = rec.problems[0]
    assert (problem.layout, problem.groups, problem.sizes, problem.n, problem.k) == ("2d3d", 4, (128,) * 4, 512, 256)
    assert (problem.dtype, problem.b_major, problem.a_major) == ("bfloat16", "k", "k")


def test_filter_keeps_aten_and_the_top_k(hopper):
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no grouped_mm choice list")  # it filtered: nothing to warn of
        with enable(model=ScoreByTile(), top_k=5) as scope:
            compile_and_run(rec)
    (kept,) = rec.lists
    assert kept[0].name == "_grouped_mm" and len(kept) == 6
    tiles = sorted((template_config(c).block_m, template_config(c).block_n) for c in kept[1:])
    # the five best-scored: all four 128x256 tiles that fit in shared memory (BLOCK_K 64, 3 or 4 stages, 4 or 8 warps),
    # then the best 128x128 one
    assert tiles.count((128, 256)) == 4 and tiles.count((128, 128)) == 1
    assert scope.filter.decisions[0]["kept"] == 6 and "model top-5" in scope.filter.decisions[0]["why"]
    assert scope.filter not in sa.get_algorithm_selector_cache().preprocessing_fns  # removed on exit


def test_a_block_that_lowers_no_grouped_mm_says_it_narrowed_nothing(hopper):
    """torch.compile is lazy: a function wrapped inside the block and first called after it is lowered with the
    filter gone (the README's example did that). The block's exit says so; an exception inside it is left alone."""
    with pytest.warns(UserWarning, match="no grouped_mm choice list reached the filter in this block"):
        with enable(model=ScoreByTile(), top_k=5):
            pass
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no grouped_mm choice list")
        with pytest.raises(KeyError), enable(model=ScoreByTile(), top_k=5):
            raise KeyError("a failure inside the block")


def test_a_block_puts_back_the_filter_it_replaced(hopper):
    """An `enable()` without `with` stays until `disable()` (README): a `with enable(...)` block inside its reach
    removed every filter on exit, so the first one was gone after the block. Now the exit puts back the one the block
    replaced, and an outer block whose inner block saw the lists does not warn that it narrowed nothing."""
    from autoheur.inductor import filter as filt

    fns = sa.get_algorithm_selector_cache().preprocessing_fns
    try:
        outer = enable(model=ScoreByTile(), top_k=5).filter
        with enable(model=ScoreByTile(), top_k=3) as inner:
            assert filt._ACTIVE == [inner.filter] and outer not in fns
        assert filt._ACTIVE == [outer] and outer in fns and inner.filter not in fns
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*no grouped_mm choice list")  # the inner block filtered
            with enable(model=ScoreByTile(), top_k=5) as mid:
                with enable(model=ScoreByTile(), top_k=4) as innermost:
                    compile_and_run(Recorder())
        assert innermost.filter.decisions and not mid.filter.decisions
        assert filt._ACTIVE == [outer]
        with enable(model=ScoreByTile(), top_k=5):  # a disable() inside the block: nothing comes back at its exit
            disable()
        assert filt._ACTIVE == [] and not any(isinstance(f, ChoiceFilter) for f in fns)
    finally:
        disable()


def test_blocks_of_two_threads_that_do_not_nest_put_back_the_filter_before_them():
    """Two threads' blocks can exit in the order they entered (A enters, B enters, A exits, B exits): B's exit put
    back the filter B replaced, A's, left installed after A's block. Now it puts back the latest filter enabled and not
    removed since: the one before both blocks. (Filters of enable()s without `with` are not kept to come back.)"""
    from autoheur.inductor import filter as filt

    fns = sa.get_algorithm_selector_cache().preprocessing_fns
    try:
        outer = enable(model=ScoreByTile(), top_k=5).filter
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no choice list reaches the blocks
            a = enable(model=ScoreByTile(), top_k=3)
            b = enable(model=ScoreByTile(), top_k=4)
            a.__exit__(None, None, None)
            assert filt._ACTIVE == [b.filter] and b.filter in fns and a.filter not in fns
            b.__exit__(None, None, None)
        assert filt._ACTIVE == [outer] and [f for f in fns if isinstance(f, ChoiceFilter)] == [outer]
        for _ in range(10):  # without `with`: each replaces the last for good, which is not kept to come back
            enable(model=ScoreByTile(), top_k=5)
        assert len(filt._STACK) <= 2
    finally:
        disable()


def test_enable_and_disable_from_threads_leave_the_hook_as_it_was(monkeypatch):
    """enable(), disable() and a block's exit read Inductor's hook list and then change it: threads doing so at once
    (a thread switch between the two, made likely here by hooks that sleep) left two filters installed, or a block's
    filter after its exit instead of the one the blocks replaced. Each is one step under a lock now."""
    import threading
    import time

    from autoheur.inductor import filter as filt

    def slowly(fn):
        def slow(*args):
            time.sleep(0.0002)
            return fn(*args)

        return slow

    monkeypatch.setattr(filt, "registry", slowly(filt.registry))
    monkeypatch.setattr(sa, "add_preprocessing_fn", slowly(sa.add_preprocessing_fn))
    fns = sa.get_algorithm_selector_cache().preprocessing_fns
    errors = []

    def run_in_threads(work) -> None:
        def target():
            try:
                for _ in range(25):
                    work()
            except Exception as exc:  # noqa: BLE001 (reported below, in the test's thread)
                errors.append(exc)

        threads = [threading.Thread(target=target) for _ in range(8)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no choice list reaches the blocks
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def block():
        with enable(model=ScoreByTile(), top_k=3):
            time.sleep(0)

    def toggle():
        enable(model=ScoreByTile(), top_k=3)
        disable()
        enable(model=ScoreByTile(), top_k=3)

    try:
        outer = enable(model=ScoreByTile(), top_k=5).filter
        run_in_threads(block)
        assert not errors and filt._ACTIVE == [outer]
        assert [f for f in fns if isinstance(f, ChoiceFilter)] == [outer]
        run_in_threads(toggle)
        installed = [f for f in fns if isinstance(f, ChoiceFilter)]
        assert not errors and len(installed) == 1 and installed == filt._ACTIVE  # replaced, never stacked
        disable()
        assert not any(isinstance(f, ChoiceFilter) for f in fns) and filt._ACTIVE == []
    finally:
        disable()


def lowered_with(flt: ChoiceFilter) -> Recorder:
    """The test block lowered with `flt` installed alone (no enable(): a filter built here), then removed."""
    rec = Recorder()
    sa.add_preprocessing_fn(flt)
    try:
        compile_and_run(rec)
    finally:
        sa.get_algorithm_selector_cache().preprocessing_fns.remove(flt)
    return rec


@pytest.mark.parametrize("case", ["no model", "outside range", "few choices"])
def test_filter_leaves_the_list_whole_when_unsure(hopper, case):
    model = None if case == "no model" else ScoreByTile()
    if case == "outside range":
        model.extrapolation = lambda p, d, margin=0.0: ["k=256 (trained on 1024..8192)"]
    flt = ChoiceFilter(model, top_k=200 if case == "few choices" else 5)
    rec = lowered_with(flt)
    assert len(rec.lists[0]) == flt.decisions[0]["choices"] > 6 and "full list" in flt.decisions[0]["why"]


@pytest.mark.parametrize("margin", [0.0, 0.05, 0.2])
def test_a_problem_just_outside_the_range_is_narrowed_within_the_margin(hopper, margin):
    """The filter asks the model for the features outside its range by more than `range_margin` of their span: a
    problem 0.1 of a span out is narrowed under a margin of 0.2 (its log line names the feature), and gets the full
    list under 0.05 or none (stop 82's mixtral-8x7b gate/up on an H200 was 0.001 of a span out and kept all 41)."""
    model = ScoreByTile()
    model.extrapolation = lambda p, d, margin=0.0: [] if margin >= 0.1 else ["log2_call_k=8 (trained on 1..7)"]
    flt = ChoiceFilter(model, top_k=5, range_margin=margin)
    rec = lowered_with(flt)
    (why,) = [d["why"] for d in flt.decisions]
    if margin >= 0.1:
        assert len(rec.lists[0]) == 6 and why.endswith("; within the range margin: log2_call_k=8 (trained on 1..7)")
    else:
        assert len(rec.lists[0]) > 6 and f"by more than {margin:g} of a span (log2_call_k=8" in why


@pytest.mark.parametrize("outside", [False, True])
def test_a_model_whose_extrapolation_takes_no_margin_still_filters(hopper, outside):
    """A model of the older protocol, `extrapolation(problem, device)` (as the run-time tuner calls it), raised a
    TypeError inside Inductor's lowering once the filter passed `margin=`: it is asked without one (no margin), as
    before."""
    model = ScoreByTile()
    model.extrapolation = lambda p, d: ["log2_call_k=8 (trained on 1..7)"] if outside else []
    flt = ChoiceFilter(model, top_k=5)
    rec = lowered_with(flt)
    (why,) = [d["why"] for d in flt.decisions]
    if outside:
        assert len(rec.lists[0]) > 6
        assert why == "outside the model's training range (log2_call_k=8 (trained on 1..7)): full list"
    else:
        assert len(rec.lists[0]) == 6 and "within the range margin" not in why


def test_a_filter_that_raises_leaves_the_list_whole_and_warns_once(hopper):
    """A model whose ranking raises (or a range check that does) failed the user's torch.compile with an InductorError
    from inside the lowering: the list is left whole, the compile goes on, and it is warned of once per filter."""

    def boom(problem, configs, device):
        raise RuntimeError("a broken ranker")

    model = ScoreByTile()
    model.ranker = type("Ranker", (), {"rank": staticmethod(boom)})
    flt = ChoiceFilter(model, top_k=5)
    with pytest.warns(UserWarning, match="filter failed \\(RuntimeError: a broken ranker\\)") as w:
        first = lowered_with(flt)
        torch._dynamo.reset()  # lowered again, not served from dynamo's cache
        second = lowered_with(flt)
    assert sum("filter failed" in str(x.message) for x in w) == 1
    assert len(first.lists[0]) == len(second.lists[0]) == flt.decisions[0]["choices"] > 6
    assert [d["why"] for d in flt.decisions] == ["filter failed (RuntimeError: a broken ranker): full list"] * 2


def test_an_operand_layout_never_trained_on_is_not_said_to_be_past_a_margin(hopper):
    """The margin is of a range; a layout the model never saw is outside at any margin, and said so plainly."""
    model = ScoreByTile()
    layout = "2d3d bfloat16 with A k-major and B n-major (never trained on this operand layout)"
    model.extrapolation = lambda p, d, margin=0.0: [layout]
    flt = ChoiceFilter(model, top_k=5)
    lowered_with(flt)
    assert flt.decisions[0]["why"] == f"outside the model's training range ({layout}): full list"


@pytest.mark.parametrize("margin", [-0.1, float("nan"), float("inf"), True, "0.1"])
def test_a_bad_range_margin_is_refused(margin):
    with pytest.raises(ValueError, match=r"^range_margin=.*: expected a share"):
        ChoiceFilter(ScoreByTile(), range_margin=margin)
    with pytest.raises(ValueError, match=r"^range_margin="):
        enable(model=ScoreByTile(), range_margin=margin)


@pytest.mark.parametrize("gpu", ["H100_SXM", "H200"])
def test_the_shipped_model_narrows_real_choices(hopper, monkeypatch, gpu):
    """enable() with no model argument loads the shipped Inductor-grid model of the GPU (the H100 and H200 presets
    here: each has its own since stop 75), which ranks the real choices: ATen plus its top 10 of the template grid go
    on to be benchmarked. The device is pinned to a preset, a GPU a model is shipped for."""
    import autoheur.device

    spec = getattr(autoheur.device, gpu)
    monkeypatch.setattr(autoheur.device, "current_device_spec", lambda: spec)
    rec = Recorder()
    with enable() as scope:
        compile_and_run(rec)
    (kept,) = rec.lists
    assert scope.filter.model is not None and scope.filter.model.meta["family"] == "inductor"
    assert scope.filter.model.device["name"] == spec.name  # this GPU's own model, not another's
    assert kept[0].name == "_grouped_mm" and len(kept) == 11
    assert "model top-10" in scope.filter.decisions[0]["why"] and scope.filter.decisions[0]["choices"] > 11


def _training_step_lists(rec) -> None:
    """A compiled training step of one MoE grouped mm (x [512, 256] by W [4, 384, 256] used transposed): its forward
    and the two grouped mms of torch's autograd in the backward, each a list of choices Inductor lowers."""
    import torch

    with preprocessing(rec):
        x = torch.randn(512, 256, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(4, 384, 256, dtype=torch.bfloat16, requires_grad=True)
        offs = torch.arange(1, 5, dtype=torch.int32) * 128
        y = torch.compile(lambda x, w, o: torch._grouped_mm(x, w.transpose(-2, -1), o), fullgraph=True)(x, w, offs)
        y.backward(torch.ones_like(y))
        assert x.grad is not None and w.grad is not None


@pytest.mark.parametrize("gpu", ["H100_SXM", "H200"])
def test_a_compiled_training_steps_backward_is_narrowed_where_the_model_has_its_layouts(hopper, monkeypatch, gpu):
    """The backward's two grouped mms (dx: 2D x 3D, W N-contiguous; dW: 2D x 2D, A column-major) are the problems of
    `collect --workload aten_backward`. The H200's shipped model has them (stop 85) and narrows all three lists of a
    training step to ATen plus its top 10; the H100's knows only the forward and leaves the backward's lists whole,
    saying it never trained on their operand layouts."""
    import autoheur.device

    spec = getattr(autoheur.device, gpu)
    monkeypatch.setattr(autoheur.device, "current_device_spec", lambda: spec)
    rec = Recorder()
    with enable() as scope:
        _training_step_lists(rec)
    kinds = [(p.layout, p.a_major, p.b_major) for p in rec.problems]
    assert sorted(kinds) == [("2d2d", "m", "n"), ("2d3d", "k", "k"), ("2d3d", "k", "n")]
    decisions = scope.filter.decisions
    assert len(decisions) == 3 and all(d["choices"] > 11 for d in decisions)
    narrowed = [len(kept) == 11 and kept[0].name == "_grouped_mm" for kept in rec.lists]
    if gpu == "H200":
        assert all(narrowed) and all("model top-10" in d["why"] for d in decisions)
    else:
        assert narrowed == [kind == ("2d3d", "k", "k") for kind in kinds]
        whole = [d["why"] for d, kind in zip(decisions, kinds, strict=True) if kind != ("2d3d", "k", "k")]
        assert all("never trained on this operand layout" in why and why.endswith("full list") for why in whole)


class ScoreSmallTiles(ScoreByTile):
    """A stand-in model that prefers the smallest BLOCK_M: tiles Inductor prunes for many rows per group."""

    class ranker:  # noqa: N801
        @staticmethod
        def rank(problem, configs, device):
            return [-c.block_m * 1000 - c.block_n - c.num_stages / 10 - c.num_warps / 100 for c in configs]


def _lowered_at(rows: list[int], flt: ChoiceFilter | None, mark_dynamic: bool = False) -> Recorder:
    """One compiled grouped_mm called at each row count in turn (torch.compile's default automatic dynamic: the second
    size recompiles with a symbolic row count, the third reuses it), with `flt` installed if given."""
    import torch

    torch._dynamo.reset()  # a fresh start: dynamo remembers the sizes an earlier compile of this code saw
    rec = Recorder()
    with preprocessing(flt, rec):
        fn = torch.compile(lambda a, b, o: torch._grouped_mm(a, b, o), fullgraph=True)
        b = torch.randn(4, 512, 256, dtype=torch.bfloat16).transpose(-2, -1)
        for r in rows:
            a = torch.randn(r, 256, dtype=torch.bfloat16)
            if mark_dynamic:
                torch._dynamo.mark_dynamic(a, 0)
            offs = torch.arange(1, 5, dtype=torch.int32) * (r // 4)
            torch.testing.assert_close(fn(a, b, offs), torch._grouped_mm(a, b, offs))
    return rec


def test_a_dynamic_recompile_is_narrowed_among_what_a_static_shape_is_offered(hopper):
    """torch.compile's recompile on a second row count makes the rows symbolic: Inductor then skips its pruning by rows
    per group (94 template choices where 1,024 rows in 4 groups get 40) and benchmarks all at the size hints. The
    filter ranks at those hints too, among the choices a static shape of that size is offered (the model's training
    distribution), so a model fond of small tiles cannot pick one Inductor would never offer there; a third size
    compiles nothing."""
    (static,) = _lowered_at([1024], None).lists
    offered = {tile_key(template_config(c)) for c in static if template_config(c) is not None}
    flt = ChoiceFilter(ScoreSmallTiles(), top_k=5)
    rec = _lowered_at([512, 1024, 2048], flt)
    assert len(rec.lists) == 2 and len(flt.decisions) == 2  # the first size, then the recompile; none for 2048
    dynamic, decision = rec.lists[1], flt.decisions[1]
    assert decision["templates"] == 94 > len(offered) == 40 and decision["kept"] == len(dynamic) == 6
    kept = [tile_key(template_config(c)) for c in dynamic if template_config(c) is not None]
    assert len(kept) == 5 and set(kept) <= offered and min(k[0] for k in kept) == 64
    assert "symbolic A.size[0]: ranked at the size hints among the 40 of 94" in decision["why"]
    assert "rows=1024" in decision["why"] and dynamic[0].name == "_grouped_mm"


def test_a_dynamic_list_without_inductors_static_pruning_stays_whole(hopper, monkeypatch):
    """Where this torch's pruning cannot be called at the hints (another signature, other kwargs), the filter cannot
    tell which choices a static shape gets: the symbolic list is left whole, and says why."""
    from autoheur.inductor import choices

    assert choices.static_offer(4, 1024, 2, {"A_IS_2D": "True"}) is None  # no B_IS_2D: not callable so
    assert len(choices.static_offer(4, 1024, 2, {"A_IS_2D": "True", "B_IS_2D": "False"})) == 40
    monkeypatch.setattr(choices, "static_offer", lambda *args: None)
    flt = ChoiceFilter(ScoreSmallTiles(), top_k=5)
    rec = _lowered_at([64], flt, mark_dynamic=True)
    (decision,) = flt.decisions
    assert len(rec.lists[0]) == decision["choices"] == 95
    assert decision["why"] == "symbolic sizes (A.size[0]) and no static pruning: full list"


def test_enable_without_a_model_warns_and_disable_removes_only_ours(hopper, tmp_path, monkeypatch):
    from autoheur.models import artifact

    monkeypatch.setattr(artifact, "MODELS_DIR", tmp_path)  # a GPU with no shipped Inductor-grid model
    other = lambda choices: choices  # noqa: E731
    sa.add_preprocessing_fn(other)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        enable()
        enable()  # replaces, never stacks
    fns = sa.get_algorithm_selector_cache().preprocessing_fns
    assert sum(isinstance(f, ChoiceFilter) for f in fns) == 1
    assert any("no Inductor-grid model" in str(x.message) for x in w)
    disable()
    assert not any(isinstance(f, ChoiceFilter) for f in fns) and other in fns
    fns.remove(other)
    with pytest.raises(ValueError, match="top_k"):
        ChoiceFilter(None, top_k=0)


def test_problem_mirrors_inductors_benchmark_offsets():
    assert even_split(100, 3, 8) == (32, 32, 36)  # ends 33.3 -> 32, 66.7 -> 64, then 100
    assert even_split(7, 1, 8) == (7,)
    # an end rounded past the total (44.06 -> 48 > 47; Inductor's last sizes 8, -1): clamped to 7, 0, the same tiles
    assert even_split(47, 16, 8)[-3:] == (0, 7, 0) and sum(even_split(47, 16, 8)) == 47
    p = inductor_problem((300, 64), (64, 1), (8, 64, 96), (6144, 1, 64), 8, "float16")
    assert p.layout == "2d3d" and sum(p.sizes) == 300 and p.b_major == "k" and p.groups == 8
    p = inductor_problem((64, 300), (1, 64), (300, 96), (96, 1), 4, "bfloat16")  # weight gradient: ragged K
    assert (p.layout, p.groups, sum(p.sizes), p.m, p.n, p.k) == ("2d2d", 4, 300, 64, 96, 0)
    assert p.a_major == "m" and p.b_major == "n"


def _described_choices(unreadable: bool = False) -> list:
    """An ATen choice and four template choices as Inductor describes them (name, description), without Inductor;
    `unreadable`: the third lacks BLOCK_N and BLOCK_K, as a template revision with other arguments would."""
    from types import SimpleNamespace

    out = [SimpleNamespace(name="_grouped_mm", description="aten")]
    for i, (bm, bn) in enumerate([(64, 64), (64, 128), (128, 128), (128, 256)]):
        text = f"BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K=64, num_stages=3, num_warps=4"
        if unreadable and i == 2:
            text = "BLOCK_M=64, num_stages=3"
        out.append(SimpleNamespace(name=f"triton_grouped_mm_{i}", description=text))
    return out


class _RecordsDevice(ScoreByTile):
    def __init__(self):
        self.seen = []

    @property
    def ranker(self):
        outer = self

        class Ranker:
            @staticmethod
            def rank(problem, configs, device):
                outer.seen.append(device["name"])
                return [c.block_m * 1000 + c.block_n for c in configs]

        return Ranker


def test_an_unreadable_template_choice_or_problem_leaves_the_list_whole(monkeypatch):
    """A choice the filter cannot read, or a problem it cannot (an IR it does not know), leaves Inductor's list whole:
    never an error inside torch.compile, never a guess. (Symbolic sizes are read at their hints: the dynamic tests.)"""
    from autoheur.inductor import filter as filt
    from autoheur.problem import Problem

    read = ChoicesRead(Problem("2d3d", 4, (128,) * 4, 0, 512, 256))
    monkeypatch.setattr(filt, "read_choices", lambda choices: read)
    flt = ChoiceFilter(ScoreByTile(), top_k=2)
    choices = _described_choices(unreadable=True)
    assert flt(choices) == choices and "could not be read" in flt.decisions[-1]["why"]
    monkeypatch.setattr(filt, "read_choices", lambda choices: None)
    choices = _described_choices()
    assert flt(choices) == choices and "not readable" in flt.decisions[-1]["why"]


def test_a_filter_keeps_its_latest_decisions_only():
    """`decisions` took one record per grouped-mm list the filter saw, with no end, in a process that keeps lowering
    new shapes: it keeps the latest max_decisions (MAX_DECISIONS unless given), still a list, and counts the rest."""
    import json

    from autoheur.inductor import filter as filt

    flt = ChoiceFilter(None)  # no model: every list left whole, and recorded
    for _ in range(1005):
        flt(_described_choices())
    assert len(flt.decisions) == 1000
    assert flt.max_decisions == filt.MAX_DECISIONS == 1000 and flt.dropped == 5
    flt = ChoiceFilter(None, max_decisions=3)
    for n in (2, 3, 4, 5, 2, 3):  # told apart by their number of choices
        flt(_described_choices()[:n])
    assert [d["choices"] for d in flt.decisions] == [5, 2, 3] and flt.dropped == 3
    assert isinstance(flt.decisions, list) and json.loads(json.dumps(flt.decisions)) == flt.decisions
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="max_decisions="):
            ChoiceFilter(None, max_decisions=bad)


def test_the_filters_device_is_the_one_scored_on(monkeypatch):
    from autoheur.inductor import filter as filt
    from autoheur.problem import Problem

    read = ChoicesRead(Problem("2d3d", 4, (128,) * 4, 0, 512, 256))
    monkeypatch.setattr(filt, "read_choices", lambda choices: read)
    model = _RecordsDevice()
    kept = ChoiceFilter(model, top_k=2, device={"name": "this-gpu"})(_described_choices())
    assert model.seen == ["this-gpu"]
    assert [c.name for c in kept] == ["_grouped_mm", "triton_grouped_mm_2", "triton_grouped_mm_3"]


def test_enable_refuses_a_wrong_model_or_device_at_once():
    """A path as the model, a Triton-space model, a device name: refused when the filter is made (enable()), not
    inside torch.compile's lowering, nor used to filter Inductor's grid with another space's ranking."""
    from autoheur.device import H100_SXM
    from autoheur.models.artifact import MODELS_DIR, TrainedModel

    with pytest.raises(TypeError, match="model must be a TrainedModel"):
        ChoiceFilter(str(MODELS_DIR / "inductor-nvidia-h100-80gb-hbm3.joblib"))
    with pytest.raises(TypeError, match="got int"):
        ChoiceFilter(42)
    with pytest.raises(ValueError, match="model is of the 'triton' family"):
        ChoiceFilter(TrainedModel.load(MODELS_DIR / "nvidia-h200.joblib"))
    inductor = TrainedModel.load(MODELS_DIR / "inductor-nvidia-h100-80gb-hbm3.joblib")
    for device in ("h100", {}):
        with pytest.raises(TypeError, match="device must be a DeviceSpec"):
            ChoiceFilter(inductor, device=device)
    # a device without the fields the ranking reads: refused here, not at each grouped_mm list's ranking
    with pytest.raises(ValueError, match="cannot be ranked on: device mapping lacks \\['sm_count'"):
        ChoiceFilter(inductor, device={"name": "NVIDIA H100 80GB HBM3"})
    with pytest.raises(ValueError, match="cannot be ranked on: invalid literal"):
        ChoiceFilter(inductor, device={**H100_SXM.to_dict(), "sm_count": "many"})
    with pytest.raises(ValueError, match="top_k=True"):
        ChoiceFilter(inductor, top_k=True)
    assert ChoiceFilter(inductor, device=H100_SXM).device == H100_SXM.to_dict()


def test_a_refused_enable_keeps_the_filter_installed():
    from autoheur.inductor import filter as filt
    from autoheur.models.artifact import MODELS_DIR, TrainedModel

    inductor = TrainedModel.load(MODELS_DIR / "inductor-nvidia-h100-80gb-hbm3.joblib")
    try:
        scope = filt.enable(inductor)
        with pytest.raises(TypeError):
            filt.enable("a path")
        assert filt._ACTIVE == [scope.filter]
    finally:
        filt.disable()
