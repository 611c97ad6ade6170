"""The autograd formula (inference/op.py) on incoming gradients the kernel cannot read as they are, and with no
groups."""

from __future__ import annotations

import warnings

import pytest
import torch

import autoheur.inference  # noqa: F401  (registers torch.ops.autoheur.grouped_mm)
from autoheur.inference.api import grouped_mm
from autoheur.kernels.reference import reference_gradients, reference_grouped_mm

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py decides


def _grads(mm, a, b, offs, loss):
    a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    loss(mm(a, b, offs)).backward()
    return a.grad, b.grad


@pytest.mark.parametrize("entry", ["api", "op"])
def test_a_gradient_at_a_misaligned_address_is_taken(entry):
    """torch.cat's backward hands y a view 4 bytes into its buffer: torch._grouped_mm's backward takes it."""
    mm = grouped_mm if entry == "api" else torch.ops.autoheur.grouped_mm
    torch.manual_seed(0)
    a, b = torch.randn(20, 24), torch.randn(3, 24, 16)
    offs = torch.tensor([5, 8, 20], dtype=torch.int32)
    w = torch.randn(1 + 20 * 16)

    def loss(y):
        return (torch.cat([torch.ones(1), y.flatten()]) * w).sum()

    for got, want in zip(_grads(mm, a, b, offs, loss), _grads(reference_grouped_mm, a, b, offs, loss), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("layout", ["2d3d", "3d3d"])
def test_a_gradient_whose_rows_are_not_16_byte_multiples_is_taken(layout):
    """n = 3 (float32: 12-byte rows) is a valid forward with B stored column-major; its row-major gradient is not a
    valid operand for the backward's GEMMs as it is."""
    torch.manual_seed(0)
    b = torch.randn(3, 3, 24).transpose(1, 2)  # [g, K, n=3], column-major
    if layout == "2d3d":
        a, offs = torch.randn(20, 24), torch.tensor([5, 8, 20], dtype=torch.int32)
    else:
        a, offs = torch.randn(3, 8, 24), None
    w = torch.randn(reference_grouped_mm(a, b, offs).shape)

    def loss(y):
        return (y * w).sum()

    for got, want in zip(_grads(grouped_mm, a, b, offs, loss), _grads(reference_grouped_mm, a, b, offs, loss),
                         strict=True):  # fmt: skip
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "layout",
    ["2d3d", "3d2d", "2d2d", "3d3d"],
)
def test_no_groups_has_zero_gradients(layout):
    z = torch.zeros(0, dtype=torch.int32)
    a, b, offs = {
        "2d3d": (torch.randn(8, 32), torch.randn(0, 32, 16), z),
        "3d2d": (torch.randn(0, 8, 32), torch.randn(32, 16), z),
        "2d2d": (torch.randn(8, 32), torch.randn(32, 16), z),
        "3d3d": (torch.randn(0, 8, 32), torch.randn(0, 32, 16), None),
    }[layout]
    a.requires_grad_()
    b.requires_grad_()
    y = grouped_mm(a, b, offs)
    (y * torch.randn(y.shape)).sum().backward()
    assert torch.equal(a.grad, torch.zeros_like(a)) and torch.equal(b.grad, torch.zeros_like(b))


@pytest.mark.parametrize("which", ["b", "offs"])
def test_the_op_refuses_inputs_on_two_devices_even_when_one_is_meta(which):
    """A meta operand beside real ones dispatches the op to its fake implementation, which returned an uninitialized
    tensor as the result (the API refused the same call); now it refuses as validate() does."""
    a, b = torch.randn(16, 32, device=DEVICE), torch.randn(2, 32, 32, device=DEVICE)
    offs = torch.tensor([8, 16], dtype=torch.int32, device=DEVICE)
    args = {"b": b, "offs": offs}
    args[which] = args[which].to("meta")
    with pytest.raises(ValueError, match=f"{which} is on meta but a is on {DEVICE}"):
        torch.ops.autoheur.grouped_mm(a, args["b"], args["offs"], None)
    with pytest.raises(
        TypeError, match="b has dtype torch.float16 but a has torch.float32: both operands must share one"
    ):
        torch.ops.autoheur.grouped_mm(a.to("meta"), b.half().to("meta"), offs.to("meta"), None)
    assert torch.ops.autoheur.grouped_mm(a.to("meta"), b.to("meta"), offs.to("meta"), None).shape == (16, 32)


