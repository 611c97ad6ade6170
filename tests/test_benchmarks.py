"""The test-retest benchmark's scoring (benchmarks/retest.py): its figures are only as good as these helpers."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autoheur.collect.schema import problem_id
from autoheur.collect.shapes import load_shapes
from autoheur.collect.store import DatasetStore

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def retest():
    return _load("retest")


def frame(times: dict[str, list[float]], statuses: dict[str, list[str]] | None = None) -> pd.DataFrame:
    rows = []
    for pid, ts in times.items():
        for i, t in enumerate(ts):
            status = (statuses or {}).get(pid, ["ok"] * len(ts))[i]
            rows.append({"problem_id": pid, "config_id": f"c{i}", "median_ms": t, "status": status})
    return pd.DataFrame(rows)


def test_a_measurement_ranks_itself_perfectly(retest):
    a = frame({"p": [3.0, 1.0, 2.0], "q": [1.0, 5.0, 1.5]})
    pp = retest.score_on(retest.as_scores(a), a)
    assert (pp["eff_top1"] == 1.0).all() and pp["oracle_in_top10"].all()


def test_one_measurement_scored_on_another(retest):
    a = frame({"p": [1.00, 1.05, 2.0]})
    b = frame({"p": [1.10, 1.00, 2.0]})  # b's best is a's second: top-1 efficiency 1 / 1.05 on a
    pp = retest.score_on(retest.as_scores(b), a)
    assert pp.loc["p", "eff_top1"] == pytest.approx(1 / 1.05)
    assert pp.loc["p", "eff_best10"] == 1.0 and pp.loc["p", "oracle_in_top10"]


def test_censored_and_failed_configs_rank_last(retest):
    b = frame({"p": [9.0, 1.0, 0.5]}, {"p": ["ok", "censored", "compile_error"]})
    s = retest.as_scores(b).set_index("config_id")["score"]
    assert s["c0"] > s["c1"] > s["c2"] == -np.inf  # an ok 9 ms beats a censored lower bound beats a failure


def test_pooled_is_the_geometric_mean_and_keeps_censoring(retest):
    a = frame({"p": [1.0, 4.0, 2.0]}, {"p": ["ok", "ok", "wrong"]})
    b = frame({"p": [4.0, 9.0, 2.0]}, {"p": ["ok", "censored", "ok"]})
    ab = retest.pooled(a, b).set_index("config_id")
    assert ab.loc["c0", "median_ms"] == pytest.approx(2.0) and ab.loc["c0", "status"] == "ok"
    assert ab.loc["c1", "median_ms"] == pytest.approx(6.0) and ab.loc["c1", "status"] == "censored"
    assert ab.loc["c2", "status"] == "wrong"  # a failure in A stays one


def test_agreement(retest):
    a = frame({"p": [1.0, 2.0, 3.0]})
    b = frame({"p": [1.0, 3.1, 2.9]})
    g = retest.agreement(a, b).iloc[0]
    assert g["same_oracle"] and g["tau_ab"] == pytest.approx(1 / 3)  # one discordant pair of three
    assert g["top10_abs_log_ratio"] == pytest.approx(abs(math.log(2.9 / 3.0)))  # the median of 0, 0.44 and 0.034


@pytest.mark.parametrize("subtile", [False, True], ids=["one-store", "two-halves"])
def test_headroom_variant_kernel_computes_the_grouped_gemm(subtile, monkeypatch):
    """benchmarks/kernel_headroom.py's TMA-store variant (interpreter: fp16, tiny, an empty group and ragged ends)."""
    import torch

    from autoheur.kernels import KernelConfig, reference_grouped_mm, relative_error, validate

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    mod = _load("kernel_headroom")
    gen = torch.Generator().manual_seed(0)
    sizes, n, k = (5, 0, 19, 8), 48, 40
    a = torch.randn(sum(sizes), k, generator=gen).half()
    b = torch.randn(len(sizes), n, k, generator=gen).half().transpose(1, 2)  # stored [G, N, K], as the public problems
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
    call = validate(a, b, offs)
    out = torch.full(call.out_shape, float("nan"), dtype=torch.float16)
    cfg = KernelConfig(16, 32, 32, 2, 2, load="tma")
    monkeypatch.setattr(mod, "_alloc", lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))
    got = mod.run_variant(call, cfg, subtile, out)
    assert relative_error(got, reference_grouped_mm(a, b, offs)) < 1e-2


@pytest.mark.parametrize("flatten", [False, True], ids=["loop", "flatten"])
def test_headroom_flat_variant_computes_the_grouped_gemm(flatten, monkeypatch):
    """The one-loop variant: each tile's group from the offsets in registers (an empty group, ragged ends, N not a
    multiple of the block: rows and columns read past a group's end must not be stored)."""
    import torch

    from autoheur.kernels import KernelConfig, reference_grouped_mm, relative_error, validate

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    mod = _load("kernel_headroom")
    gen = torch.Generator().manual_seed(0)
    sizes, n, k = (5, 0, 19, 8, 33), 40, 48
    a = torch.randn(sum(sizes), k, generator=gen).half()
    b = torch.randn(len(sizes), n, k, generator=gen).half().transpose(1, 2)
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
    call = validate(a, b, offs)
    out = torch.full(call.out_shape, float("nan"), dtype=torch.float16)
    got = mod.run_flat(call, KernelConfig(16, 32, 16 * 2, 2, 2, group_m=8), flatten, out)
    assert relative_error(got, reference_grouped_mm(a, b, offs)) < 1e-2


def test_geomean_and_its_nan_cases():
    common = _load("common")
    assert common.geomean([1.0, 4.0]) == pytest.approx(2.0) and common.geomean(iter([2.0, 8.0])) == pytest.approx(4.0)
    assert math.isnan(common.geomean([])) and math.isnan(common.geomean([1.0, float("nan")]))


def test_sustained_probe_pair_agreement():
    """benchmarks/sustained_timing.py: the share of candidate pairs two timings order alike (a tie agrees with none)."""
    probe = _load("sustained_timing")
    x = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert probe._pair_agreement(x, x) == 1.0
    assert probe._pair_agreement(x, {"a": 1.0, "b": 3.0, "c": 2.0}) == pytest.approx(2 / 3)  # (b, c) swapped
    assert probe._pair_agreement(x, {"a": 3.0, "b": 2.0, "c": 1.0}) == 0.0
    assert probe._pair_agreement(x, {"a": 1.0, "b": 1.0}) == 0.0  # only the common pair (a, b), tied in one
    assert math.isnan(probe._pair_agreement({"a": 1.0}, {"b": 1.0}))  # no common pair


