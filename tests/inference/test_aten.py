"""torch._grouped_mm as a tuning candidate (AUTOHEUR_ATEN): when it is timed, what a win caches and how a cached
"aten" runs, on the full path and the hot path."""

from __future__ import annotations

import json

import pytest
import torch

import autoheur.inference.api as api
from autoheur.inference import aten as aten_mod
from autoheur.inference import tuner as tuner_mod
from autoheur.inference.api import grouped_mm
from autoheur.inference.aten import ATEN, AtenChoice, aten_allowed, choice_from_id, run_choice
from autoheur.inference.cache import TuneCache
from autoheur.kernels.config import KernelConfig
from autoheur.kernels.launcher import BoundLaunch
from autoheur.kernels.validate import validate

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
OFFS = torch.tensor([5, 5, 28], dtype=torch.int32, device=DEVICE)
CFG = "m64n128k64s3w4g8-ptr"


@pytest.mark.parametrize(
    "setting,gpu,allowed",
    [("auto", True, True), ("auto", False, False), ("on", False, True), ("off", True, False), (" ON ", False, True)],
)
def test_setting(monkeypatch, setting, gpu, allowed):
    monkeypatch.setenv("AUTOHEUR_ATEN", setting)
    assert aten_allowed(gpu) is allowed


def test_bad_setting_is_refused(monkeypatch):
    monkeypatch.setenv("AUTOHEUR_ATEN", "maybe")
    with pytest.raises(ValueError, match="AUTOHEUR_ATEN='maybe'"):
        grouped_mm(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)


def test_choice_ids():
    assert choice_from_id("aten") is ATEN and AtenChoice() == ATEN
    assert choice_from_id(CFG) == KernelConfig.from_id(CFG)
    with pytest.raises(ValueError):
        choice_from_id("cutlass")


def _tune_with(monkeypatch, setting: str) -> list[bool]:
    """Tune one call under AUTOHEUR_ATEN=`setting` with the timing stubbed to let ATen win whenever it is timed;
    the `aten` flags the timing was called with."""
    monkeypatch.setenv("AUTOHEUR_ATEN", setting)
    seen = []

    def fake(call, cfgs, aten=False):
        seen.append(aten)
        return (ATEN, 0.5) if aten else (cfgs[0], 1.0)

    monkeypatch.setattr(tuner_mod, "time_candidates", fake)
    return seen


def test_an_aten_win_runs_torch_grouped_mm_and_is_cached(monkeypatch):
    seen = _tune_with(monkeypatch, "on")
    spy = []
    real = api.aten_grouped_mm
    monkeypatch.setattr(api, "aten_grouped_mm", lambda call: spy.append(1) or real(call))
    monkeypatch.setattr(api, "launch", lambda *a: pytest.fail("launched a Triton kernel after an ATen win"))
    monkeypatch.setattr(BoundLaunch, "__call__", lambda *a: pytest.fail("launched a Triton kernel after an ATen win"))
    a, b = torch.randn(28, 24), torch.randn(3, 24, 40)
    out = grouped_mm(a, b, OFFS)
    torch.testing.assert_close(out, torch._grouped_mm(a, b, OFFS))
    assert seen == [True] and spy == [1]
    grouped_mm(torch.randn(28, 24), b, OFFS)  # the hot path: same properties
    assert seen == [True] and spy == [1, 1]
    # another process reads the choice back from disk, from the cache of choices made with ATen among them
    tuner = tuner_mod.Tuner()
    call = validate(a, b, OFFS)
    assert tuner.config_for(call) is ATEN and seen == [True]
    entry = next(iter(json.loads(tuner.cache(call.device.name, aten=True).path.read_text()).values()))
    assert entry["config"] == "aten" and entry["source"].endswith("+ aten") and entry["candidates"] == 3


def test_the_hot_path_runs_no_aten_once_aten_is_turned_off(monkeypatch):
    """A call torch._grouped_mm won under AUTOHEUR_ATEN=on, repeated with tensors of the same properties after
    AUTOHEUR_ATEN=off: the hot path's memo, keyed by the tensors' properties alone, ran torch._grouped_mm again, where
    the tuner's memo and the caches never hand back an "aten" under off. It is tuned again, Triton only."""
    seen = _tune_with(monkeypatch, "on")
    a, b = torch.randn(28, 24), torch.randn(3, 24, 40)
    grouped_mm(a, b, OFFS)  # ATen wins; the hot path remembers it
    assert seen == [True]
    monkeypatch.setenv("AUTOHEUR_ATEN", "off")
    monkeypatch.setattr(api, "aten_grouped_mm", lambda call: pytest.fail("ran torch._grouped_mm with ATEN=off"))
    for _ in range(2):  # tuned again on the full path, then its own hot path
        a2 = torch.randn(28, 24)
        torch.testing.assert_close(grouped_mm(a2, b, OFFS), torch._grouped_mm(a2, b, OFFS))
    assert seen == [True, False]