BAD_SHAPES = {
    "2d3d K": ((16, 32), (2, 33, 8), [8, 16]),
    "3d2d K": ((2, 8, 32), (33, 16), [8, 16]),
    "2d2d K": ((8, 32), (33, 16), [16, 32]),
    "3d3d K": ((2, 8, 32), (2, 33, 8), None),
    "3d3d groups": ((2, 8, 32), (3, 32, 8), None),
    "offs length": ((16, 32), (3, 32, 8), [8, 16]),
    "offs for 3d3d": ((2, 8, 32), (2, 32, 8), [8, 16]),
    "no offs": ((16, 32), (2, 32, 8), None),
}


def _bad(case: str, device: str):
    a_shape, b_shape, offs = BAD_SHAPES[case]
    a, b = torch.randn(a_shape, device=device), torch.randn(b_shape, device=device)
    return a, b, None if offs is None else torch.tensor(offs, dtype=torch.int32, device=device)


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_a_bad_shape_fails_the_trace_with_validates_error(case):
    """The fake implementation checks the shapes as validate() does: a mismatched K or group count, offsets of the
    wrong length, or offsets given or missing against the layout fail tracing (meta tensors, torch.compile) with the
    same message as the eager call (under dynamic shapes, over the trace's symbols), before any graph runs; before, a
    mismatched K traced and failed at the first run."""
    from torch._dynamo.exc import TorchRuntimeError

    from autoheur.kernels.validate import validate

    with pytest.raises(ValueError) as eager:
        validate(*_bad(case, DEVICE))
    message = str(eager.value)
    with pytest.raises(ValueError) as meta:
        torch.ops.autoheur.grouped_mm(*_bad(case, "meta"), None)
    assert str(meta.value) == message
    for dynamic in (False, True):
        torch._dynamo.reset()
        fn = torch.compile(lambda a, b, o: torch.ops.autoheur.grouped_mm(a, b, o, None), fullgraph=True,
                           backend="eager", dynamic=dynamic)  # fmt: skip
        with pytest.raises(TorchRuntimeError) as traced:  # dynamo's wrapper of an error in fake propagation
            fn(*_bad(case, DEVICE))
        # static: the eager message itself; dynamic: the same words over the trace's symbols (a is (s97, s98), ...)
        shown = message if not dynamic else message.split(":")[0].split(" has ")[0]
        assert f"got ValueError('{shown}" in str(traced.value)
    torch._dynamo.reset()


TWO_FAULTS = {  # a bad shape or rank beside a bad dtype, or an unsupported dtype beside a mismatched one (b's, last)
    "int64 offs of 2 dims": (torch.float32, (2, 32, 8), torch.int64, (2, 1), None),
    "int64 offs, mismatched K": (torch.float32, (2, 33, 8), torch.int64, (2,), None),
    "float64, mismatched K": (torch.float64, (2, 33, 8), torch.int32, (2,), None),
    "fp16 out of fp32, mismatched K": (torch.float32, (2, 33, 8), torch.int32, (2,), torch.float16),
    "int64 offs alone": (torch.float32, (2, 32, 8), torch.int64, (2,), None),
    "float64 a, fp16 b": (torch.float64, (2, 32, 8), torch.int32, (2,), None, torch.float16),
}


@pytest.mark.parametrize("case", sorted(TWO_FAULTS))
def test_the_fake_names_the_fault_validate_names_first(case):
    """The fake implementation's dtype and offsets checks come in validate()'s order: a call with a bad dtype and a
    bad shape (or offsets of another rank) fails the trace with the error the eager call raises, not another."""
    from autoheur.kernels.validate import validate

    dtype, b_shape, offs_dtype, offs_shape, out_dtype, *b_dtype = TWO_FAULTS[case]
    a, b = (
        torch.randn(16, 32, dtype=dtype, device=DEVICE),
        torch.randn(b_shape, dtype=(b_dtype or [dtype])[0], device=DEVICE),
    )
    offs = torch.full(offs_shape, 8, dtype=offs_dtype, device=DEVICE)
    with pytest.raises((TypeError, ValueError)) as eager:
        validate(a, b, offs, out_dtype)
    with pytest.raises((TypeError, ValueError)) as meta:
        torch.ops.autoheur.grouped_mm(a.to("meta"), b.to("meta"), offs.to("meta"), out_dtype)
    assert (type(meta.value), str(meta.value)) == (type(eager.value), str(eager.value))


