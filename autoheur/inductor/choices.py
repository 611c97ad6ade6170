"""Reading Inductor's grouped-mm autotuning choices: which template config each is, and which problem they solve.

A Triton template choice of `aten._grouped_mm` is named `triton_grouped_mm_<i>`; its `description` lists the template
kwargs (`BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, ..., num_stages=3, num_warps=4`), which are read here rather than
`log_info["tile_shape"]`, whose order is not documented. A template config is mapped to its twin in autoheur's own
space (same tile, stages and warps; TMA loads, as the template uses when Triton has tensor descriptors; no tile
grouping), so the feature code describes both kernel families the same way.

The problem is what Inductor benchmarks: the operands' size hints and strides, and offsets that split the ragged
dimension evenly, rounded to 16 bytes (`create_offsets` in torch/_inductor/kernel/mm_grouped.py): the real routing is
a run-time tensor that Inductor never sees.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from autoheur.kernels.config import KernelConfig
from autoheur.problem import Problem

TEMPLATE_PREFIX = "triton_grouped_mm_"
log = logging.getLogger("autoheur")
_KWARG = re.compile(r"(\w+)=([^,]+)")


def grid_configs() -> list[KernelConfig]:
    """Inductor's grouped-mm grid (from the installed torch), as twins in autoheur's space; empty if unavailable."""
    try:
        from torch._inductor.kernel.mm_grouped import grouped_mm_configs
    except ImportError:
        return []
    return _twins(grouped_mm_configs())


def _twins(configs) -> list[KernelConfig]:
    """Inductor's template configs (triton Configs of its grid) as twins in autoheur's space."""
    return [_twin(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages, c.num_warps)
            for c in configs]  # fmt: skip


def _twin(bm: int, bn: int, bk: int, stages: int, warps: int, tma: bool = True) -> KernelConfig:
    return KernelConfig(int(bm), int(bn), int(bk), int(stages), int(warps), 1, "tma" if tma else "ptr", False)


def template_kwargs(choice) -> dict[str, str] | None:
    """The template kwargs of a grouped-mm Triton choice (strings), or None for any other choice (ATen, ...)."""
    if not str(getattr(choice, "name", "")).startswith(TEMPLATE_PREFIX):
        return None
    return dict(_KWARG.findall(str(getattr(choice, "description", ""))))


def template_config(choice) -> KernelConfig | None:
    """The autoheur twin of a grouped-mm template choice; None if it is not one or cannot be read."""
    return config_from_kwargs(template_kwargs(choice))


def config_from_kwargs(kw: dict[str, str] | None) -> KernelConfig | None:
    """The twin config of a template's kwargs (`template_kwargs`); None if absent or unreadable."""
    if kw is None:
        return None
    try:
        return _twin(
            kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["num_stages"], kw["num_warps"],
            kw.get("USE_TMA_LOAD", "True") == "True",
        )  # fmt: skip
    except (KeyError, ValueError, TypeError):  # a template revision with other kwargs or values outside the space
        return None


