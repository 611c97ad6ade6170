"""The tuning key of a call: what must match for a tuned config to be reused.

Everything Triton specializes on or the config space depends on is exact (layout, dtypes, operand majors, the fixed
extents n / k / m, the group count, TMA alignment, the device). The ragged extent is bucketed: token counts change on
every batch, and retuning each would defeat the cache. The bucket is the mean rows per group rounded up to a power
of two (below 16: its own bucket each of 1-16), the way serving engines bucket M; it is read from the operand shape,
never from the offsets, so computing the key needs no device-to-host copy. The problem tuned for a bucket is the
call that first hit it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoheur.kernels.config import Ragged
from autoheur.kernels.validate import GemmCall


def bucket(mean_rows: float) -> int:
    """Rows-per-group bucket: exact up to 16, then the next power of two."""
    if mean_rows <= 16:
        return max(0, int(-(-mean_rows // 1)))
    b = 16
    while b < mean_rows:
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
    ragged_bucket: int  # bucketed mean extent per group along the ragged dimension (0 when none)

    def to_str(self) -> str:
        return "|".join(str(getattr(self, f)) for f in self.__slots__)


def tune_key(call: GemmCall) -> TuneKey:
    mean = call.ragged_total / call.groups if call.ragged != Ragged.NONE else 0
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
        ragged_bucket=bucket(mean) if call.ragged != Ragged.NONE else 0,
    )
