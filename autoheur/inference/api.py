"""`autoheur.grouped_mm`: torch._grouped_mm's semantics, the kernel and config chosen by autoheur (or, where timing
found it fastest, torch._grouped_mm itself: aten.py).

A new tuning key (see key.py) costs one brief autotune of the predicted configs. After that, a call whose tensors
match an earlier call's in every property that validation or Triton's specialization reads (shapes, strides, dtypes,
devices, 16-byte alignment of every pointer, the offsets' too) skips validation and the key: one tuple built from
those properties, one dictionary lookup, the output allocation and the launch, whose arguments were bound once for
those properties, through the compiled kernel's own launcher once it is known (kernels/launcher.py).
benchmarks/inference_eager.py measures what that adds over launching the kernel directly. Every other call is
validated in full before anything runs.
"""

from __future__ import annotations

import torch
from torch.autograd import forward_ad

from autoheur import env_flag
from autoheur.inference.aten import ATEN, aten_allowed, aten_grouped_mm
from autoheur.inference.tuner import default_tuner
from autoheur.kernels.config import Ragged
from autoheur.kernels.grouped_gemm import launch
from autoheur.kernels.launcher import BoundLaunch
from autoheur.kernels.validate import (
    ALIGN_BYTES,
    GemmCall,
    check_config,
    check_offsets_values,
    interpreting,
    other_gpu,
    validate,
)

# Read the offsets back to check their values on every call (one small device-to-host copy and a sync; skipped during
# CUDA graph capture). AUTOHEUR_CHECK_OFFSETS=0 trusts them after the shape, dtype and device checks, as
# torch._grouped_mm does: a steady-state loop then never waits on the GPU. Read once, at import.
CHECK_OFFSETS = env_flag("AUTOHEUR_CHECK_OFFSETS", True)

_PLAIN = (torch.Tensor, torch.nn.Parameter)  # subclasses (fake, functional, wrapper tensors) take the full path
_TENSORS = ("a", "b", "offs")


def _plain(a, b, offs=None) -> bool:
    """Whether the tensors (offs may be None) are eager torch.Tensors or Parameters: traced ones (fake, functional,
    wrapper tensors) are subclasses."""
    return type(a) in _PLAIN and type(b) in _PLAIN and (offs is None or type(offs) in _PLAIN)


# Whether a torch.func transform (grad, jvp, vmap, ...) is running. Its wrappers (vmap's batched tensors, grad's or
# jvp's tensors, and any tensor allocated inside it, the output included, even from plain inputs) are of type
# torch.Tensor but have no storage to launch on: such calls go through the custom op, whose implementation torch's
# transforms call outside themselves, on plain tensors (vmap through its batching fallback, slice by slice). Asked on
# the slow path only: the cached call finds out from its launch's failure (`_run_here`).
_transforms_active = torch._C._are_functorch_transforms_active

# How many TorchDispatchModes are active (FakeTensorMode, make_fx's proxy mode, a user's logging mode). A mode sees the
# ops a call dispatches, and a kernel launch is none: FakeTensorMode's output has no memory (validate named it a zero
# or functionalized tensor), make_fx's graph would hold the output's allocation alone (in the interpreter the launch
# failed inside the mode). Such calls, and their backward's, go through the custom ops, which a mode sees (fake
# implementation, graph node) and runs outside itself, on plain tensors.
_dispatch_modes = torch._C._len_torch_dispatch_stack


def _is_tensor(t) -> bool:
    return isinstance(t, torch.Tensor)


def _dispatches(t: torch.Tensor) -> bool:
    """Whether `t` is a tensor subclass with its own __torch_dispatch__ (fake, functional, wrapper tensors such as
    torch.testing's TwoTensor): it has no memory of its own to launch on (validate read a null pointer), and runs the
    custom op through its dispatch, on the tensors it wraps. A subclass without one (`Tensor.as_subclass`) has its
    memory, and is launched on."""
    return type(t).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__


def _functionalizing() -> bool:
    """Whether the innermost torch.func transform is functionalize, which runs no autograd.Function ("NYI:
    Functionalize rule for custom_function_call"): a call there goes through the custom op, which it functionalizes,
    grad mode on or off."""
    top = torch._C._functorch.peek_interpreter_stack()
    return top is not None and top.key() == torch._C._functorch.TransformType.Functionalize


def _signature(a, b, offs, out_dtype) -> tuple | None:
    """Every tensor property `validate` reads and Triton specializes a compiled kernel on, or None when the fast path
    does not apply. Two calls with equal signatures validate to the same result (the offsets' values aside, which
    `check_offsets_values` reads) and dispatch to the same compiled kernel (kernels/launcher.py keeps it)."""
    if not _plain(a, b, offs):
        return None
    # Each pointer's offset from 16 bytes, None for a null one (a zero tensor's, which validate refuses with elements).
    pa, pb = a.data_ptr(), b.data_ptr()
    if offs is None:
        o = None
    else:
        po = offs.data_ptr()
        o = (offs.shape, offs.stride(), offs.dtype, offs.device, po % ALIGN_BYTES if po else None, offs.is_neg())
    return (a.shape, a.stride(), a.dtype, a.device, pa % ALIGN_BYTES if pa else None, a.is_neg(),
            b.shape, b.stride(), b.dtype, b.device, pb % ALIGN_BYTES if pb else None, b.is_neg(),
            out_dtype, o)  # fmt: skip


