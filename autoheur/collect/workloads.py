"""Problems to collect and benchmark: the public MoE models (../shared/moe_models.json) and problems beyond them.

A fused gate/up projection is N = 2 * I / TP, K = H; the down projection N = H, K = I / TP. Groups per GPU are
E / EP, and rows = tokens * top_k / EP (the tokens routed to this GPU's experts).

Routing patterns (the model list's `routing` entry):
  uniform          each token picks top_k distinct experts uniformly at random (multinomial counts)
  balanced_jitter  per-group rows U(0.7, 1.3) * mean, a load-balanced prefill
  zipf             expert popularity 1/rank^s, s ~ U(0.5, 1.2): skewed, some groups empty at small token counts

`workload(kind, count, seed, layouts, dtypes)` is the deterministic problem list `autoheur collect` works through.
Every sampled extent is a multiple of 16 (as real model dimensions are), so one set of compiled binaries serves all
problems of a layout and dtype: Triton specializes integer arguments on divisibility by 16.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from autoheur import SettingError
from autoheur.problem import Problem, split_rows

_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "moe_models.json"


def moe_models_path() -> Path:
    """The public model list: $AUTOHEUR_MOE_MODELS, ../shared/moe_models.json beside the checkout, else the packaged
    copy."""
    env = os.environ.get("AUTOHEUR_MOE_MODELS")
    if env:
        return Path(env)
    if _SHARED.exists():
        return _SHARED
    return Path(__file__).with_name("moe_models.json")


_SPEC_INTS = ("hidden", "expert_intermediate", "experts", "top_k")  # what every model's entry needs, each >= 1


def load_models() -> dict:
    """The public model list, checked: a bad file names itself (and $AUTOHEUR_MOE_MODELS where that chose it), not a
    KeyError or a JSON position of a file no message names."""
    path = moe_models_path()
    env = bool(os.environ.get("AUTOHEUR_MOE_MODELS"))
    where = f"AUTOHEUR_MOE_MODELS={str(path)!r}" if env else f"the public model list {path}"
    try:
        models = json.loads(path.read_text())
    except (OSError, ValueError) as exc:  # missing, unreadable, not UTF-8, not JSON
        why = f"{type(exc).__name__}: {exc}"
    else:
        why = _model_list_problem(models)
    if why is None:
        return models
    fix = "point it at a JSON file shaped as autoheur/collect/moe_models.json, or unset it" if env else "restore it"
    raise (SettingError if env else ValueError)(f"{where} is not a model list ({why}); {fix}")


def _model_list_problem(models) -> str | None:
    if not isinstance(models, dict) or not isinstance(models.get("models"), dict):
        return "no 'models' object"
    for name, spec in models["models"].items():
        bad = [f for f in _SPEC_INTS if not isinstance(spec, dict) or type(spec.get(f)) is not int or spec[f] < 1]
        if bad:
            return f"model {name!r} lacks a positive integer {', '.join(bad)}"
        if spec["top_k"] > spec["experts"]:  # else route_tokens' "top_k=9 must be in [1, experts=8]", of no file
            return (f"model {name!r} routes each token to top_k={spec['top_k']} distinct experts of its "
                    f"experts={spec['experts']}: give it a top_k of at most {spec['experts']}")  # fmt: skip
    counts = models.get("token_counts")
    if not isinstance(counts, list) or not all(type(t) is int and t >= 1 for t in counts):
        return "no 'token_counts' list of positive integers"
    return None


def proj_dims(spec: dict, proj: str, tp: int = 1) -> tuple[int, int]:
    """(N, K) of a model's expert projection: gate/up is N = 2 * I / TP, K = H; down is N = H, K = I / TP."""
    h, i = spec["hidden"], spec["expert_intermediate"] // tp
    return (2 * i, h) if proj == "gate_up" else (h, i)