@pytest.mark.parametrize("case", ["float64 beside b on meta", "int64 offs on meta", "b on meta beside int64 offs"])
def test_the_fake_names_a_device_fault_where_validate_does(case):
    """Operands on two devices (one of them meta) reach the fake implementation; it named the device first where
    validate() names a bad dtype first, and said "a is on ... but b is on ..." where validate() said it the other way
    about. Now one check (validate.check_same_device) in validate()'s order serves both."""
    from autoheur.kernels.validate import validate

    dtype = torch.float64 if case.startswith("float64") else torch.float32
    offs_dtype = torch.int64 if "int64" in case else torch.int32
    a = torch.randn(16, 32, dtype=dtype, device=DEVICE)
    b = torch.randn(2, 32, 8, dtype=dtype, device="meta" if "b on meta" in case else DEVICE)
    offs = torch.tensor([8, 16], dtype=offs_dtype, device="meta" if "offs on meta" in case else DEVICE)
    with pytest.raises((TypeError, ValueError)) as eager:
        validate(a, b, offs)
    with pytest.raises((TypeError, ValueError)) as fake:
        torch.ops.autoheur.grouped_mm(a, b, offs, None)
    assert (type(fake.value), str(fake.value)) == (type(eager.value), str(eager.value))


def test_the_fake_refuses_strided_offsets_as_validate_does():
    """validate() refuses offsets that are not contiguous before it asks their device; the fake did not check their
    stride: strided offsets on meta beside a CPU `a` were named as on another device, and under torch.compile (static
    or dynamic shapes) strided offsets traced and failed at the first run. Contiguous offsets, and unbacked ones, still
    trace."""
    from torch._dynamo.exc import TorchRuntimeError

    from autoheur.kernels.validate import validate

    a, b = torch.randn(16, 32, device=DEVICE), torch.randn(2, 32, 8, device=DEVICE)
    strided = torch.tensor([8, 0, 16, 0], dtype=torch.int32, device=DEVICE)[::2]
    on_meta = torch.empty(4, dtype=torch.int32, device="meta")[::2]  # .to("meta") would make it contiguous
    message = "offs must be contiguous (stride 2); pass offs.contiguous()"
    for offs in (strided, on_meta):
        with pytest.raises(ValueError) as eager:
            validate(a, b, offs)
        with pytest.raises(ValueError) as fake:
            torch.ops.autoheur.grouped_mm(a, b, offs, None)
        assert str(fake.value) == str(eager.value) == message
    with pytest.raises(ValueError, match=r"^offs must be contiguous \(stride 2\)"):
        torch.ops.autoheur.grouped_mm(a.to("meta"), b.to("meta"), on_meta, None)
    for dynamic in (False, True):
        torch._dynamo.reset()
        fn = torch.compile(lambda a, b, o: torch.ops.autoheur.grouped_mm(a, b, o, None), fullgraph=True,
                           backend="eager", dynamic=dynamic)  # fmt: skip
        with pytest.raises(TorchRuntimeError) as traced:  # at the trace, not at the first run (a plain ValueError)
            fn(a, b, strided)
        assert "got ValueError('offs must be contiguous (stride " in str(traced.value)
        offs = strided.contiguous()
        torch.testing.assert_close(fn(a, b, offs), reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)
        if dynamic:  # a length the trace cannot know (unbacked): its stride (1) is read, its length never asked
            torch._dynamo.decorators.mark_unbacked(offs, 0)
            torch.testing.assert_close(fn(a, b, offs), reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)
        one = torch.tensor([0, 0, 16, 0], dtype=torch.int32, device=DEVICE)[2:3]  # one entry: any stride is taken
        torch.testing.assert_close(fn(a, b[:1], one), reference_grouped_mm(a, b[:1], one), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()


def test_the_fake_refuses_strides_whose_lane_offsets_overflow_as_validate_does():
    """validate() refuses strides whose 32-bit lane offsets overflow (kernels/test_validate.py); the fake did not
    check them, so such a call traced and was refused at its first run. On static shapes the fake now names the
    same fault; a symbolic shape is left to validate() at the run (no guard on a stride's value). Meta tensors: the
    2**24-column operand holds no memory."""
    from autoheur.kernels.validate import validate

    n = 2**24
    b = torch.empty(n, 16, dtype=torch.float16, device="meta").t()  # [16, n] column-major: its own strides small
    offs = torch.empty(1, dtype=torch.int32, device="meta")
    a = torch.empty(1, 129, 16, dtype=torch.float16, device="meta")  # 129 output rows, each n elements apart
    with pytest.raises(ValueError) as fake:
        torch.ops.autoheur.grouped_mm(a, b, offs, None)
    assert str(fake.value).startswith("the output has stride 16777216 along a dim of 129")
    real_b = torch.empty(n, 16, dtype=torch.float16, device=DEVICE).t()  # empty: its pages never touched
    with pytest.raises(ValueError) as eager:
        validate(torch.zeros(1, 129, 16, dtype=torch.float16, device=DEVICE), real_b,
                 torch.tensor([n], dtype=torch.int32, device=DEVICE))  # fmt: skip
    assert str(fake.value) == str(eager.value)
    assert torch.ops.autoheur.grouped_mm(a[:, :128], b, offs, None).shape == (128, n)  # 128 rows: within 32 bits


@pytest.mark.parametrize("how", ["make_dual-api", "make_dual-op", "make_dual-requires-grad", "func.jvp-api"])
def test_forward_mode_ad_is_refused_as_torch_refuses_it(how):
    """torch._grouped_mm has no forward-mode derivative and raises NotImplementedError on a dual input. The kernel
    read the primal alone and returned an output without a tangent (torch.autograd.forward_ad: tangent None,
    silently a zero derivative), or failed on the functorch wrapper's data pointer (torch.func.jvp)."""
    import torch.autograd.forward_ad as fwAD

    a, b = torch.randn(16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    mm = torch.ops.autoheur.grouped_mm if how.endswith("op") else grouped_mm
    with pytest.raises(NotImplementedError, match=r"^a is a dual tensor \(forward-mode AD"):
        if how == "func.jvp-api":
            torch.func.jvp(lambda x: mm(x, b, offs), (a,), (torch.randn_like(a),))
        else:
            with fwAD.dual_level():
                primal = a.clone().requires_grad_() if how.endswith("requires-grad") else a
                mm(fwAD.make_dual(primal, torch.randn_like(a)), b, offs)
    with fwAD.dual_level():  # inputs without tangents inside a dual level compute, as torch's do
        torch.testing.assert_close(mm(a, b, offs), reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)


def test_vmap_over_the_api_computes_each_slice():
    """torch.vmap hands the API batched tensors, which have no data pointer: the fast path's signature and the
    validator failed on it ("Cannot access data pointer of Tensor that doesn't have storage"). They now go through
    the custom op, which torch's batching fallback runs slice by slice, as torch._grouped_mm's vmap computes."""
    torch.manual_seed(0)
    a, b = torch.randn(2, 16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the batching fallback's performance warning
        got = torch.vmap(lambda x: grouped_mm(x, b, offs))(a)
    torch.testing.assert_close(got, torch.stack([reference_grouped_mm(x, b, offs) for x in a]), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("grad_mode", [True, False])
def test_functionalize_over_the_api_computes_like_torch(grad_mode):
    """torch.func.functionalize of a function that calls the API (make_fx(functionalize(f)) traces a graph so) failed
    with grad mode on, the default: inside a transform the call went to the API's autograd.Function, which
    functionalize does not run ("NYI: Functionalize rule for custom_function_call"). It goes through the custom op,
    as it did with grad mode off, and make_fx records that op."""
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    a, b = torch.randn(16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    f = torch.func.functionalize(lambda x, y, o: grouped_mm(x, y, o))
    with torch.set_grad_enabled(grad_mode):
        for _ in range(2):  # the full path (tuning), then the cached call
            torch.testing.assert_close(f(a, b, offs), reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)
        graph = make_fx(f)(a, b, offs)
    assert "torch.ops.autoheur.grouped_mm.default" in graph.code


@pytest.mark.parametrize("tracing_mode", ["real", "fake"])
def test_make_fx_records_the_api_and_its_backward_as_the_ops(tracing_mode):
    """make_fx traces with a dispatch mode (its proxy mode, over fake tensors or real ones), which sees ops, not
    kernel launches: the API launched on the real tensors inside it (a cached call too; in the interpreter the launch
    failed inside the mode, on a GPU the graph would hold the output's allocation alone) or validated fake tensors
    (their null pointers named as a zero or functionalized tensor). The forward, and the backward's two GEMMs and
    zeroing, are recorded as the custom ops, and the graph computes as the reference does."""
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    a, b = torch.randn(20, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)  # rows 16..19 are past the end
    w = torch.randn(20, 16)
    grouped_mm(a, b, offs)  # a cached call for these properties: the fast path must not launch inside the mode

    def step(mm):
        def f(x, y, o, w):
            return (mm(x, y, o), *torch.autograd.grad((mm(x, y, o) * w).sum(), (x, y)))

        return f

    x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
    graph = make_fx(step(grouped_mm), tracing_mode=tracing_mode)(x, y, offs, w)
    assert graph.code.count("torch.ops.autoheur.grouped_mm.default") == 4
    assert "torch.ops.autoheur.zero_past_end_.default" in graph.code
    got, want = graph(x, y, offs, w), step(reference_grouped_mm)(x, y, offs, w)
    torch.testing.assert_close(got[0][:16], want[0][:16], atol=1e-4, rtol=1e-4)  # rows past the end: unspecified
    for g, r in zip(got[1:], want[1:], strict=True):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)


def test_fake_and_wrapper_tensors_go_through_the_op():
    """Tensors of a subclass with its own __torch_dispatch__ have no memory to launch on: under FakeTensorMode (shape
    inference) the API refused every call, naming the offsets a zero or functionalized tensor (a mismatched K too),
    and a wrapper subclass (torch.testing's TwoTensor) was refused so, where torch._grouped_mm computes both. They
    go through the custom op: its fake implementation gives the output's shape or names the fault, and the wrapper's
    dispatch runs it on the tensors it wraps."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.two_tensor import TwoTensor

    torch.manual_seed(0)
    a, b = torch.randn(16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    with FakeTensorMode() as mode:
        fa, fb, fo = (mode.from_tensor(t) for t in (a, b, offs))
        out = grouped_mm(fa, fb, fo)
        assert (out.shape, out.dtype) == ((16, 16), torch.float32)
        with pytest.raises(ValueError, match=r"^mismatched K"):
            grouped_mm(fa, fb[:, :16], fo)
    got = grouped_mm(TwoTensor(a, 2 * a), b, offs)
    assert type(got) is TwoTensor
    torch.testing.assert_close(got.a, reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.b, reference_grouped_mm(2 * a, b, offs), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transform", ["grad", "vmap-requires-grad"])
def test_torch_func_transforms_differentiate_the_api_like_torch(transform):
    """torch.func.grad (and jacrev, vmap over a call that needs gradients) refused the API's autograd.Function: "it
    must override the setup_context staticmethod", where torch._grouped_mm's derivative composes with them. Rows
    past offs[-1] (a tail) get zero gradient through the wrapped backward too."""
    torch.manual_seed(0)
    a, b = torch.randn(20, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)  # rows 16..19 are past the end
    w = torch.randn(20, 16)

    def loss(mm):
        return lambda x, y: (mm(x, y, offs) * w).sum()

    if transform == "grad":
        got = torch.func.grad(loss(grouped_mm), argnums=(0, 1))(a, b)
        want = torch.func.grad(loss(reference_grouped_mm), argnums=(0, 1))(a, b)
    else:  # a batch of two inputs; vmap of a call whose b needs gradients, then one backward
        b2 = b.clone().requires_grad_()
        xs = torch.stack([a, 2 * a])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the batching fallback's performance warning
            y = torch.vmap(lambda x: grouped_mm(x, b2, offs))(xs)
        got = (torch.autograd.grad((y * w).sum(), b2)[0],)
        want = (torch.autograd.grad((torch.stack([reference_grouped_mm(x, b2, offs) for x in xs]) * w).sum(), b2)[0],)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_plain_inputs_inside_a_torch_func_transform_compute_like_torch(transform):
    """Inside torch.func.grad or jvp taken for something else (a scale here; frozen expert weights and activations in
    a model), the API's inputs are plain tensors, but a tensor allocated there (the output) is the transform's
    wrapper, without storage: the launch failed on its data pointer, on the first call and on cached ones, where
    torch._grouped_mm computes."""
    torch.manual_seed(0)
    a, b = torch.randn(16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)
    s, ds = torch.tensor(2.0), torch.tensor(1.0)

    def run(mm):
        def f(s):
            return (mm(a, b, offs) * s).sum()

        return torch.func.jvp(f, (s,), (ds,))[1] if transform == "jvp" else torch.func.grad(f)(s)

    want = run(reference_grouped_mm)
    for _ in range(2):  # the full path (tuning), then the cached call
        torch.testing.assert_close(run(grouped_mm), want, atol=1e-3, rtol=1e-4)


def test_grad_of_a_vmap_over_the_api_differentiates_like_torch():
    """torch.func.grad of a function that vmaps the API (a loss over a batch): the batched inputs do not say they need
    gradients there (requires_grad is False on them), so the call went to the custom op, whose autograd torch.func
    refuses ("it must override the setup_context staticmethod"), where torch._grouped_mm's derivative composes."""
    torch.manual_seed(0)
    a, b = torch.randn(20, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([8, 16], dtype=torch.int32)  # rows 16..19 are past the end

    def loss(x, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the batching fallback's performance warning
            return (torch.vmap(lambda r: grouped_mm(r, y, offs))(torch.stack([x, 2 * x])) ** 2).sum()

    def reference(x, y):
        return sum((reference_grouped_mm(r, y, offs) ** 2).sum() for r in (x, 2 * x))

    got = torch.func.grad(loss, argnums=(0, 1))(a, b)
    want = torch.func.grad(reference, argnums=(0, 1))(a, b)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("layout", ["3d2d", "2d2d"])
def test_backward_traces_with_a_data_dependent_ragged_extent(monkeypatch, layout):
    """A ragged extent torch.compile cannot know (an unbacked size: rows picked by a mask or nonzero) is the last dim
    of a 3d2d B or a 2d2d A. The backward asked whether that dim is > 1 (op._transposed) and the trace failed with
    GuardOnDataDependentSymNode; the gradients do not depend on the answer, only their layout does."""
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")  # the model's top-1: no timing in the interpreter
    torch.manual_seed(0)
    if layout == "3d2d":
        a, b = torch.randn(3, 32, 16), torch.randn(24, 16).t()  # b [K, N=24] column-major
        unbacked = [(b, 1)]
    else:
        a, b = torch.randn(24, 32).t(), torch.randn(24, 16)  # a [M, K=24] column-major
        unbacked = [(a, 1), (b, 0)]
    for t, dim in unbacked:
        torch._dynamo.decorators.mark_unbacked(t, dim)
    offs = torch.tensor([8, 8, 22], dtype=torch.int32)  # 2 past the end: zeroed in the gradient
    a.requires_grad_()
    b.requires_grad_()
    y = torch.compile(torch.ops.autoheur.grouped_mm, fullgraph=True, backend="aot_eager")(a, b, offs)
    w = torch.randn(y.shape)
    da, db = torch.autograd.grad(y, (a, b), w)
    ref_da, ref_db = reference_gradients(a, b, offs, w)
    torch.testing.assert_close(da, ref_da, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(db, ref_db, atol=1e-4, rtol=1e-4)
    assert da.stride() == a.stride() and db.stride() == b.stride()
