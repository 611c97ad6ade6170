"""Workloads: routing, the public-model problems, sampled problems and the deterministic collection list (CPU only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autoheur.collect import workloads
from autoheur.collect.schema import problem_id
from autoheur.collect.workloads import (
    LAYOUT_NAMES,
    MAX_BYTES,
    MAX_MODEL_ROOFLINE_MS,
    MAX_ROOFLINE_MS,
    MAX_ROWS,
    ROUTINGS,
    WORKLOADS,
    aten_backward_problems,
    aten_gradient_problems,
    backward_problems,
    distribute_rows,
    gradient_problems,
    load_models,
    model_grid,
    model_problem,
    model_problems,
    public_problems,
    roofline_ms,
    route_tokens,
    sampled_grad_a_problems,
    sampled_problems,
    workload,
)
from autoheur.kernels.validate import validate
from autoheur.problem import Problem
from tests.conftest import DEVICE

TOY = {
    "models": {
        "toy": {
            "hidden": 256,
            "expert_intermediate": 512,
            "experts": 8,
            "top_k": 2,
            "typical_ep": [2, 3],
            "typical_tp": [2],
        },
        "wide": {"hidden": 512, "expert_intermediate": 128, "experts": 4, "top_k": 1},
    },
    "token_counts": [1, 16, 256],
}


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- routing ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize(
    ("tokens", "experts", "top_k"),
    [(0, 8, 2), (1, 8, 2), (5, 64, 8), (300, 16, 4), (1000, 2, 2), (1000, 4, 3), (7, 8, 8), (20000, 8, 1)],
)
def test_route_tokens_sum_and_cap(routing, tokens, experts, top_k):
    sizes = route_tokens(tokens, experts, top_k, routing, gen(1))
    assert len(sizes) == experts
    assert sum(sizes) == tokens * top_k
    assert all(0 <= s <= tokens for s in sizes)  # distinct picks: at most one row per token per expert
    if top_k == experts:
        assert sizes == (tokens,) * experts
    assert route_tokens(tokens, experts, top_k, routing, gen(1)) == sizes


def test_route_tokens_spans_chunks():
    sizes = route_tokens(8192 * 2 + 5, 16, 2, "uniform", gen())
    assert sum(sizes) == (8192 * 2 + 5) * 2


def test_zipf_leaves_groups_empty_at_small_token_counts():
    empty = [min(route_tokens(16, 32, 1, "zipf", gen(s))) == 0 for s in range(8)]
    assert any(empty)
    # skewed: the busiest expert gets far more than the mean at large counts
    sizes = route_tokens(20000, 32, 1, "zipf", gen(0), zipf_s=1.2)
    assert max(sizes) > 4 * 20000 / 32


def test_uniform_is_roughly_balanced_at_large_counts():
    sizes = route_tokens(20000, 16, 2, "uniform", gen(3))
    mean = 20000 * 2 / 16
    assert all(abs(s - mean) < 0.1 * mean for s in sizes)


def test_balanced_jitter_stays_in_its_band():
    sizes = route_tokens(20000, 16, 2, "balanced_jitter", gen(3))
    mean = 20000 * 2 / 16
    assert all(0.6 * mean <= s <= 1.4 * mean for s in sizes)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((10, 8, 2, "random"), "routing='random'"),
        ((10, 8, 0, "uniform"), "top_k=0"),
        ((10, 8, 9, "zipf"), "top_k=9"),
        ((10, 8, -1, "balanced_jitter"), "top_k=-1"),
    ],
)
def test_route_tokens_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        route_tokens(*args, gen())


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize(("total", "groups"), [(1, 1), (1, 8), (17, 3), (4096, 64), (10**7, 16)])
def test_distribute_rows_sums_exactly(routing, total, groups):
    sizes = distribute_rows(total, groups, routing, gen(5))
    assert len(sizes) == groups
    assert sum(sizes) == total
    assert all(isinstance(s, int) and s >= 0 for s in sizes)
    assert distribute_rows(total, groups, routing, gen(5)) == sizes


@pytest.mark.parametrize("routing", ROUTINGS)
def test_distribute_rows_depends_on_the_seed(routing):
    assert distribute_rows(10000, 16, routing, gen(0)) != distribute_rows(10000, 16, routing, gen(1))


@pytest.mark.parametrize("routing", ROUTINGS)
def test_distribute_rows_zero_total(routing):
    assert distribute_rows(0, 5, routing, gen()) == (0,) * 5


def test_distribute_rows_zipf_s():
    flat = distribute_rows(100000, 16, "zipf", gen(2), zipf_s=0.1)
    steep = distribute_rows(100000, 16, "zipf", gen(2), zipf_s=3.0)
    assert max(steep) > 0.8 * 100000 > max(flat)


def test_distribute_rows_bad_routing():
    with pytest.raises(ValueError, match="routing"):
        distribute_rows(10, 2, "nope", gen())


# -- problems from the public models ---------------------------------------------------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
def test_model_problem_dims(routing):
    up = model_problem("toy", "gate_up", 64, routing, models=TOY)
    assert (up.layout, up.groups, up.n, up.k, up.m) == ("2d3d", 8, 2 * 512, 256, 0)
    assert up.total == 64 * 2
    down = model_problem("toy", "down", 64, routing, tp=2, models=TOY)
    assert (down.groups, down.n, down.k) == (8, 256, 512 // 2)
    up_tp = model_problem("toy", "gate_up", 64, routing, tp=2, models=TOY)
    assert (up_tp.n, up_tp.k) == (2 * 512 // 2, 256)
    ep = model_problem("toy", "gate_up", 64, routing, ep=2, models=TOY)
    assert ep.groups == 4 and len(ep.sizes) == 4
    assert ep.total <= 64 * 2
    assert all(s <= 64 for s in ep.sizes)
    assert ep.name == f"toy/gate_up/t64/{routing}/ep2"
    assert model_problem("toy", "gate_up", 64, routing, ep=2, models=TOY) == ep


def test_model_problem_public_dims():
    p = model_problem("deepseek-v3", "gate_up", 64, "uniform", ep=8)
    assert (p.groups, p.n, p.k, p.dtype) == (32, 2 * 2048, 7168, "bfloat16")
    p = model_problem("mixtral-8x7b", "down", 64, "balanced_jitter", tp=4)
    assert (p.groups, p.n, p.k) == (8, 4096, 14336 // 4)
    assert p.total == 64 * 2


@pytest.mark.parametrize(("ep", "tp"), [(3, 1), (16, 1), (1, 3)])
def test_model_problem_bad_parallelism(ep, tp):
    with pytest.raises(ValueError, match="do not divide"):
        model_problem("toy", "gate_up", 16, "uniform", ep=ep, tp=tp, models=TOY)


def test_model_problem_bad_ep_public():
    with pytest.raises(ValueError, match="do not divide"):
        model_problem("deepseek-v3", "down", 16, "uniform", ep=144)


def test_model_grid_respects_the_caps():
    models = load_models()
    grid = model_grid(models)
    assert grid and len(set(grid)) == len(grid)
    for name, proj, tokens, routing, ep, tp in grid:
        spec = models["models"][name]
        assert routing in ROUTINGS and proj in ("gate_up", "down")
        assert spec["experts"] % ep == 0
        rows = tokens * spec["top_k"] // ep
        assert rows <= MAX_ROWS
        i = spec["expert_intermediate"] // tp
        n, k = (2 * i, spec["hidden"]) if proj == "gate_up" else (spec["hidden"], i)
        est = roofline_ms(Problem("2d3d", 1, (rows,), 0, n, k)) + (spec["experts"] // ep - 1) * n * k * 2 / 3e9
        assert est <= MAX_MODEL_ROOFLINE_MS
    # deepseek-v3 at 65536 tokens without EP routes 524288 rows per GPU: beyond MAX_ROWS whatever the time cap
    uncapped = model_grid(models, max_roofline_ms=1e9)
    assert ("deepseek-v3", "gate_up", 65536, "uniform", 1, 1) not in uncapped
    assert all(t * models["models"][m]["top_k"] // ep <= MAX_ROWS for m, _, t, _, ep, _ in uncapped)
    tight = model_grid(models, max_roofline_ms=0.05)
    assert set(tight) < set(grid) < set(uncapped)


def test_model_grid_parallelism_of_the_list():
    grid = model_grid(TOY, max_roofline_ms=1e9)
    pars = {(m, ep, tp) for m, _, _, _, ep, tp in grid}
    assert pars == {("toy", 1, 1), ("toy", 2, 1), ("toy", 1, 2), ("wide", 1, 1)}  # ep=3 does not divide 8 experts
    assert len(grid) == (3 + 1) * 2 * len(TOY["token_counts"]) * len(ROUTINGS)


def test_model_problems_deterministic_and_distinct():
    a = model_problems(12, seed=0)
    assert len(a) == 12
    b = model_problems(12, seed=0)
    assert b == a and [p.name for p in b] == [p.name for p in a]
    assert len({p.name for p in a}) == 12
    assert len({problem_id(p) for p in a}) == 12
    assert all(p.layout == "2d3d" and p.dtype == "bfloat16" for p in a)
    assert [p.name for p in model_problems(12, seed=1)] != [p.name for p in a]


def test_model_problems_whole_grid_when_count_is_large():
    grid = model_grid(TOY)
    ps = model_problems(10_000, seed=0, models=TOY)
    assert len(ps) == len(grid)
    assert len({p.name for p in ps}) == len(ps)
    # At one token, routings (and even models) can give the same problem: the same id, which `collect` runs once.
    by_id: dict[str, list[Problem]] = {}
    for p in ps:
        by_id.setdefault(problem_id(p), []).append(p)
    dups = [g for g in by_id.values() if len(g) > 1]
    assert dups
    assert all("/t1/" in p.name and p.total <= 2 for g in dups for p in g)
    assert all(p.total > 2 for p in ps if "/t256/" in p.name)


# -- sampled problems ------------------------------------------------------------------------------------------------

ALL_DTYPES = ("bfloat16", "float16")


def test_sampled_problems_deterministic():
    a = sampled_problems(16, seed=0, layouts=LAYOUT_NAMES, dtypes=ALL_DTYPES)
    b = sampled_problems(16, seed=0, layouts=LAYOUT_NAMES, dtypes=ALL_DTYPES)
    assert a == b and [p.name for p in a] == [p.name for p in b]
    c = sampled_problems(16, seed=1, layouts=LAYOUT_NAMES, dtypes=ALL_DTYPES)
    assert [problem_id(p) for p in c] != [problem_id(p) for p in a]
    assert sampled_problems(5, seed=0) == sampled_problems(8, seed=0)[:5]  # a prefix of a longer list


def test_sampled_problems_extents_and_caps():
    ps = sampled_problems(64, seed=2, layouts=LAYOUT_NAMES, dtypes=ALL_DTYPES)
    combos = [(lay, dt) for lay in LAYOUT_NAMES for dt in ALL_DTYPES]
    assert [(p.layout, p.dtype) for p in ps] == [combos[i % len(combos)] for i in range(64)]
    used = {"2d3d": "nk", "3d2d": "mk", "2d2d": "mn", "3d3d": "mnk"}
    for p in ps:
        for d in "mnk":
            v = getattr(p, d)
            if d in used[p.layout]:
                assert v >= 16 and v % 16 == 0, (p, d)
            else:
                assert v == 0
        assert 1 <= p.groups <= 256
        assert roofline_ms(p) <= MAX_ROOFLINE_MS
        assert p.min_bytes() <= MAX_BYTES
        if p.layout == "3d3d":
            assert p.sizes == ()
        else:
            assert len(p.sizes) == p.groups and p.total > 0
        assert p.name.startswith(f"sampled/{p.layout}/{p.dtype}/")
    assert {(p.a_major, p.b_major) for p in ps if p.layout == "2d2d"} == {("m", "n")}
    assert {(p.a_major, p.b_major) for p in ps if p.layout != "2d2d"} == {("k", "k")}
    assert max(p.groups for p in ps) > 16 and min(p.groups for p in ps) < 16  # a spread, not one value


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_sampled_problems_build_valid_inputs(layout):
    for p in sampled_problems(4, seed=3, layouts=(layout,), dtypes=ALL_DTYPES):
        q = p.shrunk()
        a, b, offs = q.make_inputs(DEVICE)
        call = validate(a, b, offs)
        assert call.ragged == p.ragged
        assert call.groups == q.groups
        assert a.dtype == b.dtype == p.torch_dtype


@pytest.mark.parametrize("layout", ["2d3d", "3d2d", "2d2d"])
@pytest.mark.parametrize("majors", [("k", "k"), ("m", "n"), ("k", "n"), ("m", "k")])
@pytest.mark.parametrize("sizes", [(8, 0, 24), (5, 0, 3, 16, 8), (1,), (16, 16, 16, 16)])
def test_the_twin_keeps_what_triton_specializes_on(layout, majors, sizes):
    """The shrunk twin of a valid problem is valid, with the same kernel signature and the same residue mod 16 of
    every int the kernel takes (the ragged total is a leading stride for some majors: a 3-group twin once summed to
    237 and was refused where the real problem, 32 rows, was fine)."""
    p = Problem(layout=layout, groups=len(sizes), sizes=sizes, m=40, n=24, k=24, dtype="float32", a_major=majors[0],
                b_major=majors[1])  # fmt: skip
    try:
        real = validate(*p.make_inputs(DEVICE))
    except ValueError:
        pytest.skip("not a valid problem for these majors")
    twin = validate(*p.shrunk().make_inputs(DEVICE))
    assert twin.signature == real.signature
    for x, y in zip((*real.a_strides, *real.b_strides, *real.c_strides), (*twin.a_strides, *twin.b_strides,
                                                                            *twin.c_strides), strict=True):  # fmt: skip
        assert (x % 16, x == 1) == (y % 16, y == 1)
    assert twin.ragged_total % 16 == real.ragged_total % 16


# -- the collection list ---------------------------------------------------------------------------------------------


def test_public_problems():
    pub = public_problems()
    assert len(pub) == 18
    assert len({p.name for p in pub}) == 18 and len({problem_id(p) for p in pub}) == 18
    assert all(p.layout == "2d3d" and p.dtype == "bfloat16" for p in pub)
    assert pub[0].name == "deepseek-v3/gate_up/decode" and pub[0].total == 256 and pub[0].groups == 32
    assert workload("public", 5) == pub[:5]


def test_default_workload():
    w = workload("default", 60)
    pub = public_problems()
    assert w[:18] == pub and [p.name for p in w[:18]] == [p.name for p in pub]
    assert len(w) == 60
    assert len({problem_id(p) for p in w}) == 60  # no duplicates to drop
    rest = w[18:]
    n_sampled = sum(p.name.startswith("sampled/") for p in rest)
    assert (len(rest) - n_sampled, n_sampled) == (int(0.4 * 42), 42 - int(0.4 * 42))
    # interleaved: both kinds appear early in the rest
    assert {p.name.startswith("sampled/") for p in rest[:4]} == {True, False}
    again = workload("default", 60)
    assert again == w and [p.name for p in again] == [p.name for p in w]
    other = workload("default", 60, seed=1)
    assert other[:18] == pub and other[18:] != rest


def test_default_workload_short_count_is_the_first_public_problems():
    """--count is the number of problems: a count of 5 used to give all 18 public ones (a trial timed 18 problems'
    whole space)."""
    assert workload("default", 10) == public_problems()[:10]
    assert workload("default", 18) == public_problems() and len(workload("default", 19)) == 19


def test_default_workload_other_layouts():
    w = workload("default", 30, layouts=("2d3d", "3d2d"), dtypes=ALL_DTYPES)
    assert len(w) == 30 and w[:18] == public_problems()
    assert {(p.layout, p.dtype) for p in w[18:] if p.name.startswith("sampled/")} >= {("3d2d", "float16")}
    w = workload("default", 12, layouts=("3d3d",), dtypes=("float16",))
    assert len(w) == 12 and {(p.layout, p.dtype) for p in w} == {("3d3d", "float16")}


def test_sampled_workload_only_the_asked_layouts_and_dtypes():
    w = workload("sampled", 10, layouts=("3d2d", "2d2d"), dtypes=("float16",))
    assert len(w) == 10
    assert {p.layout for p in w} == {"3d2d", "2d2d"}
    assert {p.dtype for p in w} == {"float16"}


def test_models_workload():
    assert workload("models", 6, seed=4) == model_problems(6, seed=4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(kind="everything"), "workload 'everything'"),
        (dict(layouts=("2d3d", "4d")), "layout '4d'"),
        (dict(dtypes=("int8",)), "dtype 'int8'"),
        (dict(kind="sampled", layouts=("3d3d",), dtypes=("bf16",)), "dtype 'bf16'"),
    ],
)
def test_workload_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        workload(count=5, **kwargs)


@pytest.mark.parametrize("groups", [3, 256, 257, 300])
def test_the_twin_takes_the_kernel_path_of_the_problem(groups):
    """The one-loop schedule holds at most ONE_LOOP_MAX_GROUPS groups; past it the kernel walks groups: the twin keeps
    the side (the same constexprs), or precompiling it would check another binary than the one the problem runs."""
    from autoheur.kernels.config import KernelConfig
    from autoheur.kernels.grouped_gemm import launch_args

    sizes = tuple((i * 7) % 5 for i in range(groups))
    p = Problem(layout="2d3d", groups=groups, sizes=sizes, m=40, n=24, k=24, dtype="float32")
    real, twin = validate(*p.make_inputs(DEVICE)), validate(*p.shrunk().make_inputs(DEVICE))
    assert twin.groups <= 4 or (groups > 256 and twin.groups == 257)
    for cfg in (KernelConfig(32, 32, 32, 3, 4, load="tma"), KernelConfig(32, 32, 32, 3, 4)):
        assert launch_args(twin, cfg)[2] == launch_args(real, cfg)[2]


# -- the backward of the MoE forward ---------------------------------------------------------------------------------


def _backward_calls(fwd: Problem):
    """The two calls the custom op's autograd makes for `fwd` (autoheur/inference/op.py `_backward`), validated: the
    operands built exactly as it builds them, from the forward's own inputs and an output gradient."""
    a, b, offs = fwd.make_inputs(DEVICE)
    dc = torch.randn(a.shape[0], b.shape[-1], dtype=a.dtype, device=a.device)
    t = lambda x: x.transpose(-1, -2)  # noqa: E731
    return validate(dc, t(b), offs), validate(t(a), dc, offs)


