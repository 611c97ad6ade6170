"""Every bad input to grouped_mm raises the documented error, naming the argument, before any launch."""

from __future__ import annotations

import pytest
import torch

import autoheur.kernels.grouped_gemm as gg
from autoheur.kernels import KernelConfig, Ragged, grouped_mm, validate

F16 = torch.float16
OK_CONFIG = KernelConfig(32, 32, 32, 2, 2)
TMA_CONFIG = KernelConfig(32, 32, 32, 3, 2, load="tma")
SIZES = (5, 0, 19, 8)


def offsets(values, device="cpu", dtype=torch.int32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def ends(sizes=SIZES) -> list[int]:
    out, total = [], 0
    for s in sizes:
        total += s
        out.append(total)
    return out


def operands(ragged: Ragged, device="cpu", dtype=F16) -> dict:
    """A valid call for each layout: ragged M/N/K totals 32, G=4, M=24, N=24, K=40."""
    g, total = len(SIZES), sum(SIZES)
    a_shape, b_shape = {
        Ragged.M: ((total, 40), (g, 40, 24)),
        Ragged.N: ((g, 24, 40), (40, total)),
        Ragged.K: ((24, total), (total, 24)),
        Ragged.NONE: ((g, 24, 40), (g, 40, 24)),
    }[ragged]
    a = torch.randn(a_shape, device=device).to(dtype)
    b = torch.randn(b_shape, device=device).to(dtype)
    offs = None if ragged == Ragged.NONE else offsets(ends(), device)
    return dict(a=a, b=b, offs=offs)


def call(a, b, offs=None, out_dtype=None, config=OK_CONFIG, **kw):
    return grouped_mm(a, b, offs, out_dtype, config=config, **kw)


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    """Any launch in this module is a failure: every error must come out of validation."""

    def boom(*args, **kwargs):
        raise AssertionError("the kernel was launched")

    class NoKernel:
        def __getitem__(self, grid):
            return boom

        def run(self, *args, **kwargs):
            boom()

    monkeypatch.setattr(gg, "launch", boom)
    monkeypatch.setattr(gg, "grouped_gemm_kernel", NoKernel())


def test_valid_calls_reach_the_launch(device):
    """Control: with valid inputs the (patched) launch is reached, so the cases below really fail in validation."""
    for ragged in Ragged:
        with pytest.raises(AssertionError, match="launched"):
            call(**operands(ragged, device))


def _with(ragged, device, **changes):
    kw = operands(ragged, device)
    kw.update(changes)
    return kw


def _b(shape, device):
    return torch.randn(shape, device=device).to(F16)


def case(case_id: str, build, exc: type[Exception], match: str):
    """build(device) -> grouped_mm kwargs; `match` is a regex the error message must match."""
    return pytest.param(build, exc, match, id=case_id)


CASES = [
    # Types
    case("a-list", lambda d: _with(Ragged.M, d, a=[[1.0] * 40] * 32), TypeError, r"^a must be a torch\.Tensor"),
    case("b-str", lambda d: _with(Ragged.M, d, b="b"), TypeError, r"^b must be a torch\.Tensor"),
    case("offs-list", lambda d: _with(Ragged.M, d, offs=ends()), TypeError, r"^offs must be a torch\.Tensor"),
    case(
        "a-sparse",
        lambda d: _with(Ragged.M, d, a=_b((32, 40), d).to_sparse()),
        TypeError,
        r"^a is a torch\.sparse_coo tensor: the kernel reads dense \(strided\) ones; pass a\.to_dense\(\)",
    ),
    case(
        "b-sparse",
        lambda d: _with(Ragged.NONE, d, b=_b((4, 40, 24), d).to_sparse()),
        TypeError,
        r"^b is a torch\.sparse_coo tensor",
    ),
    case(
        "offs-sparse",
        lambda d: _with(Ragged.K, d, offs=offsets(ends(), d).to_sparse()),
        TypeError,
        r"^offs is a torch\.sparse_coo tensor",
    ),
    case(  # torch's own error for a strided nested tensor is "Internal error: NestedTensorImpl doesn't support sizes"
        "a-nested",
        lambda d: _with(Ragged.NONE, d, a=torch.nested.nested_tensor([_b((24, 40), d)] * 4)),
        TypeError,
        r"^a is a nested tensor: the kernel reads dense \(strided\) ones; pass torch\.cat\(a\.unbind\(\)\)",
    ),
    case(
        "a-jagged",
        lambda d: _with(
            Ragged.M, d, a=torch.nested.as_nested_tensor([_b((5, 40), d), _b((27, 40), d)], layout=torch.jagged)
        ),
        TypeError,
        r"^a is a nested tensor",
    ),
    case(
        "offs-nested",
        lambda d: _with(Ragged.M, d, offs=torch.nested.nested_tensor([offsets(ends(), d)])),
        TypeError,
        r"^offs is a nested tensor: .*; pass a 1D tensor as int32 offs",
    ),
    case(  # before this check the kernel computed +a @ b from a torch._neg_view of a (stop 83)
        "a-neg-view",
        lambda d: _with(Ragged.M, d, a=torch._neg_view(_b((32, 40), d))),
        TypeError,
        r"^a is a negative view \(its neg bit is set\): .*; pass a\.resolve_neg\(\)",
    ),
    case(
        "b-neg-view",
        lambda d: _with(Ragged.NONE, d, b=torch._neg_view(_b((4, 40, 24), d))),
        TypeError,
        r"^b is a negative view",
    ),
    case(
        "config-str",
        lambda d: _with(Ragged.M, d, config=OK_CONFIG.config_id),
        TypeError,
        r"config must be a KernelConfig",
    ),
    case(
        "config-dict",
        lambda d: _with(Ragged.M, d, config=OK_CONFIG.to_dict()),
        TypeError,
        r"config must be a KernelConfig",
    ),
    # Dtypes
    case("float64", lambda d: operands(Ragged.M, d, torch.float64), TypeError, r"^a has dtype torch\.float64"),
    case("int8", lambda d: operands(Ragged.M, d, torch.int8), TypeError, r"^a has dtype torch\.int8"),
    case(
        "b-float32",
        lambda d: _with(Ragged.M, d, b=torch.randn(4, 40, 24, device=d)),
        TypeError,
        r"^b has dtype torch\.float32 but a has torch\.float16",
    ),
    case(
        "b-float64",
        lambda d: _with(Ragged.NONE, d, b=torch.randn(4, 40, 24, device=d, dtype=torch.float64)),
        TypeError,
        r"^b has dtype torch\.float64",
    ),
    case("out-bf16-for-fp16", lambda d: _with(Ragged.M, d, out_dtype=torch.bfloat16), TypeError, r"^out_dtype="),
    case(
        "out-fp16-for-fp32",
        lambda d: operands(Ragged.M, d, torch.float32) | dict(out_dtype=F16),
        TypeError,
        r"^out_dtype=",
    ),
    case("out-float64", lambda d: _with(Ragged.K, d, out_dtype=torch.float64), TypeError, r"^out_dtype="),
    case("out-str", lambda d: _with(Ragged.K, d, out_dtype="float32"), TypeError, r"^out_dtype="),
    # Shapes
    case(
        "k-2Dx3D",
        lambda d: _with(Ragged.M, d, b=_b((4, 48, 24), d)),
        ValueError,
        r"^mismatched K: a is \(32, 40\), b is \(4, 48, 24\)",
    ),
    case(
        "k-3Dx2D",
        lambda d: _with(Ragged.N, d, b=_b((48, 32), d)),
        ValueError,
        r"^mismatched K: a is \(4, 24, 40\), b is \(48, 32\)",
    ),
    case(
        "k-2Dx2D",
        lambda d: _with(Ragged.K, d, b=_b((40, 24), d)),
        ValueError,
        r"^mismatched K: a is \(24, 32\), b is \(40, 24\)",
    ),
    case(
        "k-3Dx3D",
        lambda d: _with(Ragged.NONE, d, b=_b((4, 48, 24), d)),
        ValueError,
        r"^mismatched K: a is \(4, 24, 40\), b is \(4, 48, 24\)",
    ),
    case("groups-3Dx3D", lambda d: _with(Ragged.NONE, d, b=_b((3, 40, 24), d)), ValueError, r"^mismatched groups"),
    case("a-1D", lambda d: _with(Ragged.M, d, a=torch.randn(40, device=d).half()), ValueError, r"a\.ndim=1"),
    case("b-1D", lambda d: _with(Ragged.M, d, b=torch.randn(40, device=d).half()), ValueError, r"b\.ndim=1"),
    case(
        "a-4D", lambda d: _with(Ragged.NONE, d, a=torch.randn(1, 4, 24, 40, device=d).half()), ValueError, r"a\.ndim=4"
    ),
    case(
        "b-4D", lambda d: _with(Ragged.NONE, d, b=torch.randn(1, 4, 40, 24, device=d).half()), ValueError, r"b\.ndim=4"
    ),
    # Offsets
    case("offs-missing-2Dx3D", lambda d: _with(Ragged.M, d, offs=None), ValueError, r"^offs is required"),
    case("offs-missing-3Dx2D", lambda d: _with(Ragged.N, d, offs=None), ValueError, r"^offs is required"),
    case("offs-missing-2Dx2D", lambda d: _with(Ragged.K, d, offs=None), ValueError, r"^offs is required"),
    case(
        "offs-given-3Dx3D", lambda d: _with(Ragged.NONE, d, offs=offsets(ends(), d)), ValueError, r"^offs must be None"
    ),
    case(
        "offs-int64",
        lambda d: _with(Ragged.M, d, offs=offsets(ends(), d, torch.int64)),
        TypeError,
        r"^offs has dtype torch\.int64",
    ),
    case(
        "offs-float",
        lambda d: _with(Ragged.N, d, offs=offsets(ends(), d, torch.float32)),
        TypeError,
        r"^offs has dtype torch\.float32",
    ),
    case("offs-2D", lambda d: _with(Ragged.M, d, offs=offsets([ends()], d)), ValueError, r"^offs must be 1D"),
    case(
        "offs-short-2Dx3D",
        lambda d: _with(Ragged.M, d, offs=offsets([5, 24, 32], d)),
        ValueError,
        r"^offs has 3 entries but there are 4 groups",
    ),
    case(
        "offs-long-3Dx2D",
        lambda d: _with(Ragged.N, d, offs=offsets([5, 5, 24, 30, 32], d)),
        ValueError,
        r"^offs has 5 entries but there are 4 groups",
    ),
    case(
        "offs-decreasing",
        lambda d: _with(Ragged.M, d, offs=offsets([5, 24, 20, 32], d)),
        ValueError,
        r"^offs must be non-decreasing: offs\[2\]=20 < offs\[1\]=24",
    ),
    case(
        "offs-decreasing-2Dx2D",
        lambda d: _with(Ragged.K, d, offs=offsets([5, 4, 24, 32], d)),
        ValueError,
        r"non-decreasing",
    ),
    case(
        "offs-negative",
        lambda d: _with(Ragged.M, d, offs=offsets([-1, 5, 24, 32], d)),
        ValueError,
        r"^offs\[0\]=-1 is negative",
    ),
    case(
        "offs-beyond-2Dx3D",
        lambda d: _with(Ragged.M, d, offs=offsets([5, 5, 24, 33], d)),
        ValueError,
        r"^offs\[-1\]=33 is beyond the ragged dimension \(a\.shape\[0\]=32\)",
    ),
    case(
        "offs-beyond-3Dx2D",
        lambda d: _with(Ragged.N, d, offs=offsets([5, 5, 24, 40], d)),
        ValueError,
        r"^offs\[-1\]=40 is beyond the ragged dimension \(b\.shape\[1\]=32\)",
    ),
    case(
        "offs-beyond-2Dx2D",
        lambda d: _with(Ragged.K, d, offs=offsets([5, 5, 24, 64], d)),
        ValueError,
        r"^offs\[-1\]=64 is beyond the ragged dimension \(a\.shape\[1\]=32\)",
    ),
    # Devices ('meta' stands in for a second device)
    case(
        "b-meta",
        lambda d: _with(Ragged.M, d, b=torch.empty(4, 40, 24, dtype=F16, device="meta")),
        ValueError,
        r"b is on meta",
    ),
    case(
        "a-meta",
        lambda d: _with(Ragged.M, d, a=torch.empty(32, 40, dtype=F16, device="meta")),
        ValueError,
        r"^b is on \w+(:\d+)? but a is on meta",
    ),
    case("offs-meta", lambda d: _with(Ragged.M, d, offs=offsets(ends(), "meta")), ValueError, r"^offs is on meta"),
    # Strides and alignment
    case(
        "a-strided-cols",
        lambda d: _with(Ragged.M, d, a=torch.randn(32, 80, device=d).half()[:, ::2]),
        ValueError,
        r"^a has strides \(80, 2\): its last two dims must be row- or column-major",
    ),
    case(
        "b-strided-cols",
        lambda d: _with(Ragged.M, d, b=torch.randn(4, 40, 48, device=d).half()[:, :, ::2]),
        ValueError,
        r"^b has strides \(1920, 48, 2\)",
    ),
    case(
        "a-lead-24B",
        lambda d: dict(
            a=torch.randn(32, 12, device=d).half(), b=torch.randn(4, 12, 24, device=d).half(), offs=offsets(ends(), d)
        ),
        ValueError,
        r"^a has strides \(12, 1\): the leading stride must be a multiple of 16 bytes \(8 float16 elements\); call "
        r"\.mT\.contiguous\(\)\.mT",  # dense already: .contiguous() would not help, a column-major copy (32 rows) would
    ),
    case(
        "a-lead-40B-view",  # a view whose dense copy is aligned: that is the advice
        lambda d: dict(
            a=torch.randn(32, 20, device=d).half()[:, :16],
            b=torch.randn(4, 16, 24, device=d).half(),
            offs=offsets(ends(), d),
        ),  # fmt: skip
        ValueError,
        r"^a has strides \(20, 1\): .*; call \.contiguous\(\)",
    ),
    case(
        "a-lead-40B",
        lambda d: dict(
            a=torch.empty_strided((32, 16), (20, 1), dtype=F16, device=d),
            b=torch.randn(4, 16, 24, device=d).half(),
            offs=offsets(ends(), d),
        ),
        ValueError,
        r"^a has strides \(20, 1\): the leading stride",
    ),
    case(
        "a-colmajor-lead-24B",
        lambda d: dict(
            a=torch.randn(40, 12, device=d).half().t(),
            b=torch.randn(4, 40, 24, device=d).half(),
            offs=offsets([2, 2, 6, 12], d),
        ),
        ValueError,
        r"^a has strides \(1, 12\): the leading stride",
    ),
    case(
        "b-lead-56B",
        lambda d: _with(Ragged.M, d, b=torch.empty_strided((4, 40, 24), (40 * 28, 28, 1), dtype=F16, device=d)),
        ValueError,
        r"^b has strides \(1120, 28, 1\): the leading stride",
    ),
    case(
        "b-group-stride",
        lambda d: _with(Ragged.M, d, b=torch.empty_strided((4, 40, 24), (40 * 24 + 4, 24, 1), dtype=F16, device=d)),
        ValueError,
        r"^b has group stride 964",
    ),
    case(  # two groups: the smallest count whose group stride is read (one group's is not)
        "a-group-stride-two-groups",
        lambda d: dict(
            a=torch.empty_strided((2, 8, 24), (8 * 24 + 4, 24, 1), dtype=F16, device=d),
            b=torch.randn(2, 24, 16, device=d).half(),
        ),
        ValueError,
        r"^a has group stride 196",
    ),
    case(
        "a-ptr-col-slice",
        lambda d: _with(Ragged.M, d, a=torch.randn(32, 48, device=d).half()[:, 1:41]),
        ValueError,
        r"^a's data pointer is not 16-byte aligned",
    ),
    case(
        "a-ptr-flat-offset",
        lambda d: _with(Ragged.M, d, a=torch.randn(32 * 40 + 1, device=d).half()[1:].view(32, 40)),
        ValueError,
        r"^a's data pointer is not 16-byte aligned",
    ),
    case(
        "a-ptr-row-slice-k1",
        lambda d: dict(
            a=torch.randn(33, 1, device=d).half()[1:], b=torch.randn(4, 1, 24, device=d).half(), offs=offsets(ends(), d)
        ),
        ValueError,
        r"^a's data pointer is not 16-byte aligned",
    ),
    case(
        "b-ptr-offset",
        lambda d: _with(Ragged.K, d, b=torch.randn(32 * 24 + 8, device=d).half()[4:-4].view(32, 24)),
        ValueError,
        r"^b's data pointer is not 16-byte aligned",
    ),
    case(  # no memory behind it: Triton passes the null pointer on and the kernel read address 0 (stop 83)
        "a-zero-tensor",
        lambda d: _with(Ragged.M, d, a=torch._efficientzerotensor((32, 40), dtype=F16, device=d)),
        ValueError,
        r"^a has no memory to read \(its data pointer is null\): a zero tensor .*pass a\.clone\(\)",
    ),
    case(
        "b-zero-tensor",
        lambda d: _with(Ragged.NONE, d, b=torch._efficientzerotensor((4, 40, 24), dtype=F16, device=d)),
        ValueError,
        r"^b has no memory to read",
    ),
    case(  # its values (all 0) are valid offsets
        "offs-zero-tensor",
        lambda d: _with(Ragged.K, d, offs=torch._efficientzerotensor(4, dtype=torch.int32, device=d)),
        ValueError,
        r"^offs has no memory to read",
    ),
    # Configs that cannot run the call
    case(
        "tma-2Dx3D-a-colmajor",
        lambda d: dict(
            a=torch.randn(40, 32, device=d).half().t(),
            b=torch.randn(4, 40, 24, device=d).half(),
            offs=offsets(ends(), d),
            config=TMA_CONFIG,
        ),
        ValueError,
        r"^config m32n32k32s3w2g1-tma cannot run this call: TMA needs 16-byte aligned",
    ),
    case(
        "tma-3Dx2D-b-rowmajor",
        lambda d: _with(Ragged.N, d, config=TMA_CONFIG),
        ValueError,
        r"^config m32n32k32s3w2g1-tma cannot run this call",
    ),
    case(
        "tma-2Dx2D-rowmajor",
        lambda d: _with(Ragged.K, d, config=TMA_CONFIG),
        ValueError,
        r"^config m32n32k32s3w2g1-tma cannot run this call",
    ),
    case(
        "regs",
        lambda d: _with(Ragged.NONE, d, config=KernelConfig(256, 256, 32, 2, 8)),
        ValueError,
        r"^config m256n256k32s2w8g1-ptr cannot run this call: 256 accumulator registers",
    ),
    case(
        "smem",
        lambda d: _with(Ragged.NONE, d, config=KernelConfig(256, 128, 256, 5, 8)),
        ValueError,
        r"^config m256n128k256s5w8g1-ptr cannot run this call: needs \d+ B of shared memory",
    ),
    case(
        "ws-few-warps",
        lambda d: _with(Ragged.NONE, d, config=KernelConfig(64, 64, 32, 3, 2, load="tma", warp_specialize=True)),
        ValueError,
        r"^config m64n64k32s3w2g1-tma-ws cannot run this call: warp specialization",
    ),
]


@pytest.mark.parametrize("build,exc,match", CASES)
def test_bad_input_raises_before_launch(build, exc, match, device):
    kwargs = build(device)
    with pytest.raises(exc, match=match):
        call(**kwargs)


def test_strides_whose_lane_offsets_overflow_32_bits_are_refused(device):
    """3Dx2D over 2**24 ragged columns: the output's rows are 2**24 elements apart, and the kernel adds lane x row
    stride in 32 bits (the stride is a 32-bit kernel argument), so rows 128 and on of a 256-row tile wrapped to
    negative offsets (a column-major `a` of 2**24 rows with BLOCK_K 128 segfaulted the interpreter the same way).
    Refused before launch, by name; 128 rows (lanes up to 127: 127 x 2**24 < 2**31) still pass."""
    n = 2**24
    b = torch.empty(n, 16, dtype=F16, device=device).t()  # [16, n] column-major: its own strides are small
    offs = offsets([n], device)
    assert validate(torch.randn(1, 128, 16, device=device).half(), b, offs).c_strides == (0, n, 1)
    with pytest.raises(ValueError, match=r"^the output has stride 16777216 along a dim of 129 .* split the call"):
        call(torch.randn(1, 129, 16, device=device).half(), b, offs)


def test_an_output_whose_rows_overflow_is_told_to_split_along_n_not_its_ragged_dim(device):
    """The output's row stride is its column count N in every layout. A weight gradient (2Dx2D, ragged K) of 2**24
    columns was told to split the call along its ragged dimension, K, which leaves that stride as it is."""
    n = 2**24
    b = torch.empty(16, n, dtype=F16, device=device)  # [K_total, N] row-major
    a = torch.randn(16, 136, device=device).half()[:, :129].t()  # [M, K_total] column-major (x.t()), stride 136
    with pytest.raises(ValueError, match=r"^the output has stride 16777216 along a dim of 129 .* split the call "
                                         r"along N \(the output's columns\)"):  # fmt: skip
        call(a, b, offsets([16], device))


def test_a_lane_index_is_at_most_255_and_only_a_k_step_is_256(device):
    """A tile's lane indices end at 255 (the largest block is 256): a stride of 2**23 along a dim that is not K (here
    the output's rows, 3Dx2D over 2**23 ragged columns) reaches 255 x 2**23 < 2**31 and runs right, where the rule
    refused it as 256 x 2**23. Along K the k step BLOCK_K = 256 is also formed in 32 bits: 256 x 2**23 is refused
    there (shapes and strides alone: an operand of such strides holds over 2**31 elements)."""
    from autoheur.kernels.validate import _check_lane_offsets

    n = 2**23
    b = torch.empty(n, 16, dtype=F16, device=device).t()  # [16, n] column-major
    assert validate(torch.randn(1, 300, 16, device=device).half(), b, offsets([n], device)).c_strides == (0, n, 1)
    for name, k_dim in (("a", 1), ("b", 0)):
        shape, strides = [300, 300], [1, 1]
        shape[k_dim], strides[k_dim] = 257, n  # K of 257: a k step of 256 is taken
        with pytest.raises(ValueError, match=rf"^{name} has stride 8388608 along a dim of 257 .* 256 such steps"):
            _check_lane_offsets(name, shape, strides, "", k_dim=k_dim)
        shape[k_dim] = 256  # one k block of 256 (no step): lanes up to 255
        _check_lane_offsets(name, shape, strides, "", k_dim=k_dim)
        strides[k_dim], strides[1 - k_dim] = 1, n  # 2**23 apart along its dim of 300 that is not K
        _check_lane_offsets(name, shape, strides, "", k_dim=k_dim)


def test_values_checked_before_launch_with_offsets_check_disabled(device):
    """check_offsets=False skips only the value checks: dtype and shape of offs are still enforced."""
    kw = _with(Ragged.M, device, offs=offsets([5, 24, 20, 32], device))
    validate(kw["a"], kw["b"], kw["offs"], check_offsets=False)  # no error: values are not read
    with pytest.raises(TypeError, match=r"^offs has dtype"):
        validate(kw["a"], kw["b"], kw["offs"].long(), check_offsets=False)


@pytest.mark.parametrize(
    "text,on",
    [("1", True), ("true", True), ("TRUE", True), ("On", True), ("yes", True), ("0", False), ("false", False),
     ("off", False), ("", False), ("2", False)],
)  # fmt: skip
def test_interpreting_reads_triton_interpret_as_triton_does(monkeypatch, text, on):
    import triton

    from autoheur.kernels.validate import interpreting

    monkeypatch.setenv("TRITON_INTERPRET", text)
    assert interpreting() is on
    if hasattr(triton, "knobs"):
        assert interpreting() is triton.knobs.runtime.interpret


@pytest.mark.parametrize(
    "dtype,choices",
    [(torch.float32, "use None or torch.float32"), (F16, "use None, torch.float16 or torch.float32")],
)
def test_out_dtype_error_lists_the_choices(device, dtype, choices):
    kw = operands(Ragged.M, device, dtype) | dict(out_dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=rf"^out_dtype=torch\.bfloat16 is not supported for {dtype} inputs: {choices}$"):
        call(**kw)


@pytest.mark.parametrize(
    "ragged,out_shape",
    [(Ragged.M, (32, 24)), (Ragged.N, (24, 32)), (Ragged.K, (0, 24, 24)), (Ragged.NONE, (0, 24, 24))],
)
def test_no_groups_is_valid_as_in_torch(ragged, out_shape, device):
    """G = 0 (an empty offs; a batch of none), which torch._grouped_mm takes: nothing to compute."""
    kw = operands(ragged, device)
    if ragged == Ragged.NONE:
        kw["a"], kw["b"] = kw["a"][:0], kw["b"][:0]
    elif ragged == Ragged.M:
        kw["b"], kw["offs"] = kw["b"][:0], kw["offs"][:0]
    elif ragged == Ragged.N:
        kw["a"], kw["offs"] = kw["a"][:0], kw["offs"][:0]
    else:
        kw["offs"] = kw["offs"][:0]
    c = validate(kw["a"], kw["b"], kw["offs"])
    assert (c.groups, c.out_shape) == (0, out_shape)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match=r"^a is on cpu: .*CUDA"):
        call(**operands(Ragged.M, "cpu"))


