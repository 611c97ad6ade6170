"""The tuner's on/off knobs and what it does with a cached choice that cannot run the call at hand."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest
import torch

import autoheur
from autoheur.inference import tuner as tuner_mod
from autoheur.inference.api import grouped_mm
from autoheur.inference.key import tune_key
from autoheur.kernels.config import KernelConfig, feasible_configs, infeasible_reason
from autoheur.kernels.reference import reference_grouped_mm
from autoheur.kernels.validate import validate

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py decides
# A device call's tree, trimmed to its 64 MiB carry limit, leaves the shipped H100 model out (stop 80): the tests that
# load it skip there. On a CPU host (CI, a full checkout) they always run, so a missing file fails them.
NEEDS_H100_MODEL = pytest.mark.skipif(
    DEVICE == "cuda"
    and not (Path(__file__).resolve().parents[2] / "models" / "nvidia-h100-80gb-hbm3.joblib").is_file(),
    reason="models/nvidia-h100-80gb-hbm3.joblib is not in this (trimmed) checkout",
)
OFFS = torch.tensor([5, 5, 28], dtype=torch.int32, device=DEVICE)


@pytest.mark.parametrize(
    "text,value",
    [("1", True), ("true", True), ("ON", True), (" Yes ", True), ("0", False), ("False", False), ("off", False),
     ("NO", False)],
)  # fmt: skip
def test_env_flag_spellings(monkeypatch, text, value):
    monkeypatch.setenv("AUTOHEUR_X", text)
    assert autoheur.env_flag("AUTOHEUR_X", not value) is value


@pytest.mark.parametrize("text", ["2", "maybe", "", "disable"])
def test_env_flag_refuses_anything_else_by_name(monkeypatch, text):
    monkeypatch.setenv("AUTOHEUR_X", text)
    with pytest.raises(ValueError, match=f"^AUTOHEUR_X={text!r}: expected one of"):
        autoheur.env_flag("AUTOHEUR_X", True)
    monkeypatch.delenv("AUTOHEUR_X")
    assert autoheur.env_flag("AUTOHEUR_X", True) is True


@pytest.mark.parametrize(("value", "kept"), [("false", False), ("true", True)])
def test_cache_off_spelled_false_keeps_no_tuned_config_on_disk(tmp_path, monkeypatch, value, kept):
    """Only the tuned configs: the compiled tree walk (models/forest.py) goes to the same directory either way, as it
    does on a GPU, where the model scores the candidates (stop 78's GPU suite: the directory exists there)."""
    monkeypatch.setenv("AUTOHEUR_CACHE", value)
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")
    grouped_mm(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    cache = tmp_path / "cache"  # the conftest's AUTOHEUR_CACHE_DIR
    assert bool(list(cache.glob("tuned-*.json"))) is kept
    if not kept:  # nothing of the tuning's (no lock, no temp file): at most the tree walk's own directory
        assert {p.name for p in cache.iterdir()} <= {"forest"} if cache.exists() else True


def test_a_cached_config_that_cannot_run_the_call_is_retuned_and_overwritten(monkeypatch, caplog):
    """A TMA config cached for this key, although this call's column-major `a` rules TMA out (a file edited, or
    written by other code): a miss, tuned again, its entry replaced, not an error on every call."""
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")
    monkeypatch.setenv("AUTOHEUR_ATEN", "off")
    a, b = torch.randn(24, 28).t(), torch.randn(3, 24, 40)
    call = validate(a, b, OFFS)
    tma = KernelConfig(32, 32, 32, 3, 2, load="tma")
    assert infeasible_reason(tma, call.signature, call.device) is not None
    cache = tuner_mod.default_tuner().cache(call.device.name, aten=False)
    key = tune_key(call).to_str()
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text(json.dumps({key: {"config": tma.config_id}}))
    with caplog.at_level(logging.WARNING, logger="autoheur"):
        out = grouped_mm(a, b, OFFS)
    torch.testing.assert_close(out[:28], reference_grouped_mm(a, b, OFFS)[:28])
    assert any(f"cached config {tma.config_id} cannot run" in r.getMessage() for r in caplog.records)
    now = json.loads(cache.path.read_text())[key]["config"]
    assert now != tma.config_id and infeasible_reason(KernelConfig.from_id(now), call.signature, call.device) is None


@NEEDS_H100_MODEL
@pytest.mark.parametrize("mode", ["off", "predicted"])
def test_a_broadcast_operand_gets_candidates_that_can_run_it(mode):
    """`a` expanded from one row: its shape would take TMA, but a stride of 0 goes by pointers. The shipped H100 model
    ranked the problem's TMA configs first, the filter by the call's own feasibility then left none, and
    AUTOHEUR_TUNE=off failed on `cands[0]` (stop 78's review). It now ranks the call's feasible configs."""
    from autoheur.models.artifact import MODELS_DIR, TrainedModel

    a = torch.randn(1, 2048, dtype=torch.bfloat16, device=DEVICE).expand(4096, 2048)
    b = torch.randn(8, 1408, 2048, dtype=torch.bfloat16, device=DEVICE).transpose(1, 2)
    offs = torch.arange(512, 4097, 512, dtype=torch.int32, device=DEVICE)
    call = validate(a, b, offs)
    tuner = tuner_mod.Tuner()
    tuner._models[call.device.name] = TrainedModel.load(MODELS_DIR / "nvidia-h100-80gb-hbm3.joblib")
    cands, source = tuner.candidates(call, mode, 10)
    assert source.startswith("model") and len(cands) == (1 if mode == "off" else 10)
    assert all(infeasible_reason(c, call.signature, call.device) is None for c in cands)


def test_problem_of_reads_the_operands_majors():
    """The problem the model ranks (and the compile check draws) has the call's own operand majors: a column-major A,
    as the backward passes it, is not ranked as a row-major one."""
    b = torch.randn(3, 24, 40)
    row, col = torch.randn(28, 24), torch.randn(24, 28).t()
    assert tuner_mod.problem_of(validate(row, b, OFFS)).a_major == "k"
    assert tuner_mod.problem_of(validate(col, b, OFFS)).a_major == "m"
    assert tuner_mod.problem_of(validate(row, b, OFFS)).b_major == "n"
    assert tuner_mod.problem_of(validate(row, torch.randn(3, 40, 24).transpose(1, 2), OFFS)).b_major == "k"


def test_fingerprint_is_this_gpus_properties_over_the_models():
    """A model ranks with the GPU's own properties (a borrowed one too) and its own measured rates."""
    import dataclasses
    from types import SimpleNamespace

    from autoheur.device import H100_SXM

    pcie = dataclasses.replace(H100_SXM, name="NVIDIA H100 PCIe", sm_count=114, l2_bytes=50 << 20)
    model = SimpleNamespace(device={**H100_SXM.to_dict(), "copy_GBps": 3350.0})
    fp = tuner_mod._fingerprint(SimpleNamespace(device=pcie), model)
    assert (fp["name"], fp["sm_count"], fp["l2_bytes"], fp["copy_GBps"]) == ("NVIDIA H100 PCIe", 114, 50 << 20, 3350.0)


@pytest.mark.parametrize("mode", ["off", "predicted"])
def test_the_fallback_list_offers_only_configs_that_can_run(monkeypatch, mode):
    """Without a model, the fixed list is cut to what this GPU can run (an sm_86 part runs 1 of the H100 list's 10)
    and to k: never an empty or infeasible candidate list."""
    import dataclasses

    from autoheur.device import H100_SXM
    from autoheur.models import artifact

    monkeypatch.setattr(artifact, "model_for_device", lambda name, directory=None, spec=None: (None, "none"))
    small = dataclasses.replace(H100_SXM, name="GPU small", compute_capability=(8, 6), smem_per_sm=101376,
                                smem_per_block_optin=101376)  # fmt: skip
    call = dataclasses.replace(validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS), device=small)
    with pytest.warns(UserWarning, match="none"):
        cands, source = tuner_mod.Tuner().candidates(call, mode, 2)
    assert "fixed list" in source and 1 <= len(cands) <= (1 if mode == "off" else 2)
    assert all(infeasible_reason(c, call.signature, small) is None for c in cands)
    with pytest.warns(UserWarning, match="none"):
        here, source = tuner_mod.Tuner().candidates(
            validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS), mode, 3
        )
    assert len(here) == (1 if mode == "off" else 3) and source == f"best fixed list top-{len(here)}"