@pytest.mark.parametrize("sizes", [(24, 0, 40), (16, 16, 16, 16), (3, 5)])
def test_gradient_problems_are_the_calls_the_op_backward_makes(sizes):
    """Each gradient problem validates to the same call as the backward's real operands: layout, extents, majors as
    the kernel sees them (the constexprs), TMA legality, output shape."""
    fwd = Problem("2d3d", len(sizes), sizes, 0, 48, 32, "float32", name="toy/gate_up/t8")
    for real, grad in zip(_backward_calls(fwd), gradient_problems(fwd), strict=True):
        mine = validate(*grad.make_inputs(DEVICE))
        fields = ("ragged", "groups", "m", "n", "k", "ragged_total", "a_k_contig", "b_n_contig", "tma_aligned",
                  "out_shape")  # fmt: skip
        assert {f: getattr(mine, f) for f in fields} == {f: getattr(real, f) for f in fields}
        assert grad.signature() == real.signature
    grad_a, grad_b = gradient_problems(fwd)
    assert (grad_a.layout, grad_a.b_major, grad_b.layout, grad_b.a_major) == ("2d3d", "n", "2d2d", "m")
    assert grad_a.name == "toy/gate_up/t8/grad_a" and grad_b.name == "toy/gate_up/t8/grad_b"
    assert grad_a.flops() == grad_b.flops() == fwd.flops()