def moe_problem(
    model: str, proj: str, tokens: int, *, ep: int = 1, tp: int = 1, seed: int = 0, models: dict | None = None
) -> Problem:
    """One expert GEMM of `model` ('gate_up' or 'down') at `tokens` tokens, routing rows ~ U(0.5, 1.5) * mean."""
    models = models or load_models()
    if model not in models["models"]:  # a list of other models (AUTOHEUR_MOE_MODELS): said, not a bare KeyError
        path, env = moe_models_path(), bool(os.environ.get("AUTOHEUR_MOE_MODELS"))
        where = f"AUTOHEUR_MOE_MODELS={str(path)!r}" if env else f"the public model list {path}"
        fix = "add its entry (autoheur/collect/moe_models.json has it), or unset it" if env else "restore it"
        raise (SettingError if env else ValueError)(f"{where} has no model {model!r} of the public problems; {fix}")
    spec = models["models"][model]
    e, top_k = spec["experts"], spec["top_k"]
    groups = e // ep
    rows = max(1, tokens * top_k // ep)
    n, k = proj_dims(spec, proj, tp)
    gen = torch.Generator().manual_seed(seed)
    sizes = split_rows(rows, groups, gen)
    name = f"{model}/{proj}/t{tokens}" + (f"/ep{ep}" if ep > 1 else "") + (f"/tp{tp}" if tp > 1 else "")
    return Problem("2d3d", groups, sizes, 0, n, k, "bfloat16", "k", "k", name=name)


def _anchor(name: str, groups: int, rows: int, n: int, k: int, seed: int) -> Problem:
    sizes = split_rows(rows, groups, torch.Generator().manual_seed(seed))
    return Problem("2d3d", groups, sizes, 0, n, k, "bfloat16", "k", "k", name=name)


def public_problems() -> list[Problem]:
    """The problems of ../shared/notes/anchors.md plus the other public models at decode, mid and prefill."""
    anchors = [
        ("deepseek-v3/gate_up/decode", 32, 256, 4096, 7168),
        ("deepseek-v3/gate_up/mid", 32, 4096, 4096, 7168),
        ("deepseek-v3/down/prefill", 32, 32768, 7168, 2048),
        ("mixtral-8x7b/gate_up/decode", 8, 128, 28672, 4096),
        ("mixtral-8x7b/down/prefill", 8, 32768, 4096, 14336),
        ("qwen3-30b-a3b/gate_up/decode", 128, 512, 1536, 2048),
        ("qwen3-30b-a3b/down/mid", 128, 8192, 2048, 768),
        ("qwen3-30b-a3b/gate_up/prefill", 128, 65536, 1536, 2048),
        ("gpt-oss-120b/gate_up/mid", 128, 32768, 5760, 2880),
    ]
    out = [_anchor(*a, seed=i) for i, a in enumerate(anchors)]
    # The other public models: decode 16 tokens, mid 1024, prefill 16384; both projections over the three.
    extra = [
        ("qwen3-235b-a22b", dict(ep=8)),
        ("llama-4-scout", dict(tp=4)),
        ("gpt-oss-20b", {}),
    ]
    for j, (model, par) in enumerate(extra):
        for phase, tokens, proj in (("decode", 16, "gate_up"), ("mid", 1024, "down"), ("prefill", 16384, "gate_up")):
            p = moe_problem(model, proj, tokens, seed=100 + 3 * j + len(out), **par)
            out.append(Problem(**{**_fields(p), "name": f"{model}/{proj}/{phase}"}))
    return out


def _fields(p: Problem) -> dict:
    return {f: getattr(p, f) for f in p.__slots__}


# -- routing ---------------------------------------------------------------------------------------------------------

ROUTINGS = ("uniform", "balanced_jitter", "zipf")


def route_tokens(
    tokens: int, experts: int, top_k: int, routing: str, gen: torch.Generator, zipf_s: float | None = None
) -> tuple[int, ...]:
    """Rows per expert when `tokens` tokens each pick `top_k` distinct experts under `routing` (sum: tokens*top_k)."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing={routing!r}; expected one of {ROUTINGS}")
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k={top_k} must be in [1, experts={experts}]")
    if routing == "balanced_jitter":
        sizes = list(split_rows(tokens * top_k, experts, gen, 0.7, 1.3))
        # a token picks distinct experts, so none gets more than `tokens` rows: move any excess to those with room
        excess = sum(max(0, s - tokens) for s in sizes)
        sizes = [min(s, tokens) for s in sizes]
        for i in range(experts):
            add = min(excess, tokens - sizes[i])
            sizes[i] += add
            excess -= add
        return tuple(sizes)
    weights = expert_weights(experts, routing, gen, zipf_s)
    counts = torch.zeros(experts, dtype=torch.int64)
    for start in range(0, tokens, 8192):  # chunks bound the memory of the (tokens, experts) draw
        t = min(8192, tokens - start)
        picks = torch.multinomial(weights.expand(t, experts), top_k, replacement=False, generator=gen)
        counts += torch.bincount(picks.flatten(), minlength=experts)
    return tuple(int(c) for c in counts)


def expert_weights(experts: int, routing: str, gen: torch.Generator, zipf_s: float | None = None) -> torch.Tensor:
    """Expert popularity: uniform, or Zipf 1/rank^s over a random permutation of the experts."""
    if routing != "zipf":
        return torch.full((experts,), 1.0 / experts)
    s = float(torch.empty(()).uniform_(0.5, 1.2, generator=gen)) if zipf_s is None else zipf_s
    ranks = torch.randperm(experts, generator=gen).double() + 1.0
    w = ranks.pow(-s)
    return (w / w.sum()).float()


def distribute_rows(total: int, groups: int, routing: str, gen: torch.Generator, zipf_s: float | None = None):
    """`total` rows over `groups` groups (one pick per row): multinomial under uniform / zipf, U(0.7, 1.3) shares
    under balanced_jitter. Sums exactly to `total`."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing={routing!r}; expected one of {ROUTINGS}")
    if routing == "balanced_jitter":
        return split_rows(total, groups, gen, 0.7, 1.3)
    if total == 0:
        return (0,) * groups
    w = expert_weights(groups, routing, gen, zipf_s).double()
    # multinomial counts by sequential binomials: exact, and cheap for any total
    counts, left, mass = [], total, 1.0
    for p in w.tolist()[:-1]:
        q = min(1.0, max(0.0, p / mass)) if mass > 0 else 0.0
        c = int(torch.binomial(torch.tensor(float(left)), torch.tensor(q), generator=gen)) if left else 0
        counts.append(c)
        left -= c
        mass -= p
    counts.append(left)
    return tuple(counts)


