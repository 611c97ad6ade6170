"""The `inductor` collection family on the CPU: rows from the feedback saver's timings of Inductor's real choices,
the benchmarked problem, the dataset's metadata, and refusals. Inductor's autotuning itself needs a GPU (gpu-marked)."""

from __future__ import annotations

import math

import pytest
import torch

from autoheur.collect.runner import CollectOptions, collect
from autoheur.collect.schema import Metadata, device_fingerprint, rows_for
from autoheur.collect.store import DatasetStore
from autoheur.device import H100_SXM
from autoheur.inductor.choices import (
    grid_configs,
    grid_hash,
    offsets_decrease,
    template_config,
    template_source_hash,
)
from autoheur.inductor.collect import TIMING_VERSION, as_benchmarked, benchmark_crashes, measure, results_from_timings
from autoheur.problem import Problem

from .conftest import Recorder, compile_and_run, sa

PROBLEM = Problem("2d3d", 4, (90, 200, 0, 222), 0, 512, 256, name="skewed")


def inductor_meta() -> Metadata:
    fp = device_fingerprint(H100_SXM, 3000.0, 700.0, None, None, {"torch": "2.13.0", "triton": "3.6.0", "cuda": "13.0"})
    return Metadata(fp, grid_hash(), template_source_hash(), timing_version=TIMING_VERSION, family="inductor")


def test_the_benchmarked_problem_is_inductors(hopper):
    """Inductor times the shapes with an even split; the problem read from its real choices says the same."""
    bench = as_benchmarked(PROBLEM)
    assert bench.sizes == (128, 128, 128, 128) and bench.total == PROBLEM.total and bench.name == "skewed"
    rec = Recorder()
    compile_and_run(rec, inputs=PROBLEM.make_inputs("cpu"))
    assert rec.problems[0] == bench
    assert as_benchmarked(Problem("3d3d", 2, (), 64, 64, 64)) == Problem("3d3d", 2, (), 64, 64, 64)


def test_shapes_whose_benchmark_offsets_decrease_are_known():
    """47 rows in 16 groups of bf16: Inductor's 15th benchmark end rounds to 48, past the total, and its ATen choice
    fails a device-side assert on the negative size (seen on an H100, stop 45). Collection leaves such shapes out."""
    assert offsets_decrease(47, 16, 8) and not offsets_decrease(48, 16, 8) and not offsets_decrease(100, 3, 8)
    assert not offsets_decrease(7, 1, 8)  # one group: no rounded end at all
    crash = Problem("2d3d", 16, (3,) * 15 + (2,), 0, 2048, 768, name="qwen3-30b-a3b/down/t64/uniform/ep8")
    assert crash.total == 47 and benchmark_crashes(crash)
    assert not benchmark_crashes(Problem("2d3d", 16, (3,) * 16, 0, 2048, 768))  # 48 rows: ends 0, 8, ..., 48
    assert not benchmark_crashes(Problem("3d3d", 2, (), 64, 64, 64))
    # fp32 operands align to 4 rows: 47 in 16 groups is then fine (the 15th end 44.06 -> 44)
    assert not benchmark_crashes(Problem("2d3d", 16, (3,) * 15 + (2,), 0, 2048, 768, "float32"))


def test_rows_from_real_choices_and_their_timings(hopper, tmp_path):
    rec = Recorder()
    compile_and_run(rec, inputs=PROBLEM.make_inputs("cpu"))
    choices = rec.lists[0]
    templates = [c for c in choices if template_config(c) is not None]
    timings = {c: 0.1 + i / 100 for i, c in enumerate(templates)}
    timings[templates[-1]] = math.inf  # a choice that failed to compile or run
    timings[choices[0]] = 0.05  # ATen
    results, aten_ms = results_from_timings(timings)
    assert aten_ms == 0.05 and len(results) == len(grid_configs()) == 144
    status = {c.config_id: s for c, s, _ in results}
    assert status[template_config(templates[0]).config_id] == "ok"
    assert status[template_config(templates[-1]).config_id] == "compile_error"
    assert sum(s == "ok" for s in status.values()) == len(templates) - 1
    assert sum(s == "invalid" for s in status.values()) == 144 - len(templates)  # pruned: never offered
    store = DatasetStore.open(tmp_path / "ind", inductor_meta())
    bench = as_benchmarked(PROBLEM)
    store.write_problem(bench, rows_for(bench, results))
    df = DatasetStore.load(tmp_path / "ind").read()
    assert len(df) == 144 and df[df.status == "ok"].median_ms.min() == pytest.approx(0.1)
    assert DatasetStore.load(tmp_path / "ind").meta.family == "inductor"


def test_timings_outside_the_grid_are_refused():
    class Fake:
        name = "triton_grouped_mm_0"
        description = "BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, num_stages=3, num_warps=4, USE_TMA_LOAD=True"

    with pytest.raises(ValueError, match="outside its grid"):
        results_from_timings({Fake(): 1.0})


def test_timings_without_a_template_choice_are_refused(hopper):
    """Inductor's max-autotune timing ATen alone, or nothing (one choice left: a GPU below sm_90, its deterministic
    mode, a preprocessing function removing the templates), recorded all 144 grid configs `invalid` (never offered)
    and the problem as done: refused, naming the causes."""
    rec = Recorder()
    compile_and_run(rec, inputs=PROBLEM.make_inputs("cpu"))
    aten = rec.lists[0][0]
    assert template_config(aten) is None
    for timings in ({aten: 0.05}, {}):
        with pytest.raises(ValueError, match="timed no grouped_mm template choice for this problem"):
            results_from_timings(timings)


