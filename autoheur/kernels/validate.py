"""Input validation for the grouped GEMM: every check runs before any launch, and each error names its argument.

The rules are torch._grouped_mm's: 2D/3D operands whose layout picks the ragged dimension, int32 offsets of
cumulative group ends, row- or column-major operands whose leading stride is a multiple of 16 bytes.
"""

from __future__ import annotations

import math
import operator
import os
from dataclasses import dataclass
from functools import cache

import torch

from autoheur.device import H100_SXM, DeviceSpec
from autoheur.kernels.config import BLOCK_K, BLOCK_M, BLOCK_N, KernelConfig, Ragged, Signature, infeasible_reason

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ALIGN_BYTES = 16  # torch._grouped_mm's stride rule, and what TMA descriptors need
_RAGGED_BY_NDIM = {(2, 3): Ragged.M, (3, 2): Ragged.N, (2, 2): Ragged.K, (3, 3): Ragged.NONE}
_RAGGED_EXTENT = {Ragged.M: "a.shape[0]", Ragged.N: "b.shape[1]", Ragged.K: "a.shape[1]"}  # what offs[-1] bounds


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU: TRITON_INTERPRET as Triton's own knob reads it, so that any spelling
    Triton takes as on ("1", "true", "on", "yes", "y", any case, in triton 3.9) is on here too."""
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):  # an older Triton, without this knob, took "1" alone
        return os.environ.get("TRITON_INTERPRET", "0") == "1"


@cache
def _device_spec(index: int) -> DeviceSpec:
    return DeviceSpec.from_torch(index)


@dataclass(frozen=True)
class GemmCall:
    """A validated call: the operands plus everything the launcher and the config space need."""

    a: torch.Tensor
    b: torch.Tensor
    offs: torch.Tensor | None
    ragged: Ragged
    groups: int
    m: int  # fixed extents; the ragged one is 0 here and `ragged_total` holds its total
    n: int
    k: int
    ragged_total: int
    a_strides: tuple[int, int, int]  # (group, m, k); group stride 0 for a 2D operand
    b_strides: tuple[int, int, int]  # (group, k, n)
    c_strides: tuple[int, int, int]  # (group, m, n)
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    a_k_contig: bool
    b_n_contig: bool
    tma_aligned: bool
    device: DeviceSpec

    @property
    def elem_bytes(self) -> int:
        return self.a.element_size()

    @property
    def signature(self) -> Signature:
        return Signature(self.ragged, self.elem_bytes, self.tma_aligned)


def _major(t: torch.Tensor, name: str) -> tuple[bool, bool]:
    """(row_major, lead_aligned): whether the last dim of `t` is the contiguous one, and whether its leading stride
    is a multiple of 16 bytes. A ValueError when neither dim is contiguous or a needed alignment is missing."""
    rows, cols = t.shape[-2], t.shape[-1]
    s_row, s_col = t.stride(-2), t.stride(-1)
    esize = t.element_size()
    quantum = ALIGN_BYTES // esize
    if s_col == 1 or cols == 1:
        lead, row_major = s_row, True
    elif s_row == 1 or rows == 1:
        lead, row_major = s_col, False
    else:
        raise ValueError(f"{name} has strides {tuple(t.stride())}: its last two dims must be row- or column-major")
    lead_aligned = (lead * esize) % ALIGN_BYTES == 0
    if not lead_aligned and min(rows, cols) > 1:  # a size-1 dim has no real leading stride (torch allows it)
        inner = cols if row_major else rows
        copies = [  # a dense copy's leading stride: cols row-major (.contiguous()), rows column-major
            (cols, "call .contiguous() (a dense row-major copy: its rows are aligned)"),
            (rows, "call .mT.contiguous().mT (a dense column-major copy: its columns are aligned)"),
        ]
        if not row_major:  # the operand's own major first (a weight gradient's A is column-major for TMA)
            copies.reverse()
        fix = next(
            (text for extent, text in copies if (extent * esize) % ALIGN_BYTES == 0),
            f"pad the inner dimension ({inner}) to a multiple of {quantum}, e.g. a slice of a wider buffer",
        )
        raise ValueError(
            f"{name} has strides {tuple(t.stride())}: the leading stride must be a multiple of {ALIGN_BYTES} bytes "
            f"({quantum} {str(t.dtype).removeprefix('torch.')} elements); {fix}"
        )
    _check_memory(t, name)
    if t.data_ptr() % ALIGN_BYTES:
        raise ValueError(f"{name}'s data pointer is not {ALIGN_BYTES}-byte aligned")
    if t.ndim == 3 and t.shape[0] > 1 and (t.stride(0) * esize) % ALIGN_BYTES:
        raise ValueError(f"{name} has group stride {t.stride(0)}: it must be a multiple of {ALIGN_BYTES} bytes")
    return row_major, lead_aligned


def _check_memory(t: torch.Tensor, name: str) -> None:
    """A tensor with elements whose data pointer is null has no memory the kernel can read (it would read address 0):
    a zero tensor (torch._efficientzerotensor) or one inside torch.func.functionalize. torch._grouped_mm refuses a
    zero tensor too; Triton passes a null pointer on to the kernel."""
    if t.data_ptr() == 0 and t.numel() > 0:
        raise ValueError(
            f"{name} has no memory to read (its data pointer is null): a zero tensor (torch._efficientzerotensor; "
            f"pass {name}.clone()) or a functionalized one (torch.func.functionalize; call the custom op, "
            "torch.ops.autoheur.grouped_mm)"
        )


# The kernel adds a tile's lane offsets (a lane index below the block extent times a row, column or k stride, and a
# k step of BLOCK_K times a k stride) in 32 bits wherever Triton passes the stride as a 32-bit int (below 2**31):
# only its tile and group bases are 64-bit. A stride whose products reach 2**31 wraps them to a negative offset.
MAX_LANE = max(BLOCK_M + BLOCK_N + BLOCK_K) - 1  # the largest lane index of a tile
MAX_K_STEP = max(BLOCK_K)
INT32_LIMIT = 2**31


def _lane_steps(extent: int, along_k: bool) -> int:
    """The most strides of a dim of `extent` elements the kernel multiplies in 32 bits: a lane index, at most MAX_LANE
    and, unmasked, extent - 1; along K also the k step BLOCK_K (at most MAX_K_STEP), taken only where BLOCK_K <
    extent."""
    return min(extent - 1, MAX_K_STEP if along_k else MAX_LANE)


def _check_lane_offsets(name: str, shape, strides, fix: str, k_dim: int | None = None) -> None:
    """ValueError where a stride of a dim of 2+ elements is below 2**31 (a 32-bit kernel argument) but `_lane_steps`
    times it is not: the kernel's 32-bit lane offsets would wrap to wrong addresses (the interpreter segfaults).
    `k_dim`: which of the two dims is K (None for the output). Every config is refused alike, though one of smaller
    blocks could run the call: feasibility is the space's (SPACE_HASH), which knows no strides."""
    for dim, (extent, stride) in enumerate(zip(shape, strides, strict=True)):
        steps = _lane_steps(extent, dim == k_dim)
        if extent > 1 and stride < INT32_LIMIT <= steps * stride:
            raise ValueError(
                f"{name} has stride {stride} along a dim of {extent} (dim {dim} of its last two): the kernel computes "
                f"a tile's offsets in 32 bits, which {steps} such steps overflow (2**31); {fix}"
            )


