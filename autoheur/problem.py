"""A grouped-GEMM problem: the value every stage (collect, features, models, inference) talks about.

`sizes` are the ragged extents per group (rows for 2d3d, columns for 3d2d, the reduction for 2d2d; empty for the
batched 3d3d layout). `m`, `n`, `k` are the fixed extents; the ragged one is sum(sizes) and stored as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from autoheur.kernels.config import Ragged

LAYOUTS = {"2d3d": Ragged.M, "3d2d": Ragged.N, "2d2d": Ragged.K, "3d3d": Ragged.NONE}
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# The largest group count, extent or ragged total: offsets are int32 (torch._grouped_mm's), and datasets store group
# counts and sizes so. A larger value would fail only when a collection draws its inputs, or wrap in the offsets.
MAX_EXTENT = 2**31 - 1


def launches_kernel(layout: str, total: int) -> bool:
    """Whether a call of this layout and ragged total launches the kernel at all. With no rows (2d3d) or no columns
    (3d2d) the output is empty and the wrappers return it at once, before any tuning (`kernels.grouped_gemm.grouped_mm`,
    `inference.api.grouped_mm`): such a problem has no config to collect, learn or predict. A 2d2d call with K = 0
    still launches (it writes zeros), and the fixed extents are >= 1."""
    return not (LAYOUTS[layout] in (Ragged.M, Ragged.N) and total == 0)


@dataclass(frozen=True, slots=True)
class Problem:
    layout: str
    groups: int
    sizes: tuple[int, ...]
    m: int
    n: int
    k: int
    dtype: str = "bfloat16"
    b_major: str = "k"  # "k": B stored [G, N, K] (or [N, K]) and used transposed, as MoE weights are; "n": [.., K, N]
    a_major: str = "k"  # "k": A row-major [.., M, K]; "m": column-major (the weight gradient's x.t())
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout={self.layout!r}; expected one of {sorted(LAYOUTS)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r}; expected one of {sorted(DTYPES)}")
        if self.a_major not in ("k", "m"):
            raise ValueError(f"a_major={self.a_major!r} must be 'k' or 'm'")
        if self.b_major not in ("k", "n"):
            raise ValueError(f"b_major={self.b_major!r} must be 'k' or 'n'")
        if self.groups < 1:
            raise ValueError(f"groups={self.groups} must be >= 1")
        if self.groups > MAX_EXTENT:
            raise ValueError(f"groups={self.groups} is past {MAX_EXTENT} (2**31 - 1: offsets are int32)")
        ragged = LAYOUTS[self.layout]
        if ragged != Ragged.NONE and len(self.sizes) != self.groups:
            raise ValueError(f"{len(self.sizes)} sizes for {self.groups} groups")
        if any(s < 0 for s in self.sizes):
            raise ValueError("group sizes must be >= 0")
        if sum(self.sizes) > MAX_EXTENT:
            raise ValueError(f"the sizes sum to {sum(self.sizes)}, past {MAX_EXTENT} (2**31 - 1: offsets are int32)")
        unused = {Ragged.M: "m", Ragged.N: "n", Ragged.K: "k"}.get(ragged)
        for dim in "mnk":
            if dim != unused and getattr(self, dim) < 1:
                raise ValueError(f"{dim}={getattr(self, dim)} must be >= 1 for layout {self.layout}")
            if getattr(self, dim) > MAX_EXTENT:
                raise ValueError(
                    f"{dim}={getattr(self, dim)} is past {MAX_EXTENT} (2**31 - 1, autoheur's largest extent)"
                )

    @property
    def ragged(self) -> Ragged:
        return LAYOUTS[self.layout]

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def total(self) -> int:
        """Sum of the ragged extents (0 for the batched layout)."""
        return sum(self.sizes)

    @property
    def launches(self) -> bool:
        """See `launches_kernel`."""
        return launches_kernel(self.layout, self.total)

    def dims(self) -> tuple[int, int, int]:
        """(M, N, K) of the whole call, the ragged one being its total."""
        r = self.ragged
        return (
            self.total if r == Ragged.M else self.m,
            self.total if r == Ragged.N else self.n,
            self.total if r == Ragged.K else self.k,
        )

    def per_group(self) -> list[tuple[int, int, int]]:
        """(M_g, N_g, K_g) of every group: a list as long as the group count (the features' reference loops over it);
        the sums below are computed without it."""
        r = self.ragged
        if r == Ragged.NONE:
            return [(self.m, self.n, self.k)] * self.groups
        return [
            (s if r == Ragged.M else self.m, s if r == Ragged.N else self.n, s if r == Ragged.K else self.k)
            for s in self.sizes
        ]

    def flops(self) -> float:
        # Only the ragged extent varies over the groups (none in 3d3d), so sum_g 2 M_g N_g K_g is 2 M N K of the call
        # (times the batch count in 3d3d), in exact ints as the per-group sum was: a per-group list of a 3d3d problem
        # of 2**31 batches took 16 GiB
        M, N, K = self.dims()
        return float(2 * M * N * K * (self.groups if self.ragged == Ragged.NONE else 1))

    def min_bytes(self, out_bytes: int | None = None) -> float:
        """Each input read once, the output written once (the elements of the operands `make_inputs` draws, unpadded:
        without a per-group list, as `flops`)."""
        e = torch.tensor([], dtype=self.torch_dtype).element_size()
        o = e if out_bytes is None else out_bytes
        r, g = self.ragged, self.groups
        M, N, K = self.dims()
        a = M * K if r in (Ragged.M, Ragged.K) else g * self.m * K
        b = K * N if r in (Ragged.N, Ragged.K) else g * K * self.n
        c = M * N if r in (Ragged.M, Ragged.N) else g * self.m * self.n
        return float(e * (a + b) + o * c)

    def mean_size(self) -> float:
        return self.total / self.groups if self.sizes else float(self.m)

    def signature(self):
        """The kernel `Signature` that `validate` gives a valid call of this problem, without building it (inference):
        its inputs, padded where the dense ones would be refused (`make_inputs(padded=True)`)."""
        from autoheur.kernels.config import Signature

        e = DTYPES[self.dtype].itemsize
        r = self.ragged
        M, N, K = self.dims()
        a_rows, a_cols = (M, K) if r in (Ragged.M, Ragged.K) else (self.m, K)
        b_rows, b_cols = (K, N) if r in (Ragged.N, Ragged.K) else (K, self.n)

        def major(rows: int, cols: int, row_major: bool) -> tuple[bool, bool]:
            # mirrors validate._major: a size-1 dim counts as contiguous; an operand of two real dims is taken as a
            # valid call holds it, its leading stride 16-byte aligned (padded where the dense rows are not)
            padded = min(rows, cols) > 1
            if cols == 1 or row_major:  # a one-row row-major operand too: its strides say row-major (stop 78)
                return True, padded or (cols * e) % 16 == 0
            return False, padded or (rows * e) % 16 == 0

        a_row, a_al = major(a_rows, a_cols, self.a_major == "k")
        b_row, b_al = major(b_rows, b_cols, self.b_major == "n")
        rule = {Ragged.M: a_row, Ragged.N: not b_row, Ragged.K: (not a_row) and b_row, Ragged.NONE: True}[r]
        return Signature(r, e, bool(a_al and b_al and rule))

    def shrunk(self) -> Problem:
        """A tiny problem that compiles to the same Triton binary: every int keeps its residue mod 16, the ragged
        total included (it is a leading stride of an operand or the output in some layouts and majors)."""

        def small(v: int) -> int:
            return v if v <= 1 else 64 + v % 16  # Triton specializes ints == 1 and ints divisible by 16

        from autoheur.kernels.grouped_gemm import ONE_LOOP_MAX_GROUPS

        sizes: tuple[int, ...] = ()
        if self.sizes:
            # 4 groups at most, or one past the one-loop schedule's limit where the problem is past it (the kernel
            # then takes its per-group walk: another binary)
            g = min(self.groups, 4) if self.groups <= ONE_LOOP_MAX_GROUPS else ONE_LOOP_MAX_GROUPS + 1
            total = sum(self.sizes)
            if total <= 1:
                sizes = (total,) + (0,) * (g - 1)
            else:  # uneven, one empty group, the last one padded to the total's residue
                base = list((37, 0, 200, 91)[:g]) + [0] * max(0, g - 4)
                base[-1] += (total - sum(base)) % 16
                sizes = tuple(base)
        groups = len(sizes) if sizes else min(self.groups, 4)
        return replace(self, groups=groups, sizes=sizes, m=small(self.m), n=small(self.n), k=small(self.k))

    def make_inputs(self, device: str | torch.device = "cuda", seed: int = 0, padded: bool = False):
        """Random operands (never zeros: zeros hide unwritten outputs) and int32 offsets, drawn on `device` (a GPU
        draws gigabytes of weights in milliseconds; the same seed gives the same values on the same kind of device).
        Dense, so a shape whose rows are not 16-byte multiples gives operands the kernel refuses; with `padded` their
        rows are padded to 16 bytes (`padded_to_16_bytes`), as a valid call of such a shape holds them."""
        device = torch.device(device)
        gen = torch.Generator(device=device).manual_seed(seed)
        dt = self.torch_dtype
        r = self.ragged
        g = self.groups
        M, N, K = self.dims()
        a_shape = (M, K) if r in (Ragged.M, Ragged.K) else (g, self.m, K)
        b_shape = (K, N) if r in (Ragged.N, Ragged.K) else (g, K, self.n)

        def rand(shape, col_major):
            if col_major:
                shape = (*shape[:-2], shape[-1], shape[-2])
            stored = padded_to_16_bytes(shape, dt) if padded else shape
            t = torch.randn(stored, generator=gen, dtype=torch.float32, device=device).to(dt)[..., : shape[-1]]
            if padded and t.dim() == 3 and t.shape[0] > 1 and (t.stride(0) * t.element_size()) % 16:
                # a dim of 1 (no leading stride to pad): the groups start 16 bytes apart instead, as validate needs
                quantum = 16 // t.element_size()
                gs = -(-t.stride(0) // quantum) * quantum
                flat = torch.randn(t.shape[0] * gs, generator=gen, dtype=torch.float32, device=device).to(dt)
                t = flat.as_strided(t.shape, (gs, t.shape[2], 1))
            return t.transpose(-1, -2) if col_major else t

        a = rand(a_shape, self.a_major == "m")
        b = rand(b_shape, self.b_major == "k")
        offs = None
        if r != Ragged.NONE:
            offs = torch.tensor(self.sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
        return a, b, offs


class PaddedProblem(Problem):
    """A problem whose inputs are drawn `padded`: the problem of a validated run-time call (a caller's padded view, the
    backward's padded gradient), which the tuner's parallel check must draw valid to check its candidates."""

    __slots__ = ()

    def make_inputs(self, device: str | torch.device = "cuda", seed: int = 0, padded: bool = True):
        return Problem.make_inputs(self, device, seed, padded)


def padded_to_16_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[int, ...]:
    """`shape` with its last dim padded to a multiple of 16 bytes where the kernel needs it (validate._major): the
    stored shape of an operand whose rows are not 16-byte multiples, e.g. float32 K=3 (a view of the first K columns
    is then valid, as a caller's padded tensor or the backward's padded gradient is). Unchanged when already a
    multiple, or when a dim of the last two is 1 (no real leading stride), so a valid dense problem draws as before."""
    rows, cols = shape[-2], shape[-1]
    quantum = 16 // dtype.itemsize
    if min(rows, cols) <= 1 or cols % quantum == 0:
        return tuple(shape)
    return (*shape[:-1], -(-cols // quantum) * quantum)


def split_rows(total: int, groups: int, gen: torch.Generator, low: float = 0.5, high: float = 1.5) -> tuple[int, ...]:
    """`total` rows over `groups` groups with sizes proportional to U(low, high), summing exactly to `total`."""
    w = torch.empty(groups).uniform_(low, high, generator=gen)
    raw = w / w.sum() * total
    sizes = raw.floor().long()
    if not 0 <= total - int(sizes.sum()) <= groups:  # float32 past 2**24 rows: 16,777,219 read as 16,777,220
        raw = w.double() / w.double().sum() * total  # (only then: every draw that summed exactly stays the same)
        sizes = raw.floor().long()
    rest = total - int(sizes.sum())
    order = torch.argsort(raw - sizes, descending=True)[:rest]
    sizes[order] += 1
    return tuple(int(s) for s in sizes)