def test_the_default_top_k_is_10(monkeypatch):
    monkeypatch.delenv("AUTOHEUR_TOP_K", raising=False)  # the run-time tests' conftest sets 2
    assert tuner_mod.top_k_setting() == 10


def test_the_in_process_memo_keeps_aten_choices_apart(monkeypatch):
    """A choice made with torch._grouped_mm among the candidates is not reused once AUTOHEUR_ATEN turns it off."""
    from autoheur.inference.aten import ATEN

    monkeypatch.setenv("AUTOHEUR_CACHE", "0")
    monkeypatch.setattr(tuner_mod, "time_candidates", lambda call, cfgs, aten=False: (ATEN if aten else cfgs[0], 1.0))
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    tuner = tuner_mod.Tuner()
    monkeypatch.setattr(tuner_mod, "aten_for", lambda call: True)
    assert tuner.config_for(call) is ATEN
    monkeypatch.setattr(tuner_mod, "aten_for", lambda call: False)
    assert tuner.config_for(call) is not ATEN


def _fake_tuning(monkeypatch) -> list[int]:
    """Tuning with no compile and no timing: the last candidate wins; the list returned gets each tuning's count of
    candidates."""
    timed = []

    def fake_timing(call, cfgs, aten=False):
        timed.append(len(cfgs))
        return cfgs[-1], 1.0

    monkeypatch.setattr(tuner_mod, "time_candidates", fake_timing)
    monkeypatch.setattr(tuner_mod, "compile_in_parallel", lambda call, cfgs, pool=None, where=None: cfgs)
    monkeypatch.setattr(tuner_mod, "aten_for", lambda call: False)
    return timed