def check_lane_offsets(a_shape, a_strides, b_shape, b_strides, out_shape, k: int, ragged: Ragged) -> None:
    """`_check_lane_offsets` over a call's operands (the extents and strides of their last two dims) and its output
    (contiguous), where the call launches: shapes and strides alone, so the op's fake implementation runs it on a
    trace's static ones too."""
    if math.prod(out_shape) > 0 and (k > 0 or ragged == Ragged.K):  # a launch
        other = "pass a copy in the other major if its leading stride is smaller, or split the call"
        _check_lane_offsets("a", a_shape, a_strides, other, k_dim=1)  # a: [.., M, K] in every layout
        _check_lane_offsets("b", b_shape, b_strides, other, k_dim=0)  # b: [.., K, N]
        # its row stride is its column count, N in every layout (the ragged one in 3d2d alone): fewer columns help
        _check_lane_offsets("the output", out_shape[-2:], (out_shape[-1], 1),
                            "split the call along N (the output's columns), one call per slice")  # fmt: skip


def other_gpu(t) -> int | None:
    """The index of `t`'s CUDA device where that is not the current one (Triton launches on the current device), else
    None: the current GPU, the CPU, another device type (an MPS or XPU tensor has an index too, and a build without
    CUDA has no current CUDA device to ask for), or not a tensor (validate names each)."""
    device = getattr(t, "device", None)
    if getattr(device, "type", None) != "cuda" or device.index is None:
        return None
    return None if device.index == torch.cuda.current_device() else device.index