# -- problems from the public models ---------------------------------------------------------------------------------

MAX_ROWS = 1 << 17  # routed rows per GPU above this are left out: one such problem costs minutes to screen
# Screening the whole space costs about 2000 configs x 3-4 runs x each config's time, so collection time follows the
# problem's roofline time; these caps keep a 400-problem collection within an hour of one GPU. The public problems
# (up to 5.5 ms) are always collected, so the large end is still seen.
MAX_MODEL_ROOFLINE_MS = 0.75
MAX_ROOFLINE_MS = 0.5  # sampled problems above this (at 700 TFLOP/s, 3 TB/s) are redrawn


def model_problem(
    model: str, proj: str, tokens: int, routing: str, *, ep: int = 1, tp: int = 1, seed: int = 0,
    models: dict | None = None,
) -> Problem:  # fmt: skip
    """One expert GEMM of a public model under a routing pattern; with EP the GPU holds the first E/EP experts."""
    spec = (models or load_models())["models"][model]
    e, top_k = spec["experts"], spec["top_k"]
    if e % ep or spec["expert_intermediate"] % tp:
        raise ValueError(f"{model}: ep={ep} / tp={tp} do not divide experts={e} / intermediate")
    gen = torch.Generator().manual_seed(seed)
    groups = e // ep
    if routing == "balanced_jitter":
        sizes = split_rows(max(1, tokens * top_k // ep), groups, gen, 0.7, 1.3)
    else:
        sizes = route_tokens(tokens, e, top_k, routing, gen)[:groups]
    n, k = proj_dims(spec, proj, tp)
    name = f"{model}/{proj}/t{tokens}/{routing}" + (f"/ep{ep}" if ep > 1 else "") + (f"/tp{tp}" if tp > 1 else "")
    return Problem("2d3d", groups, tuple(sizes), 0, n, k, "bfloat16", "k", "k", name=name)


def model_grid(models: dict | None = None, max_roofline_ms: float = MAX_MODEL_ROOFLINE_MS) -> list[tuple]:
    """Every (model, proj, tokens, routing, ep, tp) of the public list within MAX_ROWS rows per GPU and the roofline
    cap (estimated from the mean rows: routing moves it little)."""
    models = models or load_models()
    grid = []
    for name, spec in sorted(models["models"].items()):
        pars = [(1, 1)] + [(ep, 1) for ep in spec.get("typical_ep", []) if ep > 1 and spec["experts"] % ep == 0]
        pars += [(1, tp) for tp in spec.get("typical_tp", []) if tp > 1]
        for proj in ("gate_up", "down"):
            for tokens in models["token_counts"]:
                for routing in ROUTINGS:
                    for ep, tp in pars:
                        rows = tokens * spec["top_k"] // ep
                        n, k = proj_dims(spec, proj, tp)
                        est = Problem("2d3d", 1, (rows,), 0, n, k)  # one group's rows, all groups' weights below
                        weights_ms = (spec["experts"] // ep - 1) * n * k * 2 / 3e9
                        if rows <= MAX_ROWS and roofline_ms(est) + weights_ms <= max_roofline_ms:
                            grid.append((name, proj, tokens, routing, ep, tp))
    return grid


def model_problems(count: int, seed: int = 0, models: dict | None = None) -> list[Problem]:
    """`count` problems drawn without replacement from `model_grid` (all of it when count >= its size)."""
    return list(itertools.islice(_model_problem_stream(seed, models), count))


def _model_problem_stream(seed: int = 0, models: dict | None = None) -> Iterator[Problem]:
    """The whole `model_grid` in a seeded random order, each problem built only when it is reached."""
    models = models or load_models()
    grid = model_grid(models)
    gen = torch.Generator().manual_seed(seed)
    for j in torch.randperm(len(grid), generator=gen).tolist():
        name, proj, tokens, routing, ep, tp = grid[j]
        yield model_problem(name, proj, tokens, routing, ep=ep, tp=tp, seed=seed * 100003 + j, models=models)


# -- the backward of the MoE forward ---------------------------------------------------------------------------------


def gradient_problems(forward: Problem) -> tuple[Problem, Problem]:
    """The two grouped GEMMs that the custom op's autograd (autoheur/inference/op.py) runs for a MoE forward
    `x [T, K] @ W[g]^T` (2d3d, both operands K-major, W stored [G, N, K]):

      grad_a  dx = dy @ W[g]        2d3d, the same rows, n = K, k = N, W read as stored: B N-contiguous (b_major "n")
      grad_b  dW[g] = dy_g^T @ x_g  computed as x^T @ dy: 2d2d, m = K, n = N, ragged K = the rows; A = x^T is
                                    column-major (a_major "m"), B = dy row-major (b_major "n"); the op's output is
                                    dW^T = [G, K, N], the gradient of the transposed view it was called with

    Names gain "/grad_a" and "/grad_b", so a problem keeps its model family (leave-one-family-out holds out a
    model's backward with its forward).
    """
    if forward.layout != "2d3d" or (forward.a_major, forward.b_major) != ("k", "k"):
        raise ValueError(f"gradient_problems takes a MoE forward (2d3d, a_major 'k', b_major 'k'), got {forward}")
    common = dict(groups=forward.groups, sizes=forward.sizes, dtype=forward.dtype)
    grad_a = Problem("2d3d", m=0, n=forward.k, k=forward.n, b_major="n", a_major="k",
                     name=f"{forward.name}/grad_a", **common)  # fmt: skip
    grad_b = Problem("2d2d", m=forward.k, n=forward.n, k=0, b_major="n", a_major="m",
                     name=f"{forward.name}/grad_b", **common)  # fmt: skip
    return grad_a, grad_b


def backward_problems(count: int, seed: int = 0) -> list[Problem]:
    """The gradient GEMMs (`gradient_problems`) of the public-model grid in `model_problems` order, each forward's
    two together: `count` of them. No forward problem has these majors (2d3d with W N-contiguous) or these 2d2d
    shapes. The public problems' own gradients are left out: at 13-116 s of screening each on an H100 (their
    forwards' collection times), 36 of them would cost as much as about 300 of the grid's."""
    return list(itertools.islice(_backward_stream(seed), count))


def _backward_stream(seed: int = 0) -> Iterator[Problem]:
    """`backward_problems`' list, each forward's two gradients drawn as they are reached."""
    for fwd in _model_problem_stream(seed):
        yield from gradient_problems(fwd)


def aten_gradient_problems(forward: Problem) -> tuple[Problem, Problem]:
    """The two grouped GEMMs that torch's own autograd of `torch._grouped_mm` runs for a MoE forward `x [T, K] @
    W[g]^T` (2d3d, both operands K-major, W stored [G, N, K]): what a compiled training step's backward hands
    Inductor's grouped_mm, and so what the Inductor filter is asked to rank there.

      grad_a  dx = dy @ W[g]          as `gradient_problems`' grad_a (2d3d, n = K, k = N, B N-contiguous)
      grad_w  dW[g] = dy_g^T @ x_g    2d2d, m = N, n = K, ragged K = the rows; A = dy^T is column-major (a_major
                                      "m"), B = x row-major (b_major "n"); the output [G, N, K] is W's storage

    The weight gradient is the transpose of `gradient_problems`' grad_b (the custom op computes x^T @ dy): m and n
    swap. Names gain "/grad_a" and "/grad_w".
    """
    grad_a, _ = gradient_problems(forward)
    grad_w = Problem("2d2d", forward.groups, forward.sizes, m=forward.n, n=forward.k, k=0, dtype=forward.dtype,
                     b_major="n", a_major="m", name=f"{forward.name}/grad_w")  # fmt: skip
    return grad_a, grad_w


def aten_backward_problems(count: int, seed: int = 0) -> list[Problem]:
    """The gradient GEMMs of torch's autograd (`aten_gradient_problems`) of the 2D x 3D bf16 forwards: the 18
    public problems', then the public-model grid's and the sampled forwards' by turns (two of the grid to three
    sampled, about the default workload's mix; these within the sampled problems' cost caps), each forward's two
    together: `count` of them, any prefix the same list. For the Inductor family, whose grid models knew only the
    forward."""
    return list(itertools.islice(_aten_backward_stream(seed), count))


def _aten_backward_stream(seed: int = 0) -> Iterator[Problem]:
    grid, sampled = _model_problem_stream(seed), _sampled_stream(seed, (("2d3d", "bfloat16"),))
    turns = (p for _ in itertools.count() for p in [*itertools.islice(grid, 2), *itertools.islice(sampled, 3)])
    for fwd in public_problems():  # whatever their cost, as in the default workload
        yield from aten_gradient_problems(fwd)
    for fwd in turns:
        for g in aten_gradient_problems(fwd):
            if roofline_ms(g) <= MAX_ROOFLINE_MS and g.min_bytes() <= MAX_BYTES:
                yield g


# -- problems sampled beyond the models ------------------------------------------------------------------------------

LAYOUT_NAMES = ("2d3d", "3d2d", "2d2d", "3d3d")
SAMPLE_DTYPES = ("bfloat16", "float16")
MAX_BYTES = 6 << 30  # operands and output together


def roofline_ms(problem: Problem, tflops: float = 700.0, gbps: float = 3000.0) -> float:
    return max(problem.flops() / (tflops * 1e9), problem.min_bytes() / (gbps * 1e6))


def _log_uniform(gen: torch.Generator, low: float, high: float) -> float:
    u = float(torch.rand((), generator=gen, dtype=torch.float64))
    return math.exp(math.log(low) + u * (math.log(high) - math.log(low)))


def _dim(gen: torch.Generator, low: int, high: int, quantum: int = 64) -> int:
    """A log-uniform extent rounded to a multiple of `quantum` (>= quantum)."""
    return max(quantum, int(round(_log_uniform(gen, low, high) / quantum)) * quantum)


def sample_problem(gen: torch.Generator, layout: str, dtype: str, index: int = 0) -> Problem:
    """One problem beyond the models: log-uniform groups (1-256), rows per group (1-4096), N and K (128-16384),
    a routing pattern, and the operand majors each layout has in a MoE layer."""
    for _ in range(1000):
        groups = min(256, int(_log_uniform(gen, 1, 257)))
        routing = ROUTINGS[int(torch.randint(len(ROUTINGS), (), generator=gen))]
        mean = _log_uniform(gen, 1, 4096)
        total = max(0, int(round(mean * groups)))
        a, b = _dim(gen, 128, 16384), _dim(gen, 128, 16384)
        tag = f"sampled/{layout}/{dtype}/{index}/{routing}"
        if layout == "3d3d":
            m = _dim(gen, 16, 4096, 16)
            p = Problem(layout, groups, (), m, a, b, dtype, "k", "k", name=tag.rsplit("/", 1)[0])
        else:
            sizes = distribute_rows(total, groups, routing, gen)
            if layout == "2d3d":  # MoE forward: x [T, K] @ W [G, N, K]^T
                p = Problem(layout, groups, sizes, 0, a, b, dtype, "k", "k", name=tag)
            elif layout == "3d2d":  # ragged N: A [G, M, K], B [K, total] with K contiguous (TMA-able)
                p = Problem(layout, groups, sizes, a, 0, b, dtype, "k", "k", name=tag)
            else:  # 2d2d weight gradient: x.t() [M, T] (column-major) @ dy [T, N]
                p = Problem(layout, groups, sizes, a, b, 0, dtype, "n", "m", name=tag)
        if roofline_ms(p) <= MAX_ROOFLINE_MS and p.min_bytes() <= MAX_BYTES and (p.total or p.layout == "3d3d"):
            return p
    raise RuntimeError("could not draw a problem within the cost caps")  # pragma: no cover


def sampled_problems(
    count: int, seed: int = 0, layouts: tuple[str, ...] = ("2d3d",), dtypes: tuple[str, ...] = ("bfloat16",)
) -> list[Problem]:
    """`count` sampled problems, cycling over layouts x dtypes; the same arguments always give the same list."""
    combos = [(lay, dt) for lay in layouts for dt in dtypes]
    return list(itertools.islice(_sampled_stream(seed, combos), count))


def _sampled_stream(seed: int, combos: Sequence[tuple[str, str]]) -> Iterator[Problem]:
    """`sampled_problems`' list, without end."""
    gen = torch.Generator().manual_seed(10_007 + seed)
    for i in itertools.count():
        yield sample_problem(gen, *combos[i % len(combos)], index=i)


def sampled_grad_a_problems(count: int, seed: int = 0) -> list[Problem]:
    """The input-gradient GEMMs (`grad_a` of `gradient_problems`: 2d3d with W N-contiguous) of the sampled 2D x 3D
    bf16 forwards, in `sampled_problems(count, seed)` order: `count` of them. The backward workload has this layout
    only for the public-model grid, and it is the kind the rankers place worst; the sampled 2d2d layout already has
    grad_b's majors. A gradient over the cost caps is skipped (none is today: grad_a moves the forward's bytes)."""
    return list(itertools.islice(_sampled_grad_a_stream(seed), count))


def _sampled_grad_a_stream(seed: int = 0) -> Iterator[Problem]:
    """`sampled_grad_a_problems`' list, without end."""
    grads = (gradient_problems(fwd)[0] for fwd in _sampled_stream(seed, (("2d3d", "bfloat16"),)))
    return (g for g in grads if roofline_ms(g) <= MAX_ROOFLINE_MS and g.min_bytes() <= MAX_BYTES)


# -- the list a collection works through -----------------------------------------------------------------------------

WORKLOADS = ("default", "public", "models", "sampled", "backward", "sampled_grad_a", "aten_backward")


def workload(
    kind: str = "default",
    count: int = 400,
    seed: int = 0,
    layouts: tuple[str, ...] = ("2d3d",),
    dtypes: tuple[str, ...] = ("bfloat16",),
) -> list[Problem]:
    """The deterministic problem list of a collection, interleaved so any prefix is a fair mix.

    default: the public problems, then models and sampled problems alternating (about 40% / 60%), for 2D x 3D bf16
             (only when layouts/dtypes include it); the remaining layouts/dtypes get sampled problems
    public:  the 18 public problems; models: the public-model grid; sampled: problems beyond the models
    backward: the gradient GEMMs of the public-model grid's problems (`backward_problems`)
    sampled_grad_a: the input-gradient GEMMs of the sampled 2D x 3D forwards (`sampled_grad_a_problems`)
    aten_backward: the gradient GEMMs of torch's own autograd of the public, grid and sampled forwards
             (`aten_backward_problems`): a compiled training step's backward, for the inductor family
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count={count!r}: how many problems, at least 1")
    if not layouts or not dtypes:
        raise ValueError(f"layouts={tuple(layouts)}, dtypes={tuple(dtypes)}: give at least one of each")
    for lay in layouts:
        if lay not in LAYOUT_NAMES:
            raise ValueError(f"layout {lay!r}; expected some of {LAYOUT_NAMES}")
    for dt in dtypes:
        if dt not in SAMPLE_DTYPES + ("float32",):
            raise ValueError(f"dtype {dt!r}; expected some of {SAMPLE_DTYPES + ('float32',)}")
    if kind == "public":
        return public_problems()[:count]
    if kind == "models":
        return model_problems(count, seed)
    if kind == "sampled":
        return sampled_problems(count, seed, layouts, dtypes)
    if kind == "backward":
        return backward_problems(count, seed)
    if kind == "sampled_grad_a":
        return sampled_grad_a_problems(count, seed)
    if kind == "aten_backward":
        return aten_backward_problems(count, seed)
    if kind != "default":
        raise ValueError(f"workload {kind!r}; expected one of {WORKLOADS}")
    main = "2d3d" in layouts and "bfloat16" in dtypes
    others = tuple((lay, dt) for lay in layouts for dt in dtypes if (lay, dt) != ("2d3d", "bfloat16"))
    out: list[Problem] = public_problems() if main else []
    n_rest = max(0, count - len(out))
    n_models = int(0.4 * n_rest) if main else 0
    models = model_problems(n_models, seed)
    n_sampled = n_rest - len(models)
    sampled: list[Problem] = []
    if n_sampled:
        if main and others:
            n_main = (n_sampled + 1) // 2
            sampled = _interleave(sampled_problems(n_main, seed), _mixed(n_sampled - n_main, seed, others))
        elif main:
            sampled = sampled_problems(n_sampled, seed)
        else:
            sampled = _mixed(n_sampled, seed, others)
    return (out + _interleave(models, sampled))[:count]  # a count under the 18 public problems: the first of them


def _mixed(count: int, seed: int, combos: tuple[tuple[str, str], ...]) -> list[Problem]:
    gen = torch.Generator().manual_seed(20_011 + seed)
    return [sample_problem(gen, *combos[i % len(combos)], index=i) for i in range(count)]


def _interleave(a: list, b: list) -> list:
    """Spread the shorter list evenly through the longer one."""
    if not a or not b:
        return a + b
    out, ia, ib, total = [], 0, 0, len(a) + len(b)
    for i in range(total):
        if ib >= len(b) or (ia < len(a) and ia * total <= i * len(a)):
            out.append(a[ia])
            ia += 1
        else:
            out.append(b[ib])
            ib += 1
    return out
