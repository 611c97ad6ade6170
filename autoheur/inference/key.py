"""The tuning key of a call: what must match for a tuned config to be reused.

Everything Triton specializes on or the config space depends on is exact (layout, dtypes, operand majors, the fixed
extents n / k / m, the group count, TMA alignment, the device). The ragged extent is bucketed: token counts change on
every batch, and retuning each would defeat the cache. The bucket is the total ragged extent (the token-expert rows
of a MoE layer) rounded up to a power of two, exact up to 16, the way serving engines bucket M (vLLM's fused-MoE
tables are keyed by token count). It is read from the operand shape, never from the offsets, so computing the key
needs no device-to-host copy; the routing (how the rows spread over groups) is therefore not in the key, and the
problem tuned for a bucket is the call that first hit it. An earlier key bucketed the mean rows per group: all
decode batches of a many-expert layer (under one row per group) then shared one bucket, although their active
expert counts, and best configs, differ (benchmarks/bucketing.py measures both).
"""

from __future__ import annotations

from dataclasses import dataclass

from autoheur.kernels.config import Ragged
from autoheur.kernels.validate import GemmCall

KEY_VERSION = 2  # bump when what a key's fields mean changes (2: the total, not the mean per group, is bucketed)


def bucket(rows: float) -> int:
    """Rows bucket: exact up to 16, then the next power of two."""
    if rows <= 16:
        return max(0, int(-(-rows // 1)))
    b = 16
    while b < rows:
        b *= 2
    return b


@dataclass(frozen=True, slots=True)
class TuneKey:
    device: str
    layout: int  # Ragged
    dtype: str
    out_dtype: str
    a_k_contig: bool
    b_n_contig: bool
    tma_aligned: bool
    groups: int
    m: int
    n: int
    k: int
    ragged_bucket: int  # bucketed total extent along the ragged dimension (0 when none)

    def to_str(self) -> str:
        return "|".join(str(getattr(self, f)) for f in self.__slots__)


def tune_key(call: GemmCall) -> TuneKey:
    return TuneKey(
        device=call.device.name,
        layout=int(call.ragged),
        dtype=str(call.a.dtype).removeprefix("torch."),
        out_dtype=str(call.out_dtype).removeprefix("torch."),
        a_k_contig=call.a_k_contig,
        b_n_contig=call.b_n_contig,
        tma_aligned=call.tma_aligned,
        groups=call.groups,
        m=call.m,
        n=call.n,
        k=call.k,
        ragged_bucket=bucket(call.ragged_total) if call.ragged != Ragged.NONE else 0,
    )