def operand_ok(t: torch.Tensor) -> bool:
    """Whether the kernel takes `t` as an operand as it is (layout, 16-byte strides and pointer): what `validate`
    checks of `a` and `b`. For a tensor made elsewhere, such as an incoming gradient, that may need a copy."""
    try:
        _major(t, "t")
    except ValueError:
        return False
    return True


def _check_tensor(x, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.is_nested:  # no sizes or strides to read: torch's own error is an internal one
        fix = "a 1D tensor" if name == "offs" else f"torch.cat({name}.unbind()) and the pieces' cumulative sizes"
        raise TypeError(f"{name} is a nested tensor: the kernel reads dense (strided) ones; pass {fix} as int32 offs")
    if x.layout != torch.strided:
        raise TypeError(f"{name} is a {x.layout} tensor: the kernel reads dense (strided) ones; pass {name}.to_dense()")
    if x.is_neg():  # torch._neg_view: its memory holds the values before the negation, which the kernel would read
        raise TypeError(f"{name} is a negative view (its neg bit is set): the kernel reads the memory, which holds "
                        f"-{name}; pass {name}.resolve_neg()")  # fmt: skip
    return x


def check_offsets_values(call: GemmCall) -> None:
    """Check the offsets' values (one device-to-host copy and a sync): non-negative, non-decreasing, within the ragged
    extent. Skipped during CUDA graph capture, where such a copy is illegal."""
    if call.offs is None or _capturing(call.a):
        return
    total, what = call.ragged_total, _RAGGED_EXTENT[call.ragged]
    o = call.offs.cpu().tolist()
    if o and o[0] < 0:
        raise ValueError(f"offs[0]={o[0]} is negative: offsets are cumulative group ends")
    for i in range(1, len(o)):
        if o[i] < o[i - 1]:
            raise ValueError(f"offs must be non-decreasing: offs[{i}]={o[i]} < offs[{i - 1}]={o[i - 1]}")
    if o and o[-1] > total:
        raise ValueError(f"offs[-1]={o[-1]} is beyond the ragged dimension ({what}={total})")


def check_dtypes(a_dtype: torch.dtype, b_dtype: torch.dtype, out_dtype) -> torch.dtype:
    """The output dtype, or validate's TypeError for an unsupported input dtype, two input dtypes or an out_dtype
    other than None, the inputs' or float32. Dtypes only: the op's fake implementation checks them as validate does."""
    if a_dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"a has dtype {a_dtype}; supported: bfloat16, float16, float32")
    if b_dtype != a_dtype:
        raise TypeError(f"b has dtype {b_dtype} but a has {a_dtype}: both operands must share one dtype")
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"out_dtype={out_dtype!r} is a {type(out_dtype).__name__}: pass a torch.dtype or None")
    out_dtype = a_dtype if out_dtype is None else out_dtype
    if out_dtype not in (a_dtype, torch.float32):
        choices = "None or torch.float32" if a_dtype == torch.float32 else f"None, {a_dtype} or torch.float32"
        raise TypeError(f"out_dtype={out_dtype} is not supported for {a_dtype} inputs: use {choices}")
    return out_dtype


def check_offs_dtype_and_rank(offs: torch.Tensor) -> None:
    """validate's TypeError for offsets that are not int32, then its ValueError for offsets that are not 1D."""
    if offs.dtype != torch.int32:
        raise TypeError(f"offs has dtype {offs.dtype}; it must be torch.int32")
    if offs.dim() != 1:
        raise ValueError(f"offs must be 1D, got shape {tuple(offs.shape)}")