@pytest.mark.parametrize(
    "fwd",
    [
        Problem("2d2d", 2, (3, 5), 16, 16, 0, a_major="m", b_major="n"),
        Problem("2d3d", 2, (3, 5), 0, 16, 16, b_major="n"),
        Problem("3d3d", 2, (), 16, 16, 16),
    ],
)
def test_gradient_problems_take_only_a_moe_forward(fwd):
    with pytest.raises(ValueError, match="takes a MoE forward"):
        gradient_problems(fwd)


def test_backward_workload():
    """The model grid's forwards in model_problems order, each followed by its two gradients; any prefix is the same
    list; each problem keeps its forward's family (the first part of its name)."""
    w = workload("backward", 41)
    assert w == backward_problems(41) and len(w) == 41 and workload("backward", 10) == w[:10]
    fwds = model_problems(21)
    for i, p in enumerate(w):
        expected = gradient_problems(fwds[i // 2])[i % 2]
        assert p == expected and p.name == expected.name
        assert p.name.split("/")[0] == fwds[i // 2].name.split("/")[0]
    assert len({problem_id(p) for p in w}) == 41
    assert {(p.layout, p.a_major, p.b_major) for p in w} == {("2d3d", "k", "n"), ("2d2d", "m", "n")}
    assert workload("backward", 6, seed=2) != workload("backward", 6)


def _torch_backward_calls(fwd: Problem) -> list[tuple]:
    """(A size, A stride, B size, B stride, groups) of each grouped mm that torch's own autograd of
    `torch._grouped_mm` runs for `fwd`'s inputs (on the CPU), read by a dispatch mode as Inductor's lowering gets
    them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    calls = []

    class Calls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._grouped_mm.default:
                a, b, offs = args[:3]
                calls.append((tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), offs.numel()))
            return func(*args, **(kwargs or {}))

    a, b, offs = fwd.make_inputs(torch.device("cpu"))
    a.requires_grad_(True)
    b.requires_grad_(True)
    out = torch._grouped_mm(a, b, offs)
    with Calls():
        out.backward(torch.randn_like(out))
    return calls


@pytest.mark.parametrize("sizes", [(24, 0, 40), (16, 16, 16, 16), (8, 24)])
def test_aten_gradient_problems_are_the_calls_torch_autograd_makes(sizes):
    """Each of `aten_gradient_problems` is, as the Inductor filter reads it (choices.inductor_problem over the
    operands' sizes and strides), one of the two grouped mms torch's autograd runs in the backward: the problem the
    Inductor family collects is the one a compiled training step asks the filter to rank."""
    from autoheur.inductor.choices import inductor_problem
    from autoheur.inductor.collect import as_benchmarked

    fwd = Problem("2d3d", len(sizes), sizes, 0, 48, 32, "bfloat16", name="toy/gate_up/t8")
    fields = ("layout", "groups", "sizes", "m", "n", "k", "a_major", "b_major", "dtype")
    calls = _torch_backward_calls(fwd)
    seen = {tuple(getattr(inductor_problem(*call, "bfloat16"), f) for f in fields) for call in calls}
    mine = {tuple(getattr(as_benchmarked(g), f) for f in fields) for g in aten_gradient_problems(fwd)}
    assert len(seen) == 2 and seen == mine
    grad_a, grad_w = aten_gradient_problems(fwd)
    assert grad_a == gradient_problems(fwd)[0] and (grad_w.m, grad_w.n) == (fwd.n, fwd.k) != (fwd.k, fwd.n)
    assert grad_w.name == "toy/gate_up/t8/grad_w" and grad_w.flops() == fwd.flops()


def test_aten_backward_workload():
    """The public forwards' two gradients first, in order; then the grid's and the sampled forwards' by turns; any
    prefix the same list; each problem keeps its forward's family; every one within the cost caps."""
    w = workload("aten_backward", 90)
    assert w == aten_backward_problems(90) and workload("aten_backward", 41) == w[:41] and len(w) == 90
    pub = public_problems()
    assert w[: 2 * len(pub)] == [g for fwd in pub for g in aten_gradient_problems(fwd)]
    rest = w[2 * len(pub) :]
    assert {p.name.split("/")[0] for p in rest[:10]} >= {"sampled"} and len({p.name.split("/")[0] for p in rest}) > 2
    assert {(p.layout, p.a_major, p.b_major, p.dtype) for p in w} == {("2d3d", "k", "n", "bfloat16"),
                                                                       ("2d2d", "m", "n", "bfloat16")}  # fmt: skip
    assert all(roofline_ms(p) <= MAX_ROOFLINE_MS and p.min_bytes() <= MAX_BYTES for p in rest)
    assert len({problem_id(p) for p in w}) == 90
    shared = {problem_id(p) for p in w} & {problem_id(p) for p in backward_problems(90)}
    assert shared and {p.layout for p in w if problem_id(p) in shared} == {"2d3d"}  # the grid's grad_a, never grad_w
    assert workload("aten_backward", 50, seed=3)[36:] != w[36:50]


def test_sampled_grad_a_workload():
    """The input gradients of the sampled 2D x 3D forwards, in their order: the same list for any prefix, each one
    `gradient_problems`' grad_a of the sampled forward of its index, within the sampled problems' cost caps."""
    w = workload("sampled_grad_a", 30)
    assert w == sampled_grad_a_problems(30) and workload("sampled_grad_a", 12) == w[:12]
    fwds = sampled_problems(len(w) + 10)  # no gradient is over the caps today, so the indices line up
    for p in w:
        idx = int(p.name.split("/")[3])
        assert p == gradient_problems(fwds[idx])[0] and p.name == f"{fwds[idx].name}/grad_a"
        assert roofline_ms(p) <= MAX_ROOFLINE_MS and p.min_bytes() <= MAX_BYTES
    assert {(p.layout, p.a_major, p.b_major, p.dtype) for p in w} == {("2d3d", "k", "n", "bfloat16")}
    assert len({problem_id(p) for p in w}) == 30
    assert not {problem_id(p) for p in w} & {problem_id(p) for p in sampled_problems(30)}
    assert workload("sampled_grad_a", 5, seed=1) != w[:5]


def test_cli_workload_choices_are_the_workloads():
    from autoheur.cli import WORKLOAD_CHOICES

    assert WORKLOAD_CHOICES == WORKLOADS


@pytest.mark.parametrize("count", [0, -1, 2.5, True])
def test_a_count_below_one_is_refused_by_name(count):
    from autoheur.collect.workloads import workload

    with pytest.raises(ValueError, match=r"count=.*how many problems, at least 1"):
        workload("sampled", count)


def test_a_moe_models_setting_without_a_public_model_is_refused_by_name(tmp_path, monkeypatch, capsys):
    """AUTOHEUR_MOE_MODELS naming a well-formed list of other models: the public problems, which name their models,
    are refused naming the knob and the model (a bare KeyError traceback from `collect --workload public`)."""
    from autoheur import SettingError
    from autoheur.cli import main

    path = tmp_path / "models.json"
    path.write_text('{"models": {"m": {"hidden": 64, "expert_intermediate": 32, "experts": 8, "top_k": 2}}, '
                    '"token_counts": [16]}')  # fmt: skip
    monkeypatch.setenv("AUTOHEUR_MOE_MODELS", str(path))
    with pytest.raises(SettingError, match=rf"^AUTOHEUR_MOE_MODELS='{path}' has no model 'qwen3-235b-a22b'"):
        workloads.public_problems()
    assert main(["collect", "--workload", "public", "--dry-run"]) == 2
    assert "has no model 'qwen3-235b-a22b'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (None, r"FileNotFoundError"),
        ("not json", r"JSONDecodeError"),
        ("[1, 2]", r"no 'models' object"),
        ('{"models": {"m": {"hidden": 64, "experts": 8, "top_k": 2}}, "token_counts": [16]}',
         r"model 'm' lacks a positive integer expert_intermediate"),
        ('{"models": {}, "token_counts": "16"}', r"no 'token_counts' list"),
        # a token picks top_k distinct experts: refused by the routing with "top_k=9 must be in [1, experts=8]" (of
        # which file, which model?), or routed by balanced_jitter to more rows an expert than there are tokens
        ('{"models": {"m": {"hidden": 64, "expert_intermediate": 32, "experts": 8, "top_k": 9}}, "token_counts": [16]}',
         r"model 'm' routes each token to top_k=9 distinct experts of its experts=8: give it a top_k of at most 8"),
    ],
)  # fmt: skip
def test_a_bad_moe_models_setting_is_refused_by_name(tmp_path, monkeypatch, text, why):
    """AUTOHEUR_MOE_MODELS naming a missing or malformed file: a SettingError (one line from the CLI) that names the
    knob, not a bare KeyError, TypeError or JSON position."""
    from autoheur import SettingError

    path = tmp_path / "models.json"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv("AUTOHEUR_MOE_MODELS", str(path))
    with pytest.raises(SettingError, match=rf"^AUTOHEUR_MOE_MODELS='{path}' is not a model list \({why}"):
        load_models()
    monkeypatch.setenv("AUTOHEUR_MOE_MODELS", str(Path(workloads.__file__).with_name("moe_models.json")))
    assert load_models()["models"]  # the packaged list passes the same checks