def test_eager_benchmark_saves_the_public_oracles(tmp_path, monkeypatch):
    """benchmarks/inference_eager.py --write-oracles: the public problems' exhaustive winners of a dataset, saved on the
    CPU with the dataset's device, so that a GPU run can take them instead of a dataset too big to carry."""
    from autoheur.collect.schema import problem_id
    from autoheur.collect.workloads import public_problems

    eager = _load("inference_eager")
    data = str(ROOT / "data" / "inductor-nvidia-h100-80gb-hbm3")  # the smallest shipped dataset
    with pytest.raises(SystemExit, match="no usable timing for .* public problems: collect them first"):
        eager.main(["--out", str(tmp_path), "--data", data, "--write-oracles", str(tmp_path / "o.json")])
    with pytest.raises(SystemExit) as exc:
        eager.main(["--out", str(tmp_path), "--write-oracles", str(tmp_path / "o.json")])
    assert exc.value.code == 2  # --data missing

    ids = [problem_id(p) for p in public_problems()]
    recorded = {pid: (f"cfg{i}", 0.1 * (i + 1)) for i, pid in enumerate(ids)} | {"not-public": ("x", 1.0)}
    monkeypatch.setattr(eager, "oracles", lambda path: recorded)
    assert eager.main(["--out", str(tmp_path), "--data", data, "--write-oracles", str(tmp_path / "o.json")]) == 0
    saved = json.loads((tmp_path / "o.json").read_text())
    assert saved["device"] == "NVIDIA H100 80GB HBM3" and saved["data"] == data
    assert list(saved["oracles"]) == ids and saved["oracles"][ids[3]] == ["cfg3", pytest.approx(0.4)]


@pytest.fixture(scope="module")
def list_fill():
    return _load("list_fill")


def test_fixed_list_is_the_greedy_cover(list_fill):
    """Hand-computed. Efficiencies: p: a 1, b 1/1.1, c 1/4; q: a 1/3, b 1/2, c 1. Sums of logs: a -1.10, b -0.79,
    c -1.39, so b first; then a adds max(.) over (b): -0.69 in all, c -0.10: c second."""
    f = frame({"p": [1.0, 1.1, 4.0], "q": [3.0, 2.0, 1.0]}).replace({"c0": "a", "c1": "b", "c2": "c"})
    f["rel_time"] = f["median_ms"] / f.groupby("problem_id")["median_ms"].transform("min")  # as dev_cv's scores hold
    assert list_fill.fixed_list(f, 1) == ["b"]
    assert list_fill.fixed_list(f, 2) == ["b", "c"]


def test_hedge_takes_the_last_slots_and_skips_what_the_ranker_holds(list_fill):
    ids = [f"c{i}" for i in range(12)]
    f = pd.DataFrame({"problem_id": "p", "config_id": ids, "score": np.arange(12, 0, -1.0), "inner_fold": 0})
    lists = {0: ["c3", "c11", "c10"]}  # c3 is already among the ranker's best 8
    top = f["config_id"].to_numpy()[np.argsort(-list_fill.hedged(f, lists, 2), kind="stable")][:10].tolist()
    assert top == [f"c{i}" for i in range(8)] + ["c11", "c10"]
    assert (list_fill.hedged(f, lists, 0) == f["score"].to_numpy()).all()


def test_tile_cap_skips_a_full_tile(list_fill):
    ids = ["m64n64k32s2w4g1-ptr", "m64n64k64s2w4g1-ptr", "m64n64k32s3w4g1-tma", "m128n64k32s2w4g1-ptr"]
    f = pd.DataFrame({"problem_id": "p", "config_id": ids, "score": [4.0, 3.0, 2.0, 1.0]})
    order = f["config_id"].to_numpy()[np.argsort(-list_fill.tile_capped(f, 2, k=3), kind="stable")].tolist()
    assert order == [ids[0], ids[1], ids[3], ids[2]]  # the third 64x64 config waits until the list is full


def test_distinct_tail_skips_twins_only_after_the_kept_head(list_fill):
    ids = [
        "m64n64k32s2w4g1-ptr",  # 0
        "m64n64k32s2w4g8-ptr",  # 1: twin of 0 (group_m), inside the kept head
        "m64n64k32s2w4g8-tma-ws",  # 2: not a twin (load path)
        "m64n64k32s2w4g1-tma",  # 3: twin of 2 (warp specialization and group_m)
        "m64n64k64s2w4g1-ptr",  # 4: not a twin (block_k)
        "m64n64k64s2w4g8-ptr",  # 5: twin of 4
        "m64n64k32s3w4g1-ptr",  # 6: not a twin (stages)
    ]
    f = pd.DataFrame({"problem_id": "p", "config_id": ids, "score": np.arange(7, 0, -1.0)})
    assert list_fill.twin_key(f["config_id"]).tolist()[:4] == ["m64n64k32s2w4-ptr"] * 2 + ["m64n64k32s2w4-tma"] * 2

    def order(keep, k):
        return np.argsort(-list_fill.distinct_tail(f, keep, k=k), kind="stable").tolist()

    assert order(2, 5) == [0, 1, 2, 4, 6, 3, 5]  # twins 3 and 5 give way, then follow in the ranker's order
    assert order(5, 5) == list(range(7))  # nothing after the head: the ranker's order
    assert order(0, 3) == [0, 2, 4, 1, 3, 5, 6]


def test_two_rounds_fill_the_rest_around_the_first_rounds_fastest():
    adaptive = _load("adaptive_list")
    ids = [
        "m64n64k32s2w4g1-ptr",  # 0: round 1, slow
        "m128n64k32s2w4g1-ptr",  # 1: round 1, the fastest of it
        "m64n128k32s2w4g1-ptr",  # 2: the ranker's 3rd, neither tile nor one change from 1
        "m128n64k64s3w4g1-ptr",  # 3: tile of 1, two changes
        "m128n64k32s2w8g1-ptr",  # 4: tile of 1, one change
        "m128n128k32s2w4g1-ptr",  # 5: one change from 1 (block_n), another tile
    ]
    f = pd.DataFrame({
        "problem_id": "p", "config_id": ids, "score": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        "median_ms": [2.0, 1.0, 0.5, 3.0, 3.0, 3.0], "status": "ok",
    })  # fmt: skip
    params = adaptive.config_table(f["config_id"].to_numpy()).to_numpy(dtype=object)

    def top(first, around, k=4):
        score = adaptive.two_rounds(f, params, first, around, k=k)
        return np.argsort(-score, kind="stable").tolist()

    assert top(2, "tile") == [0, 1, 3, 4, 2, 5]  # the ranker's 3rd (the true best) gives way to config 1's tile
    assert top(2, "one") == [0, 1, 4, 5, 2, 3]
    assert top(2, "tile_one") == [0, 1, 3, 4, 2, 5]
    assert top(4, "tile") == [0, 1, 2, 3, 4, 5]  # no second round: the ranker's order
    assert top(2, "tile", k=6) == [0, 1, 3, 4, 2, 5]  # too few neighbours: the ranker's next fill the list
    with pytest.raises(ValueError, match="around"):
        adaptive.two_rounds(f, params, 2, "nowhere", k=4)