def test_a_call_torch_refuses_is_not_handed_its_keys_aten_win(monkeypatch):
    """`a` a sliding window (rows overlapping: leading stride 8 < 24 columns): validate takes it and the kernel reads
    it, torch._grouped_mm refuses it ("Invalid strides/sizes"). Its tuning key is the dense `a`'s, so once ATen had
    won that key, the call failed inside torch._grouped_mm instead of running a Triton config."""
    from autoheur.inference.key import tune_key
    from autoheur.kernels.reference import reference_grouped_mm

    _tune_with(monkeypatch, "on")
    a, b = torch.randn(28, 24), torch.randn(3, 24, 40)
    grouped_mm(a, b, OFFS)  # ATen wins the key
    window = torch.randn(8 * 27 + 24).as_strided((28, 24), (8, 1))
    assert tune_key(validate(window, b, OFFS)) == tune_key(validate(a, b, OFFS))
    with pytest.raises(RuntimeError, match="strides"):
        torch._grouped_mm(window, b, OFFS)
    for _ in range(2):  # the full path, then the hot path
        torch.testing.assert_close(grouped_mm(window, b, OFFS), reference_grouped_mm(window, b, OFFS))


def test_with_aten_off_it_is_never_timed_nor_read_back(monkeypatch):
    seen = _tune_with(monkeypatch, "on")
    a, b = torch.randn(28, 24), torch.randn(3, 24, 40)
    grouped_mm(a, b, OFFS)  # ATen wins and is cached
    seen.clear()
    monkeypatch.setenv("AUTOHEUR_ATEN", "off")
    tuner = tuner_mod.Tuner()
    choice = tuner.config_for(validate(a, b, OFFS))
    assert isinstance(choice, KernelConfig) and seen == [False]  # tuned again, Triton only, in its own cache


def test_mode_off_never_times_aten(monkeypatch):
    seen = _tune_with(monkeypatch, "on")
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")
    assert isinstance(
        tuner_mod.Tuner().config_for(validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)), KernelConfig
    )
    assert seen == []


def test_default_times_aten_on_a_gpu_only(monkeypatch):
    monkeypatch.delenv("AUTOHEUR_ATEN", raising=False)
    seen = []
    monkeypatch.setattr(
        tuner_mod, "time_candidates", lambda call, cfgs, aten=False: seen.append(aten) or (cfgs[0], 1.0)
    )
    tuner_mod.Tuner().config_for(validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS))
    assert seen == [DEVICE == "cuda" and not aten_mod.interpreting()]


def test_aten_that_cannot_run_the_call_is_left_out(monkeypatch):
    """A call torch._grouped_mm refuses (a dtype or layout it does not take) is timed over the configs alone."""

    def refuse(*a, **kw):
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")

    monkeypatch.setattr(torch, "_grouped_mm", refuse)
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    choice, ms = tuner_mod.time_candidates(call, [KernelConfig.from_id(CFG)], aten=True)
    assert choice == KernelConfig.from_id(CFG) and ms > 0


@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU either may win; in the interpreter ATen's CPU code always does")
def test_real_timing_includes_aten():
    """ATen is timed beside the configs: in the interpreter its CPU code wins, by far but not always on a busy host
    (a review saw the interpreted config win once in three runs beside a busy loop), so three tries."""
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    for _ in range(3):
        choice, ms = tuner_mod.time_candidates(call, [KernelConfig.from_id(CFG)], aten=True)
        if choice is ATEN:
            break
    assert choice is ATEN and ms > 0
    torch.testing.assert_close(run_choice(call, choice), torch._grouped_mm(call.a, call.b, call.offs))
    torch.testing.assert_close(run_choice(call, KernelConfig.from_id(CFG)), run_choice(call, ATEN))


def test_cache_accepts_aten_and_keeps_it_apart(tmp_path):
    TuneCache("GPU X", tmp_path, aten=True).put("k", {"config": "aten"})
    assert TuneCache("GPU X", tmp_path, aten=True).get("k")["config"] == "aten"
    assert TuneCache("GPU X", tmp_path).get("k") is None
    with pytest.raises(ValueError):
        TuneCache("GPU X", tmp_path, aten=True).put("bad", {"config": "cutlass"})


@pytest.mark.parametrize("layout", ["2d3d", "3d2d"])
def test_an_aten_win_gives_the_layout_the_fake_implementation_promises(monkeypatch, layout):
    """torch._grouped_mm pads its output's rows to 16 bytes (strides (4, 1) for n = 3 float32): after an ATen win the
    op returned those strides, where its fake implementation (what torch.compile traces) promises a contiguous
    output, as a Triton config's is. Inductor refused the call ("expected ... stride 4==3"), and a traced .view()
    failed. 3d2d: the padded extent is the ragged one (an odd token count), n = 27."""
    _tune_with(monkeypatch, "on")
    if layout == "2d3d":
        a, b = torch.randn(28, 24), torch.randn(3, 3, 24).transpose(1, 2)  # n = 3, b column-major (aligned)
    else:
        a, b = torch.randn(3, 8, 24), torch.randn(27, 24).t()  # n = 27 ragged, b column-major
    offs = torch.tensor([5, 5, 28 if layout == "2d3d" else 27], dtype=torch.int32)
    for _ in range(2):  # the full path, then the hot path
        out = torch.ops.autoheur.grouped_mm(a, b, offs)
        assert out.is_contiguous(), out.stride()
        torch.testing.assert_close(out, torch._grouped_mm(a, b, offs))
    torch.library.opcheck(torch.ops.autoheur.grouped_mm.default, (a, b, offs, None), test_utils=("test_faketensor",))
