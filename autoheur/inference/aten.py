"""`torch._grouped_mm` itself as a tuning candidate.

The brief autotune times the predicted Triton configs and, where AUTOHEUR_ATEN allows, torch's own grouped GEMM
(CUTLASS on sm90) on the same inputs, and keeps whichever is fastest, as Inductor's max-autotune keeps its ATen
choice. Where the vendor kernel wins (large prefill problems, where both run near the matmul ceiling), a call then
costs what `torch._grouped_mm` costs instead of a few percent more. The winner is cached by its id, "aten", beside
the Triton config ids.

AUTOHEUR_ATEN:
  auto  (default) a candidate when the call runs on a GPU (in the interpreter the comparison would be meaningless:
        ATen's CPU code against the interpreted kernel)
  on    always a candidate (also on the CPU, where tests use it)
  off   never: Triton configs only
A call that torch._grouped_mm cannot run (a dtype or layout it does not support) just leaves it out of the timing.
A call whose operand has overlapping rows or columns (a leading stride below the inner extent: a sliding window),
which the kernel reads and torch refuses, is tuned as with AUTOHEUR_ATEN=off: its tuning key is the dense operand's,
whose choice, made with torch._grouped_mm among the candidates, may be "aten".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from autoheur import SettingError
from autoheur.kernels.config import KernelConfig
from autoheur.kernels.validate import GemmCall, interpreting

ATEN_ID = "aten"
ATEN_SETTINGS = ("auto", "on", "off")


@dataclass(frozen=True)
class AtenChoice:
    """The tuned choice "run torch._grouped_mm" (it has an id like a KernelConfig, and nothing else)."""

    config_id: str = ATEN_ID


ATEN = AtenChoice()


def choice_from_id(config_id: str) -> KernelConfig | AtenChoice:
    """A cached or timed choice by id: ATEN, or the KernelConfig the id names (ValueError for a malformed id)."""
    return ATEN if config_id == ATEN_ID else KernelConfig.from_id(config_id)


def aten_setting() -> str:
    value = os.environ.get("AUTOHEUR_ATEN", "auto").strip().lower()
    if value not in ATEN_SETTINGS:
        raise SettingError(f"AUTOHEUR_ATEN={value!r}: expected one of {ATEN_SETTINGS}")
    return value


def aten_allowed(gpu: bool) -> bool:
    """Whether torch._grouped_mm is timed beside the configs, on a GPU (`gpu`) or in the interpreter."""
    setting = aten_setting()
    return setting == "on" or (setting == "auto" and gpu)


def _torch_takes_layout(t: torch.Tensor) -> bool:
    """Whether torch._grouped_mm takes `t`'s last two dims (its check_valid_strides_and_return_transposed, alignment
    aside): one dim of stride 1 and the other's stride at least that dim's extent, so that no two rows (or columns)
    overlap. validate takes overlapping ones, and the tuning key does not tell them from dense ones."""
    rows, cols = t.shape[-2:]
    s_row, s_col = t.stride()[-2:]
    return (s_row == 1 and s_col >= max(1, rows)) or (s_col == 1 and s_row >= max(1, cols))


def aten_for(call: GemmCall) -> bool:
    """Whether torch._grouped_mm is a candidate for this call (and its choice read from the cache that may hold
    "aten")."""
    return aten_allowed(call.a.is_cuda and not interpreting()) and all(_torch_takes_layout(t) for t in (call.a, call.b))


def aten_grouped_mm(call: GemmCall) -> torch.Tensor:
    """torch._grouped_mm on a validated call's tensors, its output contiguous. torch pads the output's rows to 16 bytes
    (strides (4, 1) for n = 3 float32; in 3d2d n is the ragged extent, any token count): such an output is copied, so
    that the layout does not depend on which choice won the timing, and is what the op's fake implementation says
    (torch.compile traces that; Inductor refused the padded output). The copy is timed with it."""
    out = torch._grouped_mm(call.a, call.b, call.offs, out_dtype=call.out_dtype)
    return out if out.is_contiguous() else out.contiguous()


def run_choice(call: GemmCall, choice: KernelConfig | AtenChoice, out: torch.Tensor | None = None) -> torch.Tensor:
    """Compute a validated call with a tuned choice (into `out` for a Triton config, allocated when None)."""
    if isinstance(choice, AtenChoice):
        return aten_grouped_mm(call)
    from autoheur.kernels.grouped_gemm import launch

    if out is None:
        out = torch.empty(call.out_shape, dtype=call.out_dtype, device=call.a.device)
    return launch(call, choice, out)
