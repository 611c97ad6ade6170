"""`torch.ops.autoheur.grouped_mm`: the tuned grouped GEMM as a torch custom op, with a fake (meta) implementation
for tracing and an autograd formula whose two gradients are grouped GEMMs of the same family, each tuned on its own:

  2d3d  C[M,N]   = A[M,K] . B[g]        dA = dC . B^T (2d3d)          dB[g] = A^T . dC (2d2d, ragged K = the rows)
  3d2d  C[M,Nt]  = A[g] . B[:, cols]    dA[g] = dC . B^T (2d2d)       dB = A^T . dC (3d2d)
  2d2d  C[g]     = A[:, ks] . B[ks]     dA = dC . B^T (3d2d)          dB = A^T . dC (2d3d)
  3d3d  C[g]     = A[g] . B[g]          dA = dC . B^T (3d3d)          dB = A^T . dC (3d3d)

Transposes are views (the kernel takes either major). Rows or columns past the last offset get zero gradient.

Forward-mode AD is refused as torch._grouped_mm refuses it (api.py, `_refuse_tangents`), with one gap that is
torch's: under torch.func.jvp the op's generated autograd kernel (torch/_library/autograd.py) hands the
implementation unwrapped tensors without their tangents, so the op called directly there gives a zero tangent.
torch.func.grad / jacrev run `autoheur.grouped_mm` (`_Transformed`), and vmap runs both (as does grad of a vmap); a
call on plain tensors inside a transform goes through the op (api.py, `_transforms_active`). The op called directly
under grad or jacrev on the inputs differentiated raises, as torch's custom_op makes its autograd.Function without
setup_context (pytorch/pytorch#168393).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true

from autoheur.inference.api import _PLAIN, _dispatch_modes, _plain, _transforms_active, grouped_mm_offsets_checked
from autoheur.inference.api import grouped_mm as _grouped_mm
from autoheur.kernels.tail import zero_past_end
from autoheur.kernels.validate import (
    ALIGN_BYTES,
    check_dtypes,
    check_lane_offsets,
    check_offs_contiguous,
    check_offs_dtype_and_rank,
    check_same_device,
    layout_extents,
    operand_ok,
    ragged_layout,
    validate,
)


@torch.library.custom_op("autoheur::grouped_mm", mutates_args=())
def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
               out_dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    return _grouped_mm(a, b, offs, out_dtype)


@grouped_mm.register_fake
def _(a, b, offs=None, out_dtype=None):
    # The dtypes, devices, offsets' stride and shapes as validate() checks them, in its order, so that a mismatched K
    # or group count fails the trace with its error, not the first run, and a call with two faults fails with the one
    # validate() names first. Inputs on two devices (one of them meta) dispatch here, not to the kernel: refused, else
    # an uninitialized tensor would come back as a result. Values are not readable here (fake tensors), shapes and
    # strides are (Inductor hands a custom op the strides its fake saw: needs_exact_strides); an extent the trace
    # cannot know (unbacked) is taken to match, and validate() checks it then.
    out_dtype = check_dtypes(a.dtype, b.dtype, out_dtype)
    check_same_device(b, a, "b")
    ragged = ragged_layout(a.dim(), b.dim(), offs is not None)
    if offs is not None:
        check_offs_dtype_and_rank(offs)
        check_offs_contiguous(offs, known=guard_or_false)
        check_same_device(offs, a, "offs")
    offs_len = None if offs is None else offs.shape[0]
    *_, k, _, shape = layout_extents(ragged, a.shape, b.shape, offs_len, differs=_may_differ)
    dims = (*a.shape[-2:], *a.stride()[-2:], *b.shape[-2:], *b.stride()[-2:], *shape, k)
    if all(type(d) is int for d in dims):  # static: the 32-bit lane-offset rule at the trace (symbolic: at the run)
        check_lane_offsets(a.shape[-2:], a.stride()[-2:], b.shape[-2:], b.stride()[-2:], shape, k, ragged)
    return a.new_empty(shape, dtype=out_dtype)


def _may_differ(x, y) -> bool:
    """Whether two extents differ, for a trace: an unbacked pair (unknown until run time) is taken to match."""
    return guard_or_false(x != y)


def _setup_context(ctx, inputs, output):
    a, b, offs, _ = inputs
    ctx.save_for_backward(a, b, offs)


def _zero_tail(t: torch.Tensor, offs: torch.Tensor, dim: int) -> None:
    """In place: the slices of the 2D `t` along `dim` at or past offs[-1] become zeros, with no device-to-host copy.
    On a GPU a kernel stores zeros into the tail alone (autoheur/kernels/tail.py); elsewhere a masked fill. Either way
    a NaN left in the uninitialized tail becomes zero (a 0/1 multiply would keep it)."""
    if offs.numel() == 0:  # no groups: all of it is past the end
        t.zero_()
        return
    if t.is_cuda and not torch._C._functorch.is_functorch_wrapped_tensor(t):  # a torch.func wrapper: torch's ops
        zero_past_end(t, offs, dim)
        return
    idx = torch.arange(t.shape[dim], device=t.device)
    shape = [1] * t.dim()
    shape[dim] = -1
    t.masked_fill_((idx >= offs[-1]).view(shape), 0)


@torch.library.custom_op("autoheur::zero_past_end_", mutates_args=("t",))
def zero_past_end_(t: torch.Tensor, offs: torch.Tensor, dim: int) -> None:
    _zero_tail(t, offs, dim)


@zero_past_end_.register_fake
def _(t, offs, dim):
    return None


def _zero_past_end(t: torch.Tensor, offs: torch.Tensor, dim: int) -> None:
    """zero_past_end_, eager tensors done directly (a custom op's dispatch is host time a backward on short problems
    feels); traced ones (fake, functional: subclasses) through the op."""
    (_zero_tail if _plain(t, offs) and not _dispatch_modes() else zero_past_end_)(t, offs, dim)


def _t(x: torch.Tensor) -> torch.Tensor:
    """The transpose of the last two dims, as a view (the kernel takes either major)."""
    return x.transpose(-1, -2)


def _transposed(x: torch.Tensor) -> bool:
    """Whether `x` is stored transposed in its last two dims: a column-major matrix, or MoE weights stored [g, N, K]
    and passed as their [g, K, N] view. Only the gradient's layout depends on the answer, never its values: while
    tracing, a size or stride torch.compile cannot know (an unbacked one: a ragged extent picked by a mask) is taken
    as the usual case (> 1) instead of failing the trace (GuardOnDataDependentSymNode); known ones are read (and
    guarded on) as before. Eager tensors take the plain comparisons (the backward's host time)."""
    if x.dim() < 2:
        return False
    if type(x) in _PLAIN:
        return x.shape[-1] > 1 and x.stride(-1) != 1 and x.stride(-2) == 1
    return guard_or_true(x.shape[-1] > 1) and guard_or_true(x.stride(-1) != 1) and guard_or_false(x.stride(-2) == 1)


def _grad_mm(p: torch.Tensor, q: torch.Tensor, offs: torch.Tensor | None, like: torch.Tensor,
             past_end_dim: int | None = None) -> torch.Tensor:  # fmt: skip
    """grouped_mm(p, q, offs), laid out as `like`, the input it is the gradient of, with its slices along
    `past_end_dim` at or past offs[-1] zeroed when given. Autograd's AccumulateGrad copies a gradient whose strides
    differ from its input's into the input's layout: for MoE weights stored [g, N, K] and used as [g, K, N], a
    transposing copy of every weight on every step (BENCHMARKS.md, "Training step"). The transposed product
    (p q)^T = q^T p^T is a grouped_mm of the same family (2d3d <-> 3d2d, 2d2d and 3d3d to themselves), and its
    row-major output, viewed transposed, has `like`'s strides. The zeroing runs on that output, not on the view.
    Eager tensors skip the custom op's dispatch (host time a short problem's training step feels) and the read-back of
    the offsets, which the forward checked (autoheur.grouped_mm itself, differentiable, when the backward builds a
    graph: create_graph=True); traced ones go through the op."""
    mm = grouped_mm
    # the forward checked these offsets; with create_graph=True the API's autograd is needed; under a dispatch mode
    # (api.py, _dispatch_modes), the op
    if _plain(p, q, offs) and not _dispatch_modes():
        mm = _grouped_mm if torch.is_grad_enabled() else grouped_mm_offsets_checked
    if _transposed(like):
        out = mm(_t(q), _t(p), offs)
        if past_end_dim is not None:
            _zero_past_end(out, offs, 1 - past_end_dim)
        return _t(out)
    out = mm(p, q, offs)
    if past_end_dim is not None:
        _zero_past_end(out, offs, past_end_dim)
    return out


def _operand(g: torch.Tensor) -> torch.Tensor:
    """The output gradient as the backward's GEMMs can read it (validate.py's operand rules). Autograd hands over
    whatever the next op made: y.sum()'s gradient is expanded (strides all 0); torch.cat's backward gives a view at
    any offset, its pointer off 16 bytes (torch._grouped_mm's backward takes it); an output whose rows are not a
    multiple of 16 bytes (n set by a column-major B) has a gradient with such rows. Any of these is copied, row-major,
    into rows padded to 16 bytes. A traced tensor has no pointer to check: it is only made row- or column-major."""
    if type(g) not in _PLAIN:
        return g if g.is_contiguous() or _t(g).is_contiguous() else g.contiguous()
    try:
        if operand_ok(g):
            return g
    except RuntimeError:  # a torch.func wrapper (grad, vmap) has no data pointer to check: copied as below
        pass
    n = g.shape[-1]
    quantum = ALIGN_BYTES // g.element_size()
    padded = g.new_empty((*g.shape[:-1], -(-n // quantum) * quantum))[..., :n]
    return padded.copy_(g)


def _backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    g = _operand(grad.to(a.dtype))
    da = db = None
    if a.dim() == 2 and b.dim() == 3:  # ragged M
        if ctx.needs_input_grad[0]:
            da = _grad_mm(g, _t(b), offs, a, past_end_dim=0)
        if ctx.needs_input_grad[1]:
            db = _grad_mm(_t(a), g, offs, b)
    elif a.dim() == 3 and b.dim() == 2:  # ragged N
        if ctx.needs_input_grad[0]:
            da = _grad_mm(g, _t(b), offs, a)
        if ctx.needs_input_grad[1]:
            db = _grad_mm(_t(a), g, offs, b, past_end_dim=1)
    elif a.dim() == 2 and b.dim() == 2:  # ragged K
        if ctx.needs_input_grad[0]:
            da = _grad_mm(g, _t(b), offs, a, past_end_dim=1)
        if ctx.needs_input_grad[1]:
            db = _grad_mm(_t(a), g, offs, b, past_end_dim=0)
    else:  # batched
        if ctx.needs_input_grad[0]:
            da = _grad_mm(g, _t(b), None, a)
        if ctx.needs_input_grad[1]:
            db = _grad_mm(_t(a), g, None, b)
    return (
        None if da is None else da.to(a.dtype),
        None if db is None else db.to(b.dtype),
        None,
        None,
    )


grouped_mm.register_autograd(_backward, setup_context=_setup_context)


class _Eager(torch.autograd.Function):
    """The op's autograd formula for `autoheur.grouped_mm` called eagerly on tensors that need gradients: the same
    forward and `_backward`, without the custom op's dispatch layers (torch.compile traces the op instead)."""

    @staticmethod
    def forward(ctx, a, b, offs, out_dtype):
        ctx.save_for_backward(a, b, offs)
        return _grouped_mm(a, b, offs, out_dtype)

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad)


class _Transformed(torch.autograd.Function):
    """`_Eager` under torch.func's transforms (grad, jacrev, vmap of a call that needs gradients), which run an
    autograd.Function only with a separate `setup_context` (and, under vmap, a vmap rule), as they run
    torch._grouped_mm's derivative. Its forward sees unwrapped tensors; the wrapped ones its backward sees go through
    the API, which hands them to the op (api.py, `_transforms_active`). Not used outside the transforms: `apply`
    binds a setup_context Function's arguments with inspect.signature on every call (~50 us of host time on a slow
    CPU)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(a, b, offs, out_dtype):
        return _grouped_mm(a, b, offs, out_dtype)

    setup_context = staticmethod(_setup_context)

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad)


def differentiable_grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                              out_dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """`autoheur.grouped_mm` with autograd: the custom op while torch.compile traces, else the eager Function."""
    if torch.compiler.is_compiling():
        return grouped_mm(a, b, offs, out_dtype)
    if not _plain(a, b, offs) or _dispatch_modes():  # a mode runs the op outside itself (api.py, _dispatch_modes)
        if not all(isinstance(x, torch.Tensor) for x in (a, b, a if offs is None else offs)):
            validate(a, b, offs, out_dtype)  # its error names the argument, where the op's schema check would not
        return grouped_mm(a, b, offs, out_dtype)
    return (_Transformed if _transforms_active() else _Eager).apply(a, b, offs, out_dtype)