@pytest.mark.parametrize(
    "ragged,a_row_major,b_row_major,tma_aligned",
    [
        (Ragged.M, True, True, True),
        (Ragged.M, True, False, True),
        (Ragged.M, False, True, False),
        (Ragged.M, False, False, False),
        (Ragged.N, True, True, False),
        (Ragged.N, False, True, False),
        (Ragged.N, True, False, True),
        (Ragged.N, False, False, True),
        (Ragged.K, True, True, False),
        (Ragged.K, True, False, False),
        (Ragged.K, False, True, True),
        (Ragged.K, False, False, False),
        (Ragged.NONE, True, True, True),
        (Ragged.NONE, False, False, True),
    ],
)
def test_tma_aligned_by_layout(ragged, a_row_major, b_row_major, tma_aligned, device):
    """TMA starts descriptors at group bases: legal only when the ragged dim is not an operand's contiguous one."""
    kw = operands(ragged, device)
    if not a_row_major:
        kw["a"] = kw["a"].transpose(-1, -2).contiguous().transpose(-1, -2)
    if not b_row_major:
        kw["b"] = kw["b"].transpose(-1, -2).contiguous().transpose(-1, -2)
    c = validate(kw["a"], kw["b"], kw["offs"])
    assert (c.ragged, c.a_k_contig, c.b_n_contig, c.tma_aligned) == (ragged, a_row_major, b_row_major, tma_aligned)
    assert c.signature.tma_aligned == tma_aligned