def test_by_kind_groups_the_backward_problems_apart():
    by_kind = _load("by_kind")
    assert [by_kind.kind(n) for n in ("qwen3-30b-a3b/gate_up/t16/zipf/grad_a", "mixtral-8x7b/down/t1/uniform/grad_b",
                                       "sampled/2d2d/bfloat16/7/zipf", "deepseek-v3/down/prefill",
                                       "sampled/2d3d/bfloat16/7/zipf/grad_a", "deepseek-v3/down/prefill/grad_w",
                                       "sampled/2d3d/bfloat16/7/zipf/grad_w")] == [
        "grad_a", "grad_b", "sampled/2d2d", "public", "sampled/grad_a", "grad_w", "sampled/grad_w"]  # fmt: skip
    d = pd.DataFrame({
        "model": ["m"] * 4, "problem_id": list("abcd"),
        "problem_name": ["x/p/grad_a", "y/p/grad_a", "sampled/2d3d/bfloat16/1/zipf", "z/down/mid"],
        "eff_best10": [1.0, 0.81, 0.9, 1.0], "eff_top1": [0.5, 0.5, 0.9, 1.0],
        "oracle_in_top10": [True, False, False, True],
    })  # fmt: skip
    t = by_kind.table(d).set_index("kind")
    assert t.loc["grad_a", "problems"] == 2 and t.loc["grad_a", "best10_geomean"] == pytest.approx(0.9)
    assert t.loc["grad_a", "oracle_in_top10"] == 0.5 and t.loc["grad_a", "best10_min"] == 0.81
    assert t.loc["all", "problems"] == 4 and t.loc["all", "oracle_in_top10"] == 0.5
    assert t.loc["all", "top1_geomean"] == pytest.approx((0.5 * 0.5 * 0.9 * 1.0) ** 0.25)
    assert t.loc["all", "top1_failed"] == 0
    # a failed pick (efficiency 0) counts as metrics.GEOMEAN_FLOOR, as in `autoheur eval`'s summary, and is counted
    t = by_kind.table(d.assign(eff_top1=[0.0, 0.5, 0.9, 1.0])).set_index("kind")
    assert t.loc["all", "top1_geomean"] == pytest.approx((0.01 * 0.5 * 0.9 * 1.0) ** 0.25)
    assert t.loc["all", "top1_failed"] == 1 and t.loc["all", "top1_p10"] == pytest.approx(0.15)