def test_a_gpu_without_inductors_template_is_refused_before_any_problem(tmp_path, monkeypatch, capsys):
    """Inductor offers its grouped_mm template on CUDA GPUs of sm_90 and newer only (mm_grouped.can_use_triton_kernel):
    on an A100 or a ROCm GPU the collection timed ATen alone, found out problem by problem. Refused before any work
    (the GPU simulated: CUDA said available, its capability and ROCm patched)."""
    import autoheur.collect.runner as runner
    from autoheur.cli import main
    from autoheur.inductor.collect import why_no_template_here

    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [64, 64], "n": 128, "k": 128, "dtype": "bfloat16"}\n')
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(runner, "interpreting", lambda: False)
    for cap, hip, message in (((8, 0), None, "this GPU is sm_80"), ((9, 0), "6.2", "a ROCm GPU")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, cap=cap: cap)
        monkeypatch.setattr(torch.version, "hip", hip)
        assert message in why_no_template_here()
        assert main(["collect", "--family", "inductor", "--shapes", str(shapes), "--out", str(tmp_path / "d")]) == 2
        assert message in capsys.readouterr().err
        with pytest.raises(ValueError, match=f"cannot be collected here: {message}"):
            collect([PROBLEM], tmp_path / "x", CollectOptions(family="inductor"))
        assert not (tmp_path / "d").exists() and not (tmp_path / "x").exists()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    assert why_no_template_here() is None


def test_inductor_family_refusals(tmp_path):
    with pytest.raises(ValueError, match="family"):
        CollectOptions(family="cutlass")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs a CUDA GPU"):
            collect([PROBLEM], tmp_path / "x", CollectOptions(family="inductor"))
    mine = inductor_meta()
    theirs = Metadata(mine.device, kernel_hash="k0")  # the triton family on the same device
    assert any(m.startswith("family") for m in mine.mismatches(theirs))
    DatasetStore.open(tmp_path / "ind", mine)
    with pytest.raises(ValueError, match="family"):
        DatasetStore.open(tmp_path / "ind", theirs)


def test_a_collection_under_the_choice_filter_is_refused(fake_autotuning, tmp_path, monkeypatch, capsys):
    """With autoheur's filter installed, Inductor autotuned the filter's top-k and the collection recorded the other
    configs Inductor offered `invalid` (pruned by Inductor): 35 of the 40 here. Refused now, saying how to disable it,
    by `measure` and by a collection before any dataset is begun (the GPU simulated as in the test above)."""
    import autoheur.collect.runner as runner
    from autoheur.cli import main
    from autoheur.inductor import ChoiceFilter, disable, enable

    from .test_filter import ScoreByTile

    bench = as_benchmarked(PROBLEM)
    offered = {c.config_id for c, s, _ in measure(bench, torch.device("cpu"))[0] if s == "ok"}
    assert len(offered) == 40
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [64, 64], "n": 128, "k": 128, "dtype": "bfloat16"}\n')
    refusal = r"filter is installed .*autoheur\.inductor\.filter\.disable\(\), or leave the `with enable\(\)` block"
    for install in ("enable", "by hand"):
        flt = enable(model=ScoreByTile(), top_k=5).filter if install == "enable" else ChoiceFilter(ScoreByTile(), 5)
        if install == "by hand":
            sa.add_preprocessing_fn(flt)
        try:
            with pytest.raises(ValueError, match=refusal):
                measure(bench, torch.device("cpu"))
            assert not flt.decisions  # refused before Inductor lowered anything
            with monkeypatch.context() as gpu:  # an H100 here, as far as the checks before a collection can tell
                gpu.setattr(torch.cuda, "is_available", lambda: True)
                gpu.setattr(torch.cuda, "device_count", lambda: 1)
                gpu.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
                gpu.setattr(runner, "interpreting", lambda: False)
                with pytest.raises(ValueError, match=f"cannot be collected now: .*{refusal}"):
                    collect([PROBLEM], tmp_path / "x", CollectOptions(family="inductor"))
                argv = ["collect", "--family", "inductor", "--shapes", str(shapes), "--out", str(tmp_path / "d")]
                assert main(argv) == 2
                assert "choice filter is installed" in capsys.readouterr().err
            assert not (tmp_path / "d").exists() and not (tmp_path / "x").exists()
        finally:
            disable()
            installed = sa.get_algorithm_selector_cache().preprocessing_fns
            if flt in installed:
                installed.remove(flt)
    again = {c.config_id for c, s, _ in measure(bench, torch.device("cpu"))[0] if s == "ok"}
    assert again == offered  # the filter gone, the whole list is timed again


@pytest.mark.gpu
def test_inductor_autotunes_a_problem_on_the_gpu():
    results, extra = measure(as_benchmarked(PROBLEM), torch.device("cuda"))
    ok = [t.median_ms for _, s, t in results if s == "ok"]
    assert len(ok) > 10 and all(0 < x < 10 for x in ok) and extra["aten_ms"] > 0