def check_offs_contiguous(offs: torch.Tensor, known=bool) -> None:
    """validate's ValueError for offsets of more than one entry whose stride is not 1. `known(condition)` reads a
    condition: the op's fake implementation passes one that answers no where torch.compile cannot know (an unbacked
    size), leaving that case to this check at run time. The stride is asked first: a contiguous 1D tensor's is the
    int 1, so a trace of one adds no guard on its length."""
    if known(offs.stride(0) != 1) and known(offs.shape[0] > 1):
        raise ValueError(f"offs must be contiguous (stride {offs.stride(0)}); pass offs.contiguous()")


def check_same_device(t: torch.Tensor, a: torch.Tensor, name: str) -> None:
    """validate's ValueError for an operand `name` (b, offs) on another device than a."""
    if t.device != a.device:
        raise ValueError(f"{name} is on {t.device} but a is on {a.device}: all tensors must be on one device")


def ragged_layout(a_ndim: int, b_ndim: int, has_offs: bool) -> Ragged:
    """The layout of operands of these ranks, or validate's ValueError for ranks no layout has, or offsets given to
    a batched (3D x 3D) call or missing from a ragged one."""
    ragged = _RAGGED_BY_NDIM.get((a_ndim, b_ndim))
    if ragged is None:
        raise ValueError(f"a.ndim={a_ndim}, b.ndim={b_ndim}: each operand must be 2D or 3D")
    if ragged == Ragged.NONE and has_offs:
        raise ValueError("offs must be None when a and b are both 3D (batched)")
    if ragged != Ragged.NONE and not has_offs:
        raise ValueError(f"offs is required when an operand is 2D (a is {a_ndim}D, b is {b_ndim}D)")
    return ragged


def layout_extents(ragged: Ragged, a_shape, b_shape, offs_len, differs=operator.ne) -> tuple:
    """(groups, m, n, k, ragged total, out shape) of operands of these shapes in the layout `ragged` names (0 for the
    ragged extent), or validate's ValueError for a mismatched K, group count or offsets length. `differs(x, y)` says
    whether two extents differ: the op's fake implementation passes one that answers no where torch.compile cannot know
    (an unbacked size), leaving that case to this check at run time."""
    if ragged == Ragged.M:  # a [M_total, K] x b [G, K, N]
        if differs(a_shape[1], b_shape[1]):
            raise ValueError(f"mismatched K: a is {tuple(a_shape)}, b is {tuple(b_shape)} (a.shape[1] != b.shape[1])")
        groups, m, n, k, total = b_shape[0], 0, b_shape[2], a_shape[1], a_shape[0]
        out_shape = (a_shape[0], b_shape[2])
    elif ragged == Ragged.N:  # a [G, M, K] x b [K, N_total]
        if differs(a_shape[2], b_shape[0]):
            raise ValueError(f"mismatched K: a is {tuple(a_shape)}, b is {tuple(b_shape)} (a.shape[2] != b.shape[0])")
        groups, m, n, k, total = a_shape[0], a_shape[1], 0, a_shape[2], b_shape[1]
        out_shape = (a_shape[1], b_shape[1])
    elif ragged == Ragged.K:  # a [M, K_total] x b [K_total, N]
        if differs(a_shape[1], b_shape[0]):
            raise ValueError(f"mismatched K: a is {tuple(a_shape)}, b is {tuple(b_shape)} (a.shape[1] != b.shape[0])")
        groups, m, n, k, total = offs_len, a_shape[0], b_shape[1], 0, a_shape[1]
        out_shape = (offs_len, a_shape[0], b_shape[1])
    else:  # a [G, M, K] x b [G, K, N]
        if differs(a_shape[0], b_shape[0]):
            raise ValueError(f"mismatched groups: a is {tuple(a_shape)}, b is {tuple(b_shape)}")
        if differs(a_shape[2], b_shape[1]):
            raise ValueError(f"mismatched K: a is {tuple(a_shape)}, b is {tuple(b_shape)} (a.shape[2] != b.shape[1])")
        groups, m, n, k, total = a_shape[0], a_shape[1], b_shape[2], a_shape[2], 0
        out_shape = (a_shape[0], a_shape[1], b_shape[2])
    if offs_len is not None and differs(offs_len, groups):
        raise ValueError(f"offs has {offs_len} entries but there are {groups} groups")
    return groups, m, n, k, total, out_shape