def test_by_kind_with_aten_is_what_the_filter_hands_inductor(tmp_path):
    """by_kind --aten: ATen's time (run logs, newest first) beside each list; hand-computed per problem."""
    by_kind = _load("by_kind")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "20261201T000000-vm-0.jsonl").write_text('{"problem_id": "a", "aten_ms": 9.0}\n{"problem_id": "b"}\n')
    logs = [{"problem_id": "a", "aten_ms": 1.5}, {"problem_id": "b", "aten_ms": 0.5}]
    logs.append({"problem_id": "c", "aten_ms": None})
    (runs / "20261202T000000-vm-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    aten = by_kind.aten_times(str(tmp_path))
    assert aten["a"] == 1.5 and aten["b"] == 0.5 and np.isnan(aten["c"])  # the newer log's time of a
    d = pd.DataFrame({
        "model": ["m"] * 3, "problem_id": list("abc"), "problem_name": ["x/p/grad_w"] * 3, "oracle_ms": [1.0] * 3,
        "eff_best10": [0.5, 0.8, 0.5], "eff_top1": [0.0, 0.8, 0.25], "oracle_in_top10": [False, False, False],
    })  # fmt: skip
    out = by_kind.with_aten(d, aten).set_index("problem_id")
    assert out.loc["a", "eff_best10"] == pytest.approx(1.0 / 1.5)  # best template 1.0; the list's 2.0, ATen 1.5
    assert out.loc["a", "eff_top1"] == pytest.approx(1.0 / 1.5)  # a failed pick: ATen is left
    assert out.loc["b", "eff_best10"] == 1.0 and out.loc["b", "oracle_in_top10"]  # ATen beats every template
    assert out.loc["c", "eff_best10"] == 0.5 and not out.loc["c", "oracle_in_top10"]  # ATen failed: no choice
    assert out.loc["c", "eff_top1"] == 0.25
    with pytest.raises(SystemExit, match="no ATen time for 1 problem"):
        by_kind.with_aten(d.assign(problem_id=list("abz")), aten)
    with pytest.raises(SystemExit, match="no run log with an ATen time"):
        by_kind.aten_times(str(tmp_path / "runs"))


def test_score_model_scores_the_model_and_its_fixed_list():
    """benchmarks/score_model.py: the model's own order, and its fallback list in list order (other configs last)."""
    from types import SimpleNamespace

    score_model = _load("score_model")
    names = {"p": "x/gate_up/t1/uniform/grad_a", "q": "deepseek-v3/down/prefill"}
    f = frame({"p": [1.0, 2.0, 1.5], "q": [3.0, 1.0, 2.0]}).replace({"c0": "a", "c1": "b", "c2": "c"})
    f["problem_name"] = f["problem_id"].map(names)
    model = SimpleNamespace(
        fixed_list=["b", "a"], ranker=SimpleNamespace(predict=lambda rs: np.array([3.0, 1.0, 2.0, 1.0, 3.0, 2.0]))
    )
    pp = score_model.score(model, SimpleNamespace(frame=f)).set_index(["model", "problem_id"])
    assert pp.loc[("model", "p"), "eff_top1"] == 1.0 and pp.loc[("model", "q"), "eff_top1"] == 1.0
    assert pp.loc[("its fixed list", "p"), "eff_top1"] == 0.5  # b, 2.0 ms against a's 1.0
    assert pp.loc[("its fixed list", "q"), "eff_top1"] == 1.0
    assert pp.loc[("model", "p"), "problem_name"] == names["p"]
    t = _load("by_kind").table(pp.reset_index()).set_index(["model", "kind"])
    assert t.loc[("its fixed list", "grad_a"), "top1_geomean"] == 0.5


def test_training_step_summary_speedups_and_failures():
    """benchmarks/training_step.py's summary: torch / autoheur time per GEMM and per step (hand-computed), decode
    problems kept out of mid_and_prefill, a failed problem named and kept out of every figure."""
    step = _load("training_step")

    def row(name, ours, theirs, err=0.0):
        r = {"problem": name, "first_step_s": 2.0, "rel_err_a": err, "rel_err_b": 0.0}
        for g in ("fwd", "grad_a", "grad_b", "step"):
            r |= {f"{g}_autoheur_ms": ours, f"{g}_torch_ms": theirs}
        return r

    rows = [row("m/gate_up/decode", 1.0, 4.0), row("m/down/mid", 2.0, 1.0, 0.01), row("m/gate_up/prefill", 2.0, 1.0)]
    s = step.summarize([*rows, {"problem": "m/down/prefill", "error": "RuntimeError('x')"}])
    assert s["failed"] == ["m/down/prefill"]
    assert s["all"]["problems"] == 3 and s["all"]["step_vs_torch_geomean"] == pytest.approx(1.0)  # (4 * .5 * .5)^(1/3)
    assert s["mid_and_prefill"]["grad_b_vs_torch_geomean"] == pytest.approx(0.5)
    assert s["all"]["step_slower_than_torch"] == 2 and s["rel_err_max"] == 0.01
    assert "step_api_vs_torch_geomean" not in s["all"]  # records from before the API step was timed
    rows[1]["step_api_ms"], rows[2]["step_api_ms"] = 0.5, 2.0  # torch 1.0 on both: 2 and 0.5
    assert step.summarize(rows)["mid_and_prefill"]["step_api_vs_torch_geomean"] == pytest.approx(1.0)
    assert step.summarize(rows[1:2])["all"]["step_api_vs_torch_geomean"] == pytest.approx(2.0)


def test_sampled_grad_a_figures_on_a_hand_made_case():
    """Oracles, the refine/polish changes, and the other device's oracle timed here (censored there: efficiency 0)."""
    stats = _load("sampled_grad_a_stats")

    def rows(times, statuses=None):
        out = []
        for pid, ts in times.items():
            for i, t in enumerate(ts):
                out.append({"problem_id": pid, "config_id": f"c{i}", "median_ms": t, "load": "ptr" if i else "tma",
                            "warp_specialize": False, "status": (statuses or {}).get((pid, i), "ok")})  # fmt: skip
        return pd.DataFrame(out)

    first = rows({"p": [1.0, 2.0, 3.0], "q": [2.0, 1.0, 4.0]})
    after = rows({"p": [1.0, 0.9, 3.0], "q": [2.0, 1.0, 4.0]}, {("q", 2): "censored"})
    other = rows({"p": [1.0, 2.0, 0.5], "q": [3.0, 1.0, 2.0]})
    f = stats.figures(first, after, other)
    assert f["problems"] == 2 and f["rows"] == 6 and f["other_status"] == 0
    assert math.isclose(f["censored_pct"], 100 / 6)
    assert f["oracle_ms"] == (0.95, 0.9, 1.0)
    assert f["load_paths"] == {"pointer": 2}
    assert f["changed"] == (1, 2)  # p: c0 -> c1
    assert f["common"] == 2 and f["same_oracle"] == 1  # q: c1 on both; p: c1 here, c2 there
    g, p10, mn = f["their_oracle_here"]
    assert math.isclose(mn, 0.9 / 3.0) and math.isclose(g, math.sqrt(0.3 * 1.0))
    assert math.isclose(f["time_ratio_median"], (0.9 / 0.5 + 1.0) / 2)
    after.loc[(after.problem_id == "p") & (after.config_id == "c2"), "status"] = "censored"
    assert stats.figures(first, after, other)["their_oracle_here"][2] == 0.0


def test_retest_sample_is_seeded_and_parses_back(tmp_path, monkeypatch):
    """The retest's problem list: a seeded draw of a real dataset's problems, written so each line is its problem."""
    mod = _load("retest_sample")
    ids = [f"p{i:02d}" for i in range(30)]
    one = mod.sample_ids(ids, 10, seed=7)
    assert one == mod.sample_ids(list(reversed(ids)), 10, seed=7)  # the set decides, not its order
    assert len(set(one)) == 10 and set(one) <= set(ids)
    assert one != mod.sample_ids(ids, 10, seed=8)
    assert mod.sample_ids(ids, 50, seed=7)[:10] == one  # a longer draw starts with the shorter one

    data = ROOT / "data" / "retest-nvidia-h200"
    out = tmp_path / "sample.jsonl"
    monkeypatch.setattr(
        "sys.argv", ["retest_sample", "--data", str(data), "--count", "5", "--seed", "3", "--out", str(out)]
    )
    assert mod.main() == 0
    back = [problem_id(p) for p in load_shapes(out)]
    assert back == mod.sample_ids(list(DatasetStore.load(data).done_problems()), 5, seed=3)
    assert all(json.loads(line)["sizes"] for line in out.read_text().splitlines())


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_split_by_compile_key_keeps_keys_together_and_splits_only_the_large_ones():
    split = _load_script("split_by_compile_key").split
    keys = ["big"] * 120 + ["mid"] * 70 + ["small"] * 30 + ["tiny"] * 5
    parts = split(keys, 4, compile_s=110.0, problem_s=5.0)
    assert sorted(i for p in parts for i in p) == list(range(len(keys)))  # every line once
    spread = {k: sum(any(keys[i] == k for i in p) for p in parts) for k in set(keys)}
    assert spread["big"] == 2 and spread["mid"] == spread["small"] == spread["tiny"] == 1
    work = [110.0 * len({keys[i] for i in p}) + 5.0 * len(p) for p in parts]
    assert max(work) / min(work) < 1.5
    # GPUs compile side by side: three problems of one key on three idle GPUs end sooner than on one
    assert sorted(map(len, split(["a"] * 3, 4, 110.0, 5.0))) == [0, 1, 1, 1]
    # ... but not where each GPU already has a key to compile: cutting "c" in two would add a compile to the longest
    assert sorted(map(len, split(["a"] * 20 + ["b"] * 20 + ["c"] * 4, 3, 110.0, 5.0))) == [4, 20, 20]


def test_misses_names_the_oracle_fields_absent_from_the_top_10():
    """Hand-built: in problem p the oracle (a TMA config) ranks 12th behind 11 pointer-load configs of its tile; in q
    the oracle is the top pick."""
    misses = _load("misses")
    ptr = [f"m64n64k32s{s}w{w}g1-ptr" for s in (2, 3, 4) for w in (4, 8)]
    ptr += [f"m64n64k64s{s}w4g1-ptr" for s in (2, 3, 4)]
    ptr += ["m64n128k32s2w4g1-ptr", "m128n64k32s2w4g1-ptr"]  # 11 configs
    p = pd.DataFrame({"config_id": [*ptr, "m64n64k32s3w4g1-tma"], "score": np.arange(12, 0, -1.0)})
    p["median_ms"] = [1.2] * 9 + [1.1, 1.3, 1.0]
    q = pd.DataFrame({"config_id": ptr[:3], "score": [3.0, 2.0, 1.0], "median_ms": [1.0, 2.0, 3.0]})
    f = pd.concat([p.assign(problem_id="p"), q.assign(problem_id="q")], ignore_index=True)
    f["problem_name"] = "sampled/2d3d/bfloat16/1/zipf"
    f["status"] = "ok"
    per = misses.misses(f).set_index("problem_id")
    assert per.loc["p", "oracle_rank"] == 11 and not per.loc["p", "hit"] and per.loc["q", "hit"]
    assert math.isclose(per.loc["p", "best10"], 1.0 / 1.1)
    absent = misses.summary(per.reset_index())["all"]["missed_field_absent_from_top10"]
    assert absent["load"] == 1.0 and absent["tile (block_m, block_n)"] == 0.0 and absent["num_stages"] == 0.0


def test_growth_scores_only_old_problems_and_trains_on_new_ones_only_when_asked():
    """benchmarks/growth.py: every fold is held out on old problems that no fit of it saw; the grown variant adds
    exactly the new problems to each fit; a model that ranks by the true times scores 1.0 either way."""
    growth = _load("growth")
    times = {f"o{i}": [1.0 + i % 3, 2.0, 1.5] for i in range(10)} | {"n0": [3.0, 1.0, 2.0], "n1": [1.0, 2.0, 3.0]}
    f = frame(times)

    class Set:
        def __init__(self, fr):
            self.frame = fr.reset_index(drop=True)

        def subset(self, ids):
            return Set(f[f["problem_id"].isin(set(ids))])

    fits = []

    class Oracle:
        def fit(self, train):
            fits.append(set(train.frame["problem_id"]))
            return self

        def predict(self, test):
            return -test.frame["median_ms"].to_numpy()

    old = [f"o{i}" for i in range(10)]
    rows = growth.paired(Set(f), old, ["n0", "n1"], lambda seed: Oracle(), seeds=(0, 1), n_splits=5)
    assert [(r["seed"], r["variant"]) for r in rows] == [(0, "old"), (0, "old+new"), (1, "old"), (1, "old+new")]
    assert all(r["best10"][0] == 1.0 and r["hit"] == 1.0 for r in rows)
    assert len(fits) == 20 and all(len(s & {"n0", "n1"}) == 0 for s in fits[0:5] + fits[10:15])
    assert all({"n0", "n1"} <= s for s in fits[5:10] + fits[15:20])
    assert all(len(s - {"n0", "n1"}) == 8 for s in fits)  # 4 of 5 folds of the 10 old problems: 2 held out each


def test_device_collect_gpus_gives_each_gpu_its_own_problems(tmp_path):
    """scripts/device_collect_gpus.sh on a stand-in `nvidia-smi` of two GPUs, in the interpreter: each GPU's
    collection sees only its own device and returns a dataset of exactly its own shapes."""
    import os
    import subprocess
    import tarfile

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/bin/bash\n"
        'case "$*" in *index*) echo 0; echo 1;; '
        '*) echo "stand-in GPU, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}";; esac\n'
    )
    smi.chmod(0o755)
    shapes = []
    for i, n in enumerate((32, 64)):
        rec = {"layout": "2d3d", "groups": 2, "sizes": [3, 5], "m": 0, "n": n, "k": 32, "dtype": "float32"}
        (tmp_path / f"s{i}.jsonl").write_text(json.dumps({**rec, "name": f"p{i}"}) + "\n")
        shapes.append(problem_id(load_shapes(tmp_path / f"s{i}.jsonl")[0]))
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "TRITON_INTERPRET": "1", "OUT": str(tmp_path / "out")}
    script = str(ROOT / "scripts" / "device_collect_gpus.sh")
    args = [f"--shapes s{i}.jsonl --sample-configs 2 --reps 1" for i in range(2)]

    def call(*argv):
        return subprocess.run(["bash", script, *argv], cwd=tmp_path, env=env, capture_output=True, text=True)

    run = call("240", *args)
    assert run.returncode == 0, run.stderr
    for i in range(2):
        log = (tmp_path / "out" / f"gpu{i}" / "device_collect.log").read_text()
        assert f"CUDA_VISIBLE_DEVICES={i}" in log
        with tarfile.open(tmp_path / "out" / f"gpu{i}" / "dataset.tgz") as tar:
            tar.extractall(tmp_path / f"back{i}", filter="data")
        assert DatasetStore.load(tmp_path / f"back{i}" / f"gpu{i}").done_problems() == {shapes[i]}
    many = call("240", *args, args[0])
    assert many.returncode == 2 and "3 argument sets but 2 GPUs" in many.stderr