def test_a_broadcast_operand_goes_by_pointers(device):
    """A weight or input expanded along its rows or columns (stride 0) is valid but not TMA-aligned: descriptors are
    meant for positive strides. A group stride of 0 (one weight shared by every group) keeps TMA."""
    kw = operands(Ragged.M, device)
    assert validate(kw["a"], kw["b"], kw["offs"]).tma_aligned
    a = kw["a"][:1].expand(kw["a"].shape)  # every row the same: row stride 0
    assert not validate(a, kw["b"], kw["offs"]).tma_aligned
    b = kw["b"][:, :1].expand(kw["b"].shape)  # every row of each weight the same: row stride 0
    assert not validate(kw["a"], b, kw["offs"]).tma_aligned
    shared = kw["b"][:1].expand(kw["b"].shape)  # one weight for every group
    assert validate(kw["a"], shared, kw["offs"]).tma_aligned


@pytest.mark.parametrize(
    "ragged,out_shape,groups,m,n,k,total",
    [
        (Ragged.M, (32, 24), 4, 0, 24, 40, 32),
        (Ragged.N, (24, 32), 4, 24, 0, 40, 32),
        (Ragged.K, (4, 24, 24), 4, 24, 24, 0, 32),
        (Ragged.NONE, (4, 24, 24), 4, 24, 24, 40, 0),
    ],
)
def test_validated_call_fields(ragged, out_shape, groups, m, n, k, total, device):
    kw = operands(ragged, device)
    c = validate(kw["a"], kw["b"], kw["offs"])
    assert (c.out_shape, c.groups, c.m, c.n, c.k, c.ragged_total) == (out_shape, groups, m, n, k, total)
    assert c.out_dtype == F16 and c.elem_bytes == 2
    assert validate(kw["a"], kw["b"], kw["offs"], torch.float32).out_dtype == torch.float32