def validate(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    *,
    check_offsets: bool = True,
) -> GemmCall:
    a = _check_tensor(a, "a")
    b = _check_tensor(b, "b")
    out_dtype = check_dtypes(a.dtype, b.dtype, out_dtype)
    check_same_device(b, a, "b")
    if a.device.type not in (("cpu", "cuda") if interpreting() else ("cuda",)):
        raise ValueError(
            f"a is on {a.device}: the Triton kernel runs on a CUDA GPU (TRITON_INTERPRET=1 runs it on the CPU)"
        )
    ragged = ragged_layout(a.ndim, b.ndim, offs is not None)
    if ragged != Ragged.NONE:
        offs = _check_tensor(offs, "offs")
        check_offs_dtype_and_rank(offs)
        check_offs_contiguous(offs)
        check_same_device(offs, a, "offs")
        _check_memory(offs, "offs")

    offs_len = None if offs is None else offs.shape[0]
    groups, m, n, k, total, out_shape = layout_extents(ragged, a.shape, b.shape, offs_len)
    # No groups (G = 0) is valid, as torch._grouped_mm takes it: nothing to compute, and callers return the output
    # without a launch.

    a_row_major, a_lead_aligned = _major(a, "a")
    b_row_major, b_lead_aligned = _major(b, "b")

    a_strides = (a.stride(0) if a.ndim == 3 else 0, a.stride(-2), a.stride(-1))
    b_strides = (b.stride(0) if b.ndim == 3 else 0, b.stride(-2), b.stride(-1))
    if len(out_shape) == 3:
        c_strides = (out_shape[1] * out_shape[2], out_shape[2], 1)
    else:
        c_strides = (0, out_shape[1], 1)
    check_lane_offsets(a.shape[-2:], a_strides[1:], b.shape[-2:], b_strides[1:], out_shape, k, ragged)
    # TMA descriptors need 16-byte leading strides and start at each group's base: the ragged dimension must not be
    # an operand's contiguous one.
    # An operand broadcast along its rows or columns (a stride of 0, as `expand` makes) goes by pointers: a TMA
    # descriptor's strides are meant to be positive, and whether the driver takes a 0 is not proven on a GPU.
    broadcast = any(
        st == 0 and size > 1 for t in (a, b) for st, size in zip(t.stride()[-2:], t.shape[-2:], strict=True)
    )
    tma_aligned = (
        a_lead_aligned
        and b_lead_aligned
        and not broadcast
        and {
            Ragged.M: a_row_major,
            Ragged.N: not b_row_major,
            Ragged.K: (not a_row_major) and b_row_major,
            Ragged.NONE: True,
        }[ragged]
    )
    device = _device_spec(a.device.index or 0) if a.is_cuda else H100_SXM
    call = GemmCall(
        a=a, b=b, offs=offs, ragged=ragged, groups=groups, m=m, n=n, k=k, ragged_total=total,
        a_strides=a_strides, b_strides=b_strides, c_strides=c_strides,
        out_shape=tuple(out_shape), out_dtype=out_dtype,
        a_k_contig=a_row_major, b_n_contig=b_row_major, tma_aligned=tma_aligned, device=device,
    )  # fmt: skip
    if check_offsets:
        check_offsets_values(call)
    return call


def _capturing(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


BF16_ON_CPU = (  # the refusal of check_config and of the tuner (Tuner.config_for)
    "a is bfloat16 on the CPU: the Triton interpreter computes bf16 products wrongly (its dot has no bfloat16; see the "
    "README's set-up), so run bf16 on a GPU, or use float16 or float32 on the CPU"
)


def check_config(config: KernelConfig, call: GemmCall) -> None:
    if not isinstance(config, KernelConfig):
        raise TypeError(f"config must be a KernelConfig, got {type(config).__name__}")
    launches = math.prod(call.out_shape) > 0 and not (call.k == 0 and call.ragged != Ragged.K)  # as grouped_mm
    if launches and call.a.dtype == torch.bfloat16 and call.a.device.type == "cpu":  # it would run in the interpreter
        raise TypeError(BF16_ON_CPU)
    reason = infeasible_reason(config, call.signature, call.device)
    if reason is not None:
        raise ValueError(f"config {config.config_id} cannot run this call: {reason}")