@pytest.mark.parametrize("size", [1000, 2500])
def test_return_pieces_splits_only_a_file_over_the_limit(tmp_path, size):
    """scripts/return_pieces.sh: a file over the limit becomes pieces of at most the limit that concatenate back to
    it byte for byte; one at or under the limit stays whole."""
    import subprocess

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    f = tmp_path / "dataset.tgz"
    f.write_bytes(data)
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "return_pieces.sh"), str(f), "1000"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    pieces = sorted(tmp_path.glob("dataset.tgz.part*"))
    if size <= 1000:
        assert f.read_bytes() == data and not pieces
    else:
        assert not f.exists() and [p.name for p in pieces] == [
            "dataset.tgz.part00",
            "dataset.tgz.part01",
            "dataset.tgz.part02",
        ]
        assert all(p.stat().st_size <= 1000 for p in pieces)
        assert b"".join(p.read_bytes() for p in pieces) == data
        assert "cat dataset.tgz.part* > dataset.tgz" in run.stdout


class _DevSet:
    """The part of a RankingSet that dev_cv._run reads, over the rows of `frame`."""

    def __init__(self, frame):
        self.frame = frame.reset_index(drop=True)
        self.problems = np.array(list(dict.fromkeys(self.frame["problem_id"])))

    def subset(self, ids):
        return _DevSet(self.frame[self.frame["problem_id"].isin(set(ids))])