def inductor_problem(
    a_size, a_stride, b_size, b_stride, groups: int | None, dtype: str, alignment_bytes: int = 16
) -> Problem:
    """The problem Inductor benchmarks for operands of these (concrete) sizes and strides; `groups` = offs length."""
    a_size, b_size = [int(x) for x in a_size], [int(x) for x in b_size]
    a_k_major = int(a_stride[-1]) == 1
    b_k_major = int(b_stride[-2]) == 1  # B[.., K, N] with K contiguous: stored [.., N, K] and used transposed
    a_major, b_major = ("k" if a_k_major else "m"), ("k" if b_k_major else "n")
    elem = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    if len(a_size) == 2 and len(b_size) == 3:
        layout, g, (end, k), n = "2d3d", b_size[0], a_size, b_size[2]
        m = 0  # the ragged dimension: its extent is the sizes' sum
    elif len(a_size) == 3 and len(b_size) == 2:
        layout, g, (_, m, k), end = "3d2d", a_size[0], a_size, b_size[1]
        n = 0
    elif len(a_size) == 2 and len(b_size) == 2:
        if groups is None:
            raise ValueError("2D x 2D needs the offsets' length")
        layout, g, (m, end), n = "2d2d", groups, a_size, b_size[1]
        k = 0
    elif len(a_size) == 3 and len(b_size) == 3:
        g, m, k, n = a_size[0], a_size[1], a_size[2], b_size[2]
        return Problem("3d3d", g, (), m, n, k, dtype, b_major, a_major, name="inductor")
    else:
        raise ValueError(f"not a grouped_mm: A {a_size}, B {b_size}")
    sizes = even_split(end, g, alignment_bytes // elem)
    return Problem(layout, g, sizes, m, n, k, dtype, b_major, a_major, name="inductor")


def even_split(end: int, groups: int, alignment: int) -> tuple[int, ...]:
    """Group sizes of Inductor's benchmark offsets: ends at (i+1) * end / groups rounded to `alignment`, the last at
    `end` (create_offsets: round half to even, as torch.round).

    Where rounding puts an end past `end` (47 rows in 16 groups of step 8: the 15th end rounds to 48), Inductor's
    offsets decrease at the last group, whose size is then negative; its template computes no tile there (cdiv of a
    negative size is 0), as for an empty group. Such ends are clamped to `end`, which gives the kernel the same work
    and keeps every size >= 0. (Inductor's ATen choice does fail on such offsets: `offsets_decrease`.)"""
    ends = [min(e, end) for e in _rounded_ends(end, groups, alignment)] + [end]
    return tuple(e - s for s, e in zip([0, *ends[:-1]], ends, strict=True))


def _rounded_ends(end: int, groups: int, alignment: int) -> list[int]:
    """Inductor's benchmark offsets but the last: (i+1) * end / groups rounded to `alignment` (round half to even)."""
    return [round((i + 1) * end / groups / alignment) * alignment for i in range(groups - 1)]


def offsets_decrease(end: int, groups: int, alignment: int) -> bool:
    """Whether Inductor's own benchmark offsets for this shape decrease (an end rounded past `end`, as 47 rows in 16
    groups of step 8). Its max-autotune then runs the ATen choice on a negative group size, which fails a device-side
    assert and leaves the process's CUDA context unusable (torch 2.11 on an H100, stop 45): nothing more can run in
    that process. `autoheur collect --family inductor` leaves such problems out."""
    return any(e > end for e in _rounded_ends(end, groups, alignment))


@dataclass(frozen=True)
class ChoicesRead:
    """What a grouped-mm choice list says: the problem Inductor benchmarks (at its size hints), the operand sizes and
    strides that are symbolic (dynamic shapes; empty when static), and the template tiles Inductor would offer if
    those sizes were static at their hints (None when static, or where this torch's pruning could not be applied)."""

    problem: Problem
    symbolic: tuple[str, ...] = ()
    static_offer: frozenset[tuple[int, int, int, int, int]] | None = None


def read_choices(choices) -> ChoicesRead | None:
    """Read a grouped-mm choice list from its first template choice; None when it cannot be read.

    Under dynamic shapes (torch.compile's automatic dynamic recompiles with a symbolic row count on a second size)
    Inductor benchmarks every choice at the sizes' hints and keeps one for every size, so the problem is read at those
    hints too. Where the groups or its `m` (A's rows) are symbolic it also skips its pruning by rows per group (94
    template choices where a static 2D x 3D shape has 40-76), offering tiles no static shape of the hint's size is
    offered; `static_offer` is the set it would offer (the same set it did offer where only another size is symbolic:
    a 3D x 2D's or 2D x 2D's ragged extent, K)."""
    from torch._inductor.virtualized import V

    for c in choices:
        kw = template_kwargs(c)
        if kw is None:
            continue
        try:
            nodes = c.input_nodes
            sv = V.graph.sizevars  # size_hints up to torch 2.12, optimization_hints from 2.13
            hints = getattr(sv, "size_hints", None) or sv.optimization_hints
            a, b = nodes[0], nodes[1]
            groups = int(hints(nodes[2].get_size())[0]) if len(nodes) > 2 else None
            symbolic = tuple(
                f"{name}.{what}[{i}]"
                for name, n in (("A", a), ("B", b))
                for what, xs in (("size", n.get_size()), ("stride", n.get_stride()))
                for i, x in enumerate(xs)
                if _symbolic(x)
            )
            dtype = str(a.get_dtype()).removeprefix("torch.")
            a_size = hints(a.get_size())
            problem = inductor_problem(
                a_size, hints(a.get_stride()), hints(b.get_size()), hints(b.get_stride()), groups, dtype
            )
        except Exception as exc:  # an IR this code does not know: unsure, so no filtering
            log.info("autoheur.inductor: cannot read the problem: %s: %s", type(exc).__name__, exc)
            return None
        offer = None
        if symbolic:
            g = groups if groups is not None else int(a_size[0])
            offer = static_offer(g, int(a_size[-2]), a.get_dtype().itemsize, kw)
        return ChoicesRead(problem, symbolic, offer)
    return None


def choices_problem(choices) -> Problem | None:
    """The problem of a grouped-mm choice list with static sizes; None when unreadable or symbolic."""
    read = read_choices(choices)
    return read.problem if read is not None and not read.symbolic else None


def static_offer(groups: int, m: int, itemsize: int, kwargs: dict[str, str]) -> frozenset | None:
    """The (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) Inductor's lowering offers for static sizes `groups` and `m`
    (its `m`: A's rows, per group for 2D x 3D), by calling its own pruning (`early_config_prune`) on its own grid;
    None where this torch has neither or they cannot be called so."""
    try:
        from torch._inductor.kernel.mm_grouped import early_config_prune, grouped_mm_configs

        named = {k: kwargs[k] == "True" for k in ("A_IS_2D", "B_IS_2D")}
        kept = early_config_prune(int(groups), int(m), int(itemsize), grouped_mm_configs(), named)
        return frozenset(tile_key(twin) for twin in _twins(kept))
    except Exception as exc:  # another torch's pruning: no static offer to narrow to
        log.info("autoheur.inductor: cannot apply Inductor's static pruning: %s: %s", type(exc).__name__, exc)
        return None


def tile_key(cfg: KernelConfig) -> tuple[int, int, int, int, int]:
    """The part of a twin config that names Inductor's template config (`static_offer`'s members)."""
    return (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps)


def _symbolic(x) -> bool:
    return not isinstance(x, int) and not (hasattr(x, "is_number") and x.is_number)


def grid_hash() -> str:
    """Fingerprint of Inductor's grid as installed (the Inductor family's config space)."""
    import hashlib

    text = "inductor-grouped-mm:" + ",".join(sorted(c.config_id for c in grid_configs()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def template_source_hash() -> str:
    """sha256 of Inductor's grouped-mm lowering and its Triton template, as installed (the family's kernel source)."""
    import hashlib
    from pathlib import Path

    import torch._inductor.kernel.mm_grouped as mg

    here = Path(mg.__file__).parent
    h = hashlib.sha256()
    for path in (Path(mg.__file__), here / "templates" / "triton_mm_grouped.py.jinja"):
        h.update(path.read_bytes() if path.exists() else b"missing:" + path.name.encode())
    return h.hexdigest()[:16]