def _no_models(tmp_path, monkeypatch) -> tuple:
    """An empty models directory (tmp_path/models, the lookups' only one; borrowing on) and a fixed list of the call's
    first three feasible configs: (the call, its tuning key, that list)."""
    from autoheur.models import artifact

    monkeypatch.setattr(artifact, "MODELS_DIR", tmp_path / "models")
    monkeypatch.delenv("AUTOHEUR_MODELS_DIR", raising=False)
    monkeypatch.delenv("AUTOHEUR_BORROW_MODEL", raising=False)
    (tmp_path / "models").mkdir()
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    listed = [c.config_id for c in feasible_configs(call.signature, call.device)[:3]]
    monkeypatch.setattr(artifact, "fallback_list", lambda directory=None: listed)
    return call, tune_key(call).to_str(), listed


def test_a_cached_choice_answers_only_its_own_mode_and_weaker_ones(monkeypatch):
    """An untimed AUTOHEUR_TUNE=off pick in the disk cache is tuned again when a later process asks for `predicted`
    (a quick smoke test must not leave production on untimed configs), and a predicted one again for `exhaustive`;
    a stronger mode's choice answers a weaker mode's request."""
    timed = _fake_tuning(monkeypatch)
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    key = tune_key(call).to_str()

    def run(mode):
        monkeypatch.setenv("AUTOHEUR_TUNE", mode)
        return tuner_mod.Tuner().config_for(call)  # a fresh process: the disk cache only

    run("off")
    assert timed == [] and tuner_mod.Tuner().cache(call.device.name).get(key)["mode"] == "off"
    picked = run("predicted")
    assert timed == [2] and tuner_mod.Tuner().cache(call.device.name).get(key)["mode"] == "predicted"
    assert run("predicted") == picked and run("off") == picked and timed == [2]  # answered from the cache
    run("exhaustive")
    assert len(timed) == 2 and timed[1] > 2  # the whole space this time
    run("predicted")
    assert len(timed) == 2