class _DevPool:
    """The part of a TrainingPool that dev_cv._run reads, over the dev set alone; `calls` records each fold's
    `rows` call (leave_out, problems): the auxiliary rows it would leave out, and the own problems it trains on."""

    def __init__(self, dev: _DevSet, calls: list):
        self.set, self.calls = dev, calls

    def rows(self, problems=None, leave_out=()):
        self.calls.append((set(leave_out), set(problems)))
        return self.set.frame["problem_id"].isin(set(problems)).to_numpy()


@pytest.mark.parametrize("new_only", [False, True])
def test_dev_cv_aux_new_only_leaves_out_the_problems_a_fold_trains_on(new_only, monkeypatch):
    """benchmarks/dev_cv.py: with --aux-new-only an inner fold's auxiliary rows never repeat a problem it trains on;
    without it they do. Neither ever includes the fold's test problems or the outer fold's."""
    dev_cv = _load("dev_cv")
    f = frame({f"p{i}": [1.0 + i % 3, 2.0, 1.5] for i in range(10)})
    f["problem_name"] = "sampled/2d3d/bfloat16/1/zipf"
    calls = []

    class Oracle:
        fits_rows = True  # fit on the pool's row mask, in place

        def fit(self, train, rows=None):
            return self

        def predict(self, test):
            return -test.frame["median_ms"].to_numpy()

    monkeypatch.setitem(dev_cv.VARIANTS, "oracle", lambda seed: Oracle())
    own = _DevSet(f)
    dev = (own, 5, _DevPool(own, calls), ["outer0", "outer1"], 0.5, new_only)
    monkeypatch.setattr(dev_cv, "_DEV", dev)
    out = dev_cv._run("oracle", 0, None)[0]
    assert out["aux_new_only"] is new_only and out["hit"] == 1.0
    assert len(calls) == 5
    everyone = {f"p{i}" for i in range(10)}
    for leave_out, trains_on in calls:
        assert len(trains_on) == 4  # half of the 8 training problems of the fold (--train-share 0.5)
        assert {"outer0", "outer1"} <= leave_out
        assert len((everyone & leave_out) - trains_on) == 2  # the fold's test problems
        assert len(everyone - trains_on - leave_out) == 4  # the dropped half: its auxiliary rows stay in
        assert (trains_on <= leave_out) is new_only and (trains_on & leave_out) in (set(), trains_on)


def test_dev_cv_scoring_variants_score_the_same_fits(monkeypatch):
    """benchmarks/dev_cv.py: a SCORING variant is scored on its fit variant's fitted models, one fit per inner fold
    for both, with its settings on the model and on each expert while it scores, and the fit variant's own row scored
    with the settings it had."""
    dev_cv = _load("dev_cv")
    f = frame({f"p{i}": [1.0 + i % 3, 2.0, 1.5] for i in range(10)})
    f["problem_name"] = "sampled/2d3d/bfloat16/1/zipf"
    fits = []

    class Expert:
        flip = False

    class Oracle:
        flip = False  # a prediction setting: the slowest config first
        fits_rows = True

        def fit(self, train, rows=None):
            fits.append(1)
            self.experts_ = {0: Expert()}
            return self

        def predict(self, test):
            assert self.experts_[0].flip is self.flip
            t = test.frame["median_ms"].to_numpy()
            return t if self.flip else -t

    monkeypatch.setitem(dev_cv.VARIANTS, "oracle", lambda seed: Oracle())
    monkeypatch.setitem(dev_cv.SCORING, "oracle_flip", ("oracle", {"flip": True}))
    own = _DevSet(f)
    monkeypatch.setattr(dev_cv, "_DEV", (own, 5, _DevPool(own, []), [], 1.0, False))
    base, flipped = dev_cv._run("oracle", 0, None, scoring=["oracle_flip"])
    assert len(fits) == 5
    assert (base["variant"], flipped["variant"]) == ("oracle", "oracle_flip")
    assert base["hit"] == 1.0 and base["top1"][0] == 1.0
    assert flipped["top1"][0] < 1.0


def _pp(effs: dict[str, tuple[float, float]], model: str = "xgb_ranker") -> pd.DataFrame:
    """Per-problem rows (problem -> (best-of-10, top-1)) as `autoheur train --heldout-problems` writes them."""
    return pd.DataFrame([
        {"model": model, "problem_id": p, "problem_name": f"n/{p}", "eff_best10": b, "eff_top1": t, "eff_best5": b,
         "oracle_in_top10": b == 1.0, "ndcg10": 1.0, "kendall_tau": 0.0, "oracle_ms": 0.1}
        for p, (b, t) in effs.items()
    ])  # fmt: skip