# ---------------------------------------------------------------------------------------------------------------
# Regressions of bugs found by these tests (formerly strict xfails)
# ---------------------------------------------------------------------------------------------------------------


def test_noncontiguous_offs_is_refused_or_made_contiguous(device):
    kw = operands(Ragged.M, device)
    offs = offsets([5, 99, 5, 99, 24, 99, 32, 99], device)[::2]  # values 5, 5, 24, 32; memory 5, 99, 5, 99
    try:
        c = validate(kw["a"], kw["b"], offs)
    except ValueError as e:
        assert "offs" in str(e)
        return
    assert c.offs.is_contiguous(), "the kernel would read 5, 99, 5, 99 and write past the output"


def test_the_alignment_advice_is_what_would_pass():
    """The dense copy offered is one whose leading stride is aligned, the operand's own major first (a column-major
    weight-gradient A keeps its TMA path); padding where neither is (stop 80's reviews: the advice was tested on the
    wrong extent, then offered a row-major copy of a column-major operand that had an aligned column-major one)."""
    from autoheur.kernels.validate import _major

    cases = [
        (torch.randn(32, 20).half()[:, :16].t(), r"\.mT\.contiguous\(\)\.mT"),  # (16, 32) column-major: both align
        (torch.randn(16, 20).half()[:, :12].t(), r"call \.contiguous\(\)"),  # (12, 16) column-major: cols 16 only
        (torch.randn(32, 20).half()[:, :16], r"call \.contiguous\(\)"),  # (32, 16) row-major: its own
        (torch.randn(32, 20).half()[:, :12], r"\.mT\.contiguous\(\)\.mT"),  # (32, 12) row-major: rows 32 only
        (torch.randn(12, 20).half()[:, :12], r"pad the inner dimension \(12\)"),  # (12, 12): neither
    ]
    for t, advice in cases:
        with pytest.raises(ValueError, match=advice):
            _major(t, "a")
        if "pad" not in advice:  # and the advice passes, in the major it names
            fixed = t.mT.contiguous().mT if "mT" in advice else t.contiguous()
            row_major, aligned = _major(fixed, "a")
            assert aligned and row_major == ("mT" not in advice)