def test_a_cached_pick_of_a_shorter_top_k_is_tuned_again_for_a_longer_one(monkeypatch):
    """AUTOHEUR_TOP_K=1 caches an untimed pick as `predicted`: a later process asking for the top 10 tuned nothing
    and kept it for good. The entry now records its k; a longer list tunes again, a shorter or equal one is answered;
    an entry of an earlier version (no k recorded) is kept."""
    timed = _fake_tuning(monkeypatch)
    call = validate(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
    key = tune_key(call).to_str()
    monkeypatch.setenv("AUTOHEUR_TUNE", "predicted")

    def run(k):
        monkeypatch.setenv("AUTOHEUR_TOP_K", str(k))
        tuner_mod.Tuner().config_for(call)  # a fresh process: the disk cache only
        return tuner_mod.Tuner().cache(call.device.name).get(key)

    assert run(1)["top_k"] == 1 and timed == []  # one candidate: picked untimed
    assert run(10)["top_k"] == 10 and timed == [10]
    assert run(4)["top_k"] == 10 and run(10)["top_k"] == 10 and timed == [10]  # answered from the cache
    cache = tuner_mod.Tuner().cache(call.device.name)
    entry = {k: v for k, v in cache.get(key).items() if k != "top_k"}
    cache.path.write_text(json.dumps({key: {**entry, "ms": None}}))
    assert "top_k" not in run(20) and timed == [10]  # an earlier version's entry: kept


def test_a_cached_choice_of_another_model_is_tuned_again(tmp_path, monkeypatch, caplog):
    """A GPU's first shapes tuned without a model of its own (the fixed list, or a borrowed model) kept those picks
    for good once its own model was trained: the disk cache answered them and the new model never ranked them. A
    predicted choice now records the model that ranked it, and a process whose lookup takes another tunes it again;
    an entry of an earlier version (no model recorded) is kept."""
    from autoheur.models import artifact

    timed = _fake_tuning(monkeypatch)
    call, key, listed = _no_models(tmp_path, monkeypatch)
    mine = _ListModel(listed)  # the GPU's own model, once its file is there
    monkeypatch.setattr(artifact, "model_for_device", lambda name, directory=None, spec=None: (
        (mine, "mine") if (tmp_path / "models" / "mine.joblib").exists() and spec is not None else (None, "none")
    ))  # fmt: skip

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback list's warnings
            tuner_mod.Tuner().config_for(call)  # a fresh process: the disk cache only
        return tuner_mod.Tuner().cache(call.device.name).get(key)

    assert run()["model"] == "fixed list" and timed == [2]
    assert run()["model"] == "fixed list" and timed == [2]  # answered from the cache
    side = {"family": "triton", "device": {"name": call.device.name}, "created_at": "2026-12-01T00:00:00+00:00"}
    (tmp_path / "models" / "mine.joblib").write_bytes(b"")
    (tmp_path / "models" / "mine.json").write_text(json.dumps(side))  # the GPU's own model, trained since
    with caplog.at_level(logging.INFO, logger="autoheur"):
        assert run()["model"].startswith("mine.joblib 2026-12-01") and timed == [2, 2]
    assert any("was ranked by fixed list" in r.getMessage() for r in caplog.records)
    assert run()["model"].startswith("mine.joblib") and timed == [2, 2]
    cache = tuner_mod.Tuner().cache(call.device.name)
    cache.path.write_text(json.dumps({key: {"config": KernelConfig(32, 32, 32, 3, 2).config_id, "mode": "predicted"}}))
    assert "model" not in run() and timed == [2, 2]  # an earlier version's entry: kept


class _ListModel:
    """A stand-in model that ranks a given list of configs first."""

    meta = {"model": "list"}
    device: dict = {}

    def __init__(self, ids):
        self.ids = ids

    def top_k(self, problem, k, device=None, signature=None):
        return [(KernelConfig.from_id(c), 0.0) for c in self.ids[:k]]

    def extrapolation(self, problem, device):
        return []


def test_a_choice_the_fixed_list_made_for_an_unusable_borrowed_model_says_so(tmp_path, monkeypatch, caplog):
    """A GPU without a model of its own whose nearest kin's model does not load ranks with the fixed list: its choices
    were recorded as the borrowed model's, so they stayed for good once that model loaded again. A choice records the
    fixed list then, is kept while the borrowed model stays unusable, and is tuned again once it ranks."""
    from autoheur.device import H100_SXM
    from autoheur.models import artifact

    timed = _fake_tuning(monkeypatch)
    call, key, listed = _no_models(tmp_path, monkeypatch)
    kin = {**H100_SXM.to_dict(), **call.device.to_dict(), "name": "NVIDIA H800"}  # the same architecture
    side = {"family": "triton", "device": kin, "created_at": "2026-12-01T00:00:00+00:00"}
    (tmp_path / "models" / "h800.joblib").write_bytes(b"not a model")  # unusable: the fixed list ranks
    (tmp_path / "models" / "h800.json").write_text(json.dumps(side))

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback's warnings
            tuner_mod.Tuner().config_for(call)  # a fresh process: the disk cache only
        return tuner_mod.Tuner().cache(call.device.name).get(key)

    assert run()["model"] == "fixed list" and timed == [2]
    assert run()["model"] == "fixed list" and timed == [2]  # still the fixed list's to make: kept
    real = artifact.model_for_device

    def loads_again(name, directory=None, spec=None):  # the borrowed model loads again
        return (_ListModel(listed[1:]), "borrowed") if spec is not None else real(name, directory, spec=spec)

    monkeypatch.setattr(artifact, "model_for_device", loads_again)
    with caplog.at_level(logging.INFO, logger="autoheur"):
        assert run()["model"].startswith("h800.joblib 2026-12-01") and timed == [2, 2]
    said = "was ranked by fixed list, this GPU's model is now h800.joblib"
    assert any(said in r.getMessage() for r in caplog.records)
    assert run()["model"].startswith("h800.joblib") and timed == [2, 2]