def test_paired_counts_gains_losses_and_the_largest_loss_on_shared_problems(tmp_path):
    paired = _load("paired")
    a = _pp({"p": (1.0, 0.9), "q": (0.94, 0.94), "r": (0.96, 0.8), "s": (1.0, 1.0)})
    b = _pp({"p": (0.98, 0.9), "q": (1.0, 0.94), "r": (0.99, 0.7), "t": (0.5, 0.5)})  # s only in a, t only in b
    (tmp_path / "a.csv").write_text(a.to_csv(index=False))
    (tmp_path / "b.csv").write_text(b.to_csv(index=False))
    assert paired.main([str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["problems"] == 3 and out["only_a"] == 1 and out["only_b"] == 1
    assert out["b_better"] == 2 and out["b_worse"] == 1 and out["top1_changed"] == 1
    assert out["largest_loss"] == {"problem": "n/p", "best10": [1.0, 0.98]}
    assert out["a"]["under_0.95"] == 1 and out["a"]["under_0.97"] == 2 and out["b"]["under_0.97"] == 0
    assert out["a"]["best10"][2] == 0.94 and out["b"]["best10"][2] == 0.98 and out["a"]["hit"] == round(1 / 3, 4)
    with pytest.raises(SystemExit, match="no rows of model"):
        paired.main([str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--model", "nearest"])


def test_train_time_joins_the_auxiliary_sets_as_train_does(monkeypatch):
    """benchmarks/train_time.py --aux [--aux-new-only]: the fit's set is the dataset joined with its auxiliary sets
    (only the problems it lacks with --aux-new-only), the own set the dataset alone; without --aux both are the
    dataset; --aux-new-only without --aux is refused before anything loads."""
    train_time = _load("train_time")

    class Set:
        def __init__(self, problems):
            self.problems = np.array(problems)

        def subset(self, ids):
            return Set(list(ids))

        def with_auxiliary(self, aux):
            return Set([*self.problems, *(f"aux:{p}" for a in aux for p in a.problems)])

    loads = []
    monkeypatch.setattr(train_time, "load_ranking_set", lambda path: loads.append(path) or Set(["a", "b"]))
    monkeypatch.setattr(train_time, "load_auxiliary", lambda paths, primary: [Set(["b", "c"])])
    train, own = train_time.load_train_set("d", ["x"], aux_new_only=True)
    assert list(train.problems) == ["a", "b", "aux:c"] and list(own.problems) == ["a", "b"]
    train, _ = train_time.load_train_set("d", ["x"])
    assert list(train.problems) == ["a", "b", "aux:b", "aux:c"]
    train, own = train_time.load_train_set("d", [])
    assert train is own
    # --aux-problems FILE: the listed auxiliary problems only (train's listed_problems_only), then the new ones
    monkeypatch.setattr(train_time, "read_problem_ids", lambda path: {"c"})
    monkeypatch.setattr(train_time, "listed_problems_only", lambda sets, ids, name: [s.subset(ids) for s in sets])
    train, _ = train_time.load_train_set("d", ["x"], aux_problems="pinned.txt")
    assert list(train.problems) == ["a", "b", "aux:c"]
    loads.clear()
    for kw in ({"aux_new_only": True}, {"aux_problems": "pinned.txt"}):
        with pytest.raises(SystemExit, match="--aux"):
            train_time.load_train_set("d", [], **kw)
    assert not loads


def test_train_time_rounds_parse_trees_and_step():
    """benchmarks/train_time.py --rounds: each TREESxSTEP item gives its label, tree count and step; an item without
    the x is refused with the expected form."""
    train_time = _load("train_time")
    assert train_time._rounds("450x0.1,350x0.13") == [("450x0.1", 450, 0.1), ("350x0.13", 350, 0.13)]
    assert train_time._rounds(None) == []
    with pytest.raises(SystemExit, match="TREESxSTEP"):
        train_time._rounds("450")


def test_same_model_tells_refits_apart_by_their_boosters(tmp_path, monkeypatch, capsys):
    """benchmarks/same_model.py: the same fit twice gives the same digests (exit 0); a fit of another seed differs in
    the booster it changed and nowhere else, and the script exits 1."""
    from types import SimpleNamespace

    import joblib
    import xgboost as xgb

    same_model = _load("same_model")
    rng = np.random.default_rng(0)
    X, y, qid = rng.normal(size=(64, 4)), rng.integers(0, 3, 64), np.repeat(np.arange(8), 8)

    def ranker(seed):
        return xgb.XGBRanker(n_estimators=4, max_depth=3, subsample=0.5, random_state=seed, n_jobs=1).fit(X, y, qid=qid)

    def blob(seed):
        expert = SimpleNamespace(members_=[ranker(seed)], reranker_=ranker(0))
        return {"ranker": SimpleNamespace(experts_={0: expert}), "meta": {"train_data_hash": "h"}}

    a, b = same_model.booster_digests(blob(1)["ranker"]), same_model.booster_digests(blob(1)["ranker"])
    c = same_model.booster_digests(blob(2)["ranker"])
    assert a == b and set(a) == {"expert 0 member 0", "expert 0 reranker"}
    assert c["expert 0 member 0"] != a["expert 0 member 0"] and c["expert 0 reranker"] == a["expert 0 reranker"]
    paths = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        paths.append(tmp_path / f"{name}.joblib")
        joblib.dump(blob(seed), paths[-1])
    for other, code in ((paths[1], 0), (paths[2], 1)):
        monkeypatch.setattr("sys.argv", ["same_model.py", str(paths[0]), str(other)])
        with pytest.raises(SystemExit) as done:
            same_model.main()
        assert done.value.code == code
    assert "boosters: DIFFERENT" in capsys.readouterr().out


def test_candidate_sets_are_the_timed_configs_on_the_shipped_retest_set():
    """benchmarks/candidate_sets.py on the H100 retest set (234 problems): inference offers exactly the configs the
    collection timed. Two of its problems have a one-row A, offered no TMA config before stop 78 (1,234 timed configs
    missing each)."""
    from autoheur.models.artifact import MODELS_DIR, TrainedModel

    mod = _load("candidate_sets")
    model = TrainedModel.load(MODELS_DIR / "nvidia-h100-80gb-hbm3.joblib")
    assert mod.mismatches(ROOT / "data" / "retest-nvidia-h100-80gb-hbm3", model) == []


def test_fresh_problems_leave_out_the_seen_ids_and_mix_the_kinds(tmp_path, monkeypatch):
    """The fresh list (benchmarks/fresh_problems.py): new draws, none of the seen ids, no id twice, the streams in
    turn, each line its problem; seed 0 (the datasets' own lists) and a missing seen file refused."""
    mod = _load("fresh_problems")
    by_kind = _load("by_kind")
    first = mod.fresh(5, 16, set())
    ids = [problem_id(p) for p in first]
    assert len(set(ids)) == 16 and ids == [problem_id(p) for p in mod.fresh(5, 16, set())]  # seeded
    assert set(ids).isdisjoint(problem_id(p) for p in mod.fresh(6, 16, set()))  # another seed, other problems
    kinds = [by_kind.kind(p.name) for p in first[:4]]
    assert kinds[0] == "public" and kinds[1] == "grad_a" and kinds[2] == "sampled/2d3d" and kinds[3] == "sampled/grad_a"
    seen = set(ids[::3])
    again = mod.fresh(5, 16, seen)
    assert len(again) == 16 and seen.isdisjoint(problem_id(p) for p in again)
    assert [problem_id(p) for p in again][:2] == ids[1:3]  # the others keep their order

    seen_file, out = tmp_path / "seen.txt", tmp_path / "fresh.jsonl"
    seen_file.write_text("# seen\n" + "".join(f"{i}\n" for i in ids[:4]))
    monkeypatch.setattr("sys.argv", ["f", "--seed", "5", "--count", "8", "--seen", str(seen_file), "--out", str(out)])
    assert mod.main() == 0
    assert [problem_id(p) for p in load_shapes(out)] == [problem_id(p) for p in mod.fresh(5, 8, set(ids[:4]))]
    for argv in (["--seed", "0"], ["--seed", "-1"], ["--seed", "5", "--seen", str(tmp_path / "none.txt")]):
        monkeypatch.setattr("sys.argv", ["f", *argv, "--count", "2", "--out", str(out)])
        with pytest.raises(SystemExit):
            mod.main()


def test_fresh_problems_only_the_zipf_weight_gradients():
    """`--only 2d2d-zipf`: sampled 2D x 2D bf16 problems with Zipf routing and nothing else, still seeded, none seen,
    no id twice; an unknown choice refused."""
    mod = _load("fresh_problems")
    first = mod.fresh(5, 12, set(), "2d2d-zipf")
    ids = [problem_id(p) for p in first]
    assert len(set(ids)) == 12 and ids == [problem_id(p) for p in mod.fresh(5, 12, set(), "2d2d-zipf")]
    assert all(p.layout == "2d2d" and p.dtype == "bfloat16" and p.name.endswith("/zipf") for p in first)
    mixed = [p.name for p in mod.fresh(5, 12, set())]
    assert not all(n.endswith("/zipf") for n in mixed)  # the default still mixes
    again = mod.fresh(5, 12, set(ids[:5]), "2d2d-zipf")
    assert [problem_id(p) for p in again][:7] == ids[5:]
    with pytest.raises(ValueError, match="only="):
        mod.fresh(5, 2, set(), "zipf")


def test_the_shipped_fresh_set_is_held_out():
    """data/fresh-nvidia-h200: the problems of the shipped fresh list, none of them in a training set (what the
    fresh reading in BENCHMARKS.md, stop 79, rests on), and listed in models/design-seen.txt since the run-time
    borrowing was chosen on their figures (so the next fresh reading needs new problems)."""
    from autoheur.models.design_seen import read_seen

    fresh = set(DatasetStore.load(ROOT / "data" / "fresh-nvidia-h200").done_problems())
    listed = {problem_id(p) for p in load_shapes(ROOT / "benchmarks" / "fresh_s79_problems.jsonl")}
    assert len(fresh) == 208 and fresh <= listed
    for name in ("nvidia-h200", "nvidia-h100-80gb-hbm3", "inductor-nvidia-h200", "inductor-nvidia-h100-80gb-hbm3"):
        assert fresh.isdisjoint(DatasetStore.load(ROOT / "data" / name).done_problems()), name
    assert fresh <= read_seen()


def test_the_shipped_fresh_zipf_set_is_held_out_and_unseen():
    """data/fresh-zipf2d2d-nvidia-h200 (stop 80): problems of the seed-80 `--only 2d2d-zipf` list, none in a training
    set nor in the first fresh set, and none in models/design-seen.txt: no choice has used their figures yet. A choice
    that does must list them there (and this test then says so, with the stop)."""
    from autoheur.models.design_seen import read_seen

    fresh = set(DatasetStore.load(ROOT / "data" / "fresh-zipf2d2d-nvidia-h200").done_problems())
    listed = {problem_id(p) for p in load_shapes(ROOT / "benchmarks" / "fresh_s80_problems.jsonl")}
    assert len(fresh) == 344 and fresh <= listed
    for name in ("nvidia-h200", "nvidia-h100-80gb-hbm3", "fresh-nvidia-h200"):
        assert fresh.isdisjoint(DatasetStore.load(ROOT / "data" / name).done_problems()), name
    assert fresh.isdisjoint(read_seen())


def test_dev_cv_summary_gives_each_kinds_hit_and_best_of_10(monkeypatch):
    """dev_cv._summary: per kind of problem (by_kind.kind) the oracle-in-top-10 rate and the best-of-10 geomean.
    Hand-computed: 11 configs each; the forward's oracle is ranked first, the weight gradient's 11th (outside the
    top 10, whose best is 1.25x the oracle's time: efficiency 0.8)."""
    dev_cv = _load("dev_cv")
    monkeypatch.setattr(dev_cv, "_DEV", (None, 5, None, None, 1.0, False))
    times = {"fwd": [1.0] + [2.0] * 10, "wg": [1.25] * 10 + [1.0]}
    names = {"fwd": "x/gate_up/t8", "wg": "x/gate_up/t8/grad_w"}
    rows = [{"problem_id": p, "problem_name": names[p], "config_id": f"c{i}", "median_ms": t, "status": "ok",
             "score": -float(i), "inner_fold": 0} for p, ts in times.items() for i, t in enumerate(ts)]  # fmt: skip
    f = pd.DataFrame(rows)
    f["rel_time"] = f["median_ms"] / f.groupby("problem_id")["median_ms"].transform("min")
    out = dev_cv._summary("v", 0, f, None, 1.0)
    assert out["hit_by_kind"] == {"public": 1.0, "grad_w": 0.0}
    assert out["best10_by_kind"] == {"public": 1.0, "grad_w": 0.8}
    assert out["hit"] == 0.5 and out["missed"] == 1


def test_by_kind_reads_dev_cv_scores_and_averages_the_seeds(tmp_path):
    """by_kind.py --dev-scores: each `<variant>_seed<seed>.parquet` scored as an evaluation's per-problem rows, the
    table the mean over seeds. Hand-computed: seed 0 ranks the weight gradient's oracle 11th (best of 10: 0.8), seed
    1 first (1.0): mean 0.9; the forward's oracle is first on both."""
    by_kind = _load("by_kind")
    for seed, wg_scores in ((0, -np.arange(11.0)), (1, np.arange(11.0))):
        rows = []
        for p, name, times, scores in (("fwd", "x/gate_up/t8", [1.0] + [2.0] * 10, -np.arange(11.0)),
                                       ("wg", "x/gate_up/t8/grad_w", [1.25] * 10 + [1.0], wg_scores)):  # fmt: skip
            rows += [{"problem_id": p, "problem_name": name, "config_id": f"c{i}", "median_ms": t, "status": "ok",
                      "rel_time": t / min(times), "score": s, "inner_fold": 0}
                     for i, (t, s) in enumerate(zip(times, scores, strict=True))]  # fmt: skip
        pd.DataFrame(rows).to_parquet(tmp_path / f"v_seed{seed}.parquet", index=False)
    d = by_kind.dev_scores(str(tmp_path))
    assert sorted(set(d["seed"])) == [0, 1] and set(d["model"]) == {"v"}
    by_seed = d.set_index(["seed", "problem_id"])["eff_best10"]
    assert by_seed[(0, "wg")] == pytest.approx(0.8) and by_seed[(1, "wg")] == 1.0 and by_seed[(0, "fwd")] == 1.0
    assert by_kind.main([str(tmp_path), "--dev-scores", "--json", str(tmp_path / "t.json")]) == 0
    t = {r["kind"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert t["grad_w"]["best10_geomean"] == pytest.approx(0.9) and t["grad_w"]["oracle_in_top10"] == 0.5
    assert t["public"]["best10_geomean"] == 1.0
