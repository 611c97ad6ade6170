"""`autoheur.grouped_mm`'s entry: arguments of the wrong type get the validator's error before anything else, no
groups is an empty result as with torch._grouped_mm, and AUTOHEUR_CHECK_OFFSETS's spellings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import autoheur.inference.api as api
from autoheur.inference import tuner as tuner_mod
from autoheur.inference.api import grouped_mm

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py decides
OFFS = torch.tensor([5, 5, 28], dtype=torch.int32, device=DEVICE)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any tuning or launch is a failure: these calls must end in validation (or before)."""
    monkeypatch.setattr(tuner_mod.Tuner, "config_for", lambda self, call: pytest.fail("tuned"))
    monkeypatch.setattr(api, "launch", lambda *a: pytest.fail("launched"))


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "requires-grad"])
@pytest.mark.parametrize(
    "which,match",
    [("a", r"^a must be a torch\.Tensor, got list"), ("b", r"^b must be a torch\.Tensor, got list"),
     ("offs", r"^offs must be a torch\.Tensor, got list"), ("out_dtype", r"^out_dtype=\[torch\.float32\] is a list")],
)  # fmt: skip
def test_arguments_of_the_wrong_type_get_the_validators_error(nothing_runs, which, match, grad):
    args = {"a": torch.randn(28, 24), "b": torch.randn(3, 24, 40), "offs": OFFS, "out_dtype": None}
    if grad:  # an operand that needs gradients takes the autograd path first
        other = "b" if which == "a" else "a"
        args[other].requires_grad_()
    args[which] = [torch.float32] if which == "out_dtype" else args[which].tolist()
    with pytest.raises(TypeError, match=match):
        grouped_mm(**args)


@pytest.mark.parametrize("which", ["a", "b", "offs"])
def test_a_sparse_tensor_gets_the_validators_error(nothing_runs, which):
    """The fast path's signature reads data_ptr(), which a sparse tensor lacks: torch's "Cannot access data pointer"
    came out instead of the validator's message, before and after a tuned call of the same shapes."""
    args = {"a": torch.randn(28, 24), "b": torch.randn(3, 24, 40), "offs": OFFS}
    args[which] = args[which].to_sparse()
    for entry in (grouped_mm, torch.ops.autoheur.grouped_mm):
        with pytest.raises(TypeError, match=rf"^{which} is a torch\.sparse_coo tensor: .* pass {which}\.to_dense"):
            entry(**args)


G0_CASES = {  # no groups, each layout: torch._grouped_mm's output shape
    "2d3d": (lambda z: (torch.randn(8, 32), torch.randn(0, 32, 16), z), (8, 16)),
    "3d2d": (lambda z: (torch.randn(0, 8, 32), torch.randn(32, 16), z), (8, 16)),
    "2d2d": (lambda z: (torch.randn(8, 32), torch.randn(32, 16), z), (0, 8, 16)),
    "3d3d": (lambda z: (torch.randn(0, 8, 32), torch.randn(0, 32, 16), None), (0, 8, 16)),
}


@pytest.mark.parametrize("layout", sorted(G0_CASES))
def test_no_groups_gives_torchs_empty_result_without_tuning_or_launch(nothing_runs, layout):
    build, shape = G0_CASES[layout]
    a, b, offs = build(torch.zeros(0, dtype=torch.int32))
    out = grouped_mm(a, b, offs)
    assert tuple(out.shape) == shape and out.dtype == a.dtype
    if DEVICE == "cpu":  # torch's CPU code takes float32 (its CUDA one wants bfloat16)
        assert out.shape == torch._grouped_mm(a, b, offs).shape


def test_check_offsets_spellings_at_import():
    """AUTOHEUR_CHECK_OFFSETS is read once, at import: "false" turns the check off, a typo is refused by name."""
    code = (
        "import importlib, os\n"
        "import autoheur.inference.api as api\n"
        "print(api.CHECK_OFFSETS)\n"
        "os.environ['AUTOHEUR_CHECK_OFFSETS'] = 'maybe'\n"
        "try:\n"
        "    importlib.reload(api)\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "AUTOHEUR_CHECK_OFFSETS": "False"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[:2] == ["False", "AUTOHEUR_CHECK_OFFSETS='maybe': expected one of "
                                    "('1', 'true', 'on', 'yes', '0', 'false', 'off', 'no')"]  # fmt: skip


@pytest.mark.parametrize("layout", ["2d3d", "2d2d"])
def test_a_callers_padded_view_is_tuned_and_computed(layout):
    """K = 3 float32 columns of a buffer padded to 4 (16-byte rows): valid, as torch takes it. On a GPU the tuner
    checks its candidates on drawn inputs of the problem, which must be padded the same way, or every candidate fails
    (stop 78); in the interpreter there is no such check, so this passes there either way."""
    from autoheur.kernels.reference import reference_grouped_mm

    torch.manual_seed(0)
    if layout == "2d3d":
        a, b = torch.randn(20, 4, device=DEVICE)[:, :3], torch.randn(3, 3, 24, device=DEVICE)
    else:
        a, b = torch.randn(3, 20, device=DEVICE), torch.randn(20, 4, device=DEVICE)[:, :3]
    offs = torch.tensor([5, 8, 20], dtype=torch.int32, device=DEVICE)
    torch.testing.assert_close(grouped_mm(a, b, offs), reference_grouped_mm(a, b, offs), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(DEVICE == "cuda", reason="the interpreter's bf16 only")
def test_bfloat16_on_the_cpu_is_refused_before_any_launch(monkeypatch):
    """The interpreter's bf16 dot is wrong (garbage, not rounding): refused with what to do, not computed."""
    monkeypatch.setattr(tuner_mod, "time_candidates", lambda *a, **k: pytest.fail("tuned a bf16 call on the CPU"))
    a, b = torch.randn(28, 24, dtype=torch.bfloat16), torch.randn(3, 24, 40, dtype=torch.bfloat16)
    for fn in (grouped_mm, lambda *args: torch.ops.autoheur.grouped_mm(*args, None)):
        with pytest.raises(TypeError, match="bfloat16 on the CPU: the Triton interpreter"):
            fn(a, b, OFFS)