def _refuse_tangents(a, b) -> None:
    """Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp / jacfwd): torch._grouped_mm has no forward
    derivative and raises NotImplementedError on a dual input; the kernel reads the primal alone, and its output would
    have no tangent, silently a zero derivative. Called only inside a dual level (one int read on every call)."""
    for name, t in (("a", a), ("b", b)):
        if isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None:
            raise NotImplementedError(
                f"{name} is a dual tensor (forward-mode AD: torch.autograd.forward_ad, torch.func.jvp or jacfwd): "
                "grouped_mm has no forward-mode derivative, as torch._grouped_mm has none; use reverse mode "
                "(backward, torch.autograd.grad)"
            )


def _rebind(fields: dict, a, b, offs) -> GemmCall:
    """A validated call from a stored one's fields and new tensors (GemmCall's frozen __init__ costs microseconds
    per field; this is one dict copy)."""
    call = object.__new__(GemmCall)
    call.__dict__.update(fields)
    call.__dict__.update(a=a, b=b, offs=offs)
    return call


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Same as `torch._grouped_mm(a, b, offs, out_dtype=out_dtype)`, with a tuned Triton kernel (or torch's own
    where the brief autotune timed it fastest). Differentiable, as torch._grouped_mm is: with grad mode on and an input
    that requires grad, or while torch.compile traces, the call goes through op.py's autograd formula."""
    try:
        needs_grad = (a.requires_grad or b.requires_grad) and torch.is_grad_enabled()
    except AttributeError:  # not a tensor: the validator's error names the argument
        validate(a, b, offs, out_dtype)
        raise
    if forward_ad._current_level >= 0:  # inside a dual level (torch.func.jvp enters one too)
        _refuse_tangents(a, b)
    if needs_grad or torch.compiler.is_compiling() or _dispatch_modes():
        from autoheur.inference.op import differentiable_grouped_mm

        return differentiable_grouped_mm(a, b, offs, out_dtype)
    return _run(a, b, offs, out_dtype, CHECK_OFFSETS)


def grouped_mm_offsets_checked(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                               out_dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """`grouped_mm` without autograd and without reading the offsets back, for a caller that checked these very
    offsets already: the backward of a call that checked them, whose saved offsets autograd refuses to hand back if
    they were modified in place since (their ragged extent is the same tensor dimension in all three GEMMs)."""
    if forward_ad._current_level >= 0:
        _refuse_tangents(a, b)
    return _run(a, b, offs, out_dtype, False)


def _run(a, b, offs, out_dtype, check_offsets: bool) -> torch.Tensor:
    """The call on `a`'s GPU: Triton launches on the current device (and TMA's scratch is allocated there), so tensors
    on another GPU than the current one (a process that moved its model to cuda:1 without torch.cuda.set_device) ran
    on GPU 0's stream with GPU 1's pointers; torch's own ops guard the device themselves."""
    index = other_gpu(a)
    if index is not None:
        with torch.cuda.device(index):
            return _run_here(a, b, offs, out_dtype, check_offsets)
    return _run_here(a, b, offs, out_dtype, check_offsets)


def _run_here(a, b, offs, out_dtype, check_offsets: bool) -> torch.Tensor:
    tuner = default_tuner()
    try:
        sig = _signature(a, b, offs, out_dtype)
        hit = tuner.fast.get(sig) if sig is not None else None
    except (TypeError, RuntimeError):  # an unhashable out_dtype, a sparse tensor's data_ptr: `validate` below names it
        sig = hit = None
    if hit is not None and hit[1] is None and not aten_allowed(a.is_cuda and not interpreting()):
        hit = None  # torch._grouped_mm won while AUTOHEUR_ATEN allowed it, since turned off: tuned again without it
    if hit is not None:
        fields, bound = hit  # bound: a BoundLaunch, or None where torch._grouped_mm won the tuning
        if bound is None or (check_offsets and offs is not None):
            call = _rebind(fields, a, b, offs)
            if check_offsets:
                check_offsets_values(call)
            if bound is None:
                return aten_grouped_mm(call)
        try:
            return bound(a, b, offs)
        except RuntimeError:  # its output, allocated inside a torch.func transform, has no data pointer: the op
            if not _transforms_active():
                raise
            return torch.ops.autoheur.grouped_mm(a, b, offs, out_dtype)
    if _transforms_active():  # wrapped inputs (sig failed on their pointers) or plain ones: see _transforms_active
        # a grad transform below a vmap sees gradients its batched inputs do not show; functionalize takes the op
        if torch.is_grad_enabled() and not _functionalizing():
            from autoheur.inference.op import _Transformed

            return _Transformed.apply(a, b, offs, out_dtype)
        return torch.ops.autoheur.grouped_mm(a, b, offs, out_dtype)
    tensors = (a, b) if offs is None else (a, b, offs)
    if sig is None and all(map(_is_tensor, tensors)) and any(map(_dispatches, tensors)):  # else validate names it
        return torch.ops.autoheur.grouped_mm(a, b, offs, out_dtype)
    call = validate(a, b, offs, out_dtype, check_offsets=check_offsets)
    out = torch.empty(call.out_shape, dtype=call.out_dtype, device=a.device)
    if out.numel() == 0 or call.groups == 0:  # no groups: every row (or column) is past the last offset
        return out
    if call.k == 0 and call.ragged != Ragged.K:
        return out.zero_()
    cfg = tuner.config_for(call)
    if cfg is not ATEN:
        check_config(cfg, call)  # the tuner never returns one that fails this (a cached one that would is retuned)
    if sig is not None:
        fields = {f: v for f, v in call.__dict__.items() if f not in _TENSORS}
        tuner.remember(sig, fields, None if cfg is ATEN else BoundLaunch(call, cfg))
    return aten_grouped_mm(call) if cfg is ATEN else launch(call, cfg, out)
