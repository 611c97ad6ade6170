"""The passes over a collected dataset (collect/passes.py: `autoheur data retime | refine | polish`): what each
selects, end to end on the interpreter, resumable, refused on another device, on two workers, and their CLI."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from autoheur.collect import passes, runner
from autoheur.collect.runner import CollectOptions, collect
from autoheur.collect.schema import problem_id
from autoheur.collect.store import DatasetStore
from autoheur.collect.timing import Timing
from autoheur.device import INTERPRETER_NAME
from tests.conftest import HAS_GPU

from .test_runner import IDS, OPTS, TINY, other_gpu, quiet

# The collection of the tests that count the passes' picks: nothing censored. In the interpreter a config's time is
# noise, and on a loaded host one over twice the best round-1 time was censored, which left a problem one ok config
# short of a pass's top 2 (the polish test failed so once at stop 83, beside other runs on the 2 cores).
UNCENSORED = dataclasses.replace(OPTS, abort_factor=float("inf"))


def test_configs_to_retime_picks_ok_rows_whose_runs_disagreed():
    from autoheur.collect.schema import rows_for
    from autoheur.kernels.config import KernelConfig

    cfgs = [KernelConfig.from_id(i) for i in IDS]
    results = [
        (cfgs[0], "ok", Timing(1.0, 0.30, 3, False)),  # disagreed: retimed
        (cfgs[1], "ok", Timing(1.0, 0.25, 3, False)),  # at the threshold: kept
        (cfgs[2], "ok", Timing(3.5, 0.0, 1, True)),  # censored: one run, nothing to disagree
        (cfgs[3], "compile_error", None),
    ]
    part = rows_for(TINY[0], results)
    assert passes.configs_to_retime(part) == (IDS[0],)
    assert passes.configs_to_retime(part, spread_above=0.2) == tuple(sorted(IDS[:2]))


def test_retime_end_to_end_resumes_and_keeps_the_first_measurement(tmp_path):
    root = tmp_path / "ds"
    collect(TINY, root, OPTS, log=quiet)
    store = DatasetStore.load(root)
    first = store.read()
    ok = first[first["status"] == "ok"]
    # spread_above=-1 retimes every ok config (on the interpreter, which configs disagree is chance)
    summary = passes.retime(root, CollectOptions(reps=3, workers=1), spread_above=-1.0, log=quiet)
    assert summary["done"] == 2 and summary["configs"] == len(ok)
    assert set(store.retimes()) == {problem_id(p) for p in TINY}
    assert store.read(retimed=False).equals(first)  # the first measurement is still there, untouched
    now = store.read()
    assert len(now) == len(first)
    key = ["problem_id", "config_id"]
    joined = first.merge(now, on=key, suffixes=("", "_new"))
    was_ok = joined["status"] == "ok"
    assert (joined.loc[was_ok, "collected_at_new"] > joined.loc[was_ok, "collected_at"]).all()
    assert joined.loc[was_ok, "reps_new"].isin([3, 6]).all()  # no abort: every retimed config runs all its reps
    assert joined.loc[~was_ok].pipe(lambda d: (d["collected_at_new"] == d["collected_at"]).all())
    for pid in store.retimes():
        assert DatasetStore.load(root).read_retime(pid).schema.metadata  # the retime run's own metadata
    again = passes.retime(root, CollectOptions(reps=3, workers=1), spread_above=-1.0, log=quiet)
    assert again["todo"] == 0 and again["already_done"] == 2


def test_a_pass_on_a_host_without_gpu_or_interpreter_says_so(tmp_path, monkeypatch):
    """It said "this host's device is Triton interpreter (H100 rules)" with the interpreter not even set."""
    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    monkeypatch.setattr(passes.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(passes, "interpreting", lambda: False)
    meta = DatasetStore.load(root).meta
    if meta.device_name == INTERPRETER_NAME:  # the CPU suite's dataset: the interpreter collected it
        match = r"^.*ds was collected in the Triton interpreter: set TRITON_INTERPRET=1 to run data retime there too$"
    else:
        match = rf"^no CUDA GPU here: run data retime on the GPU that collected .*ds \({re.escape(meta.device_name)}\)$"
    with pytest.raises(ValueError, match=match):
        passes.retime(root, CollectOptions(reps=2, workers=1), log=quiet)


def test_a_pass_is_refused_while_another_writer_holds_the_directory(tmp_path):
    """A pass beside a collection (or another pass) into one directory would measure the same problems and pack the
    same parts: the directory's writer lock refuses it before any work, and lets the pass run once released."""
    from autoheur.collect.store import one_writer

    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    with one_writer(root):  # another writer (the lock is per open file: this process counts as another)
        for run in (passes.retime, passes.refine, passes.polish):
            with pytest.raises(ValueError, match=r"another `autoheur collect` or `autoheur data "
                               "retime/refine/polish/pack/merge` is writing into"):  # fmt: skip
                run(root, CollectOptions(reps=2, workers=1), log=quiet)
    assert not DatasetStore.load(root).retimes()
    assert passes.retime(root, CollectOptions(reps=2, workers=1), log=quiet)["todo"] == 1
    with pytest.raises(ValueError, match="has no dataset.json: not an autoheur dataset"):
        passes.retime(tmp_path / "nowhere", CollectOptions(reps=2, workers=1), log=quiet)
    assert not (tmp_path / "nowhere").exists()  # a missing directory is not made by the lock


def test_retime_refuses_another_device(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    real = runner.dataset_metadata
    monkeypatch.setattr(runner, "dataset_metadata", other_gpu(real))
    with pytest.raises(ValueError, match="was collected on .*, and this host's device is Some Other GPU: run "
                       "data retime on the GPU that collected it"):  # fmt: skip
        passes.retime(root, CollectOptions(reps=2, workers=1), log=quiet)
    with pytest.raises(ValueError, match="was collected on .*: run data refine on the GPU"):
        passes.refine(root, CollectOptions(reps=2, workers=1), log=quiet)
    name = DatasetStore.load(root).meta.device_name  # the same GPU, another torch: the conditions named
    monkeypatch.setattr(runner, "dataset_metadata", other_gpu(real, name=name, torch="0.0"))
    with pytest.raises(ValueError, match="this host measures under other conditions .*device.torch.*run data polish"):
        passes.polish(root, CollectOptions(reps=2, workers=1), log=quiet)
    assert not DatasetStore.load(root).retimes()


def test_configs_to_refine_picks_the_near_best_ok_rows():
    from autoheur.collect.schema import rows_for
    from autoheur.kernels.config import KernelConfig

    ids = [*IDS, "m32n32k32s2w2g1-ptr", "m16n32k32s2w2g1-ptr"]
    cfgs = [KernelConfig.from_id(i) for i in ids]
    results = [
        (cfgs[0], "ok", Timing(1.10, 0.01, 5, False)),
        (cfgs[1], "ok", Timing(1.00, 0.01, 5, False)),  # the best
        (cfgs[2], "ok", Timing(1.20, 0.01, 5, False)),  # beyond 1.15x
        (cfgs[3], "censored", Timing(0.50, 0.0, 1, True)),  # a lower bound, not a figure: neither best nor picked
        (cfgs[4], "compile_error", None),
        (cfgs[5], "ok", Timing(1.15, 0.01, 5, False)),  # at the limit: picked
    ]
    rows = rows_for(TINY[0], results)
    assert passes.configs_to_refine(rows, within=1.15, top=48) == tuple(sorted([ids[0], ids[1], ids[5]]))
    assert passes.configs_to_refine(rows, within=1.15, top=2) == tuple(sorted([ids[0], ids[1]]))  # the fastest two
    assert passes.configs_to_refine(rows, within=1.0, top=48) == (ids[1],)
    assert passes.configs_to_refine(rows_for(TINY[0], [(cfgs[4], "wrong", None)])) == ()
    for bad in ({"within": 0.9}, {"top": 0}):
        with pytest.raises(ValueError, match="within"):
            passes.configs_to_refine(rows, **bad)


def test_configs_to_refine_breaks_ties_at_the_cut_by_config_id():
    """Equal times at the `top` cut: the smaller config ids, whatever the rows' order (a resumed or merged dataset
    holds its rows in any order, and the refine must pick the same configs on every run)."""
    from autoheur.collect.schema import rows_for
    from autoheur.kernels.config import KernelConfig

    ids = sorted([*IDS, "m32n32k32s2w2g1-ptr"])
    for order in (ids, ids[::-1]):
        results = [(KernelConfig.from_id(i), "ok", Timing(2.0, 0.01, 5, False)) for i in order]
        rows = rows_for(TINY[0], results)
        assert passes.configs_to_refine(rows, within=1.0, top=2) == tuple(ids[:2])
        assert passes.configs_to_refine(rows, within=1.0, top=len(ids)) == tuple(ids)


def test_refine_end_to_end_after_a_retime(tmp_path):
    """Refine reads the rows as retimed, times its picks in `reps` rounds each and overlays them; resumable."""
    root = tmp_path / "ds"
    collect(TINY, root, UNCENSORED, log=quiet)
    passes.retime(root, CollectOptions(reps=3, workers=1), spread_above=-1.0, log=quiet)
    store = DatasetStore.load(root)
    retimed = store.read()
    summary = passes.refine(root, CollectOptions(reps=4, workers=1), within=1e9, top=2, log=quiet)
    assert summary["kind"] == "refine" and summary["done"] == 2
    rows = {pid: store.read_problem(pid, retimed=["retime"]) for pid in store.parts()}
    picks = {pid: set(passes.configs_to_refine(r, 1e9, 2)) for pid, r in rows.items()}
    # the two fastest ok configs a problem; in the interpreter a config may be censored (its first run over 2x the
    # best: a busy CPU host), so a problem may have one ok config only (once 3 in all, on CI-like load, not 4)
    n_ok = {pid: r.column("status").to_pylist().count("ok") for pid, r in rows.items()}
    assert all(len(picks[pid]) == min(2, n_ok[pid]) >= 1 for pid in rows)
    assert summary["configs"] == sum(map(len, picks.values())) >= len(rows)
    assert store.read(retimed=["retime"]).equals(retimed)  # the earlier passes stay on disk, untouched
    now = store.read()
    assert len(now) == len(retimed)
    joined = retimed.merge(now, on=["problem_id", "config_id"], suffixes=("", "_new"))
    picked = joined.apply(lambda r: r.config_id in picks[r.problem_id], axis=1)
    assert (joined.loc[picked, "reps_new"] == 4).all()  # every round, no abort, no round 3
    assert (joined.loc[picked, "status_new"] == "ok").all()
    assert (joined.loc[~picked, "collected_at_new"] == joined.loc[~picked, "collected_at"]).all()
    log = next((root / "runs").glob("*-refine.jsonl")).read_text().splitlines()
    assert len(log) == 2 and all(json.loads(line)["kind"] == "refine" for line in log)
    assert {json.loads(line)["within"] for line in log} == {1e9}  # the selection is on record
    again = passes.refine(root, CollectOptions(reps=4, workers=1), log=quiet)
    assert again["todo"] == 0 and again["already_done"] == 2
    with pytest.raises(ValueError, match="within"):
        passes.refine(root, CollectOptions(reps=4, workers=1), within=0.5, log=quiet)


@pytest.mark.skipif(HAS_GPU and torch.cuda.device_count() < 2, reason="needs two GPUs, or none (the interpreter)")
def test_refine_and_polish_on_two_workers_share_the_problems(tmp_path):
    """--gpus 2 for the passes: two spawned workers on disjoint problems, a run log each, every problem done once,
    the files packed at the end; the picks are the one-worker pass's."""
    root = tmp_path / "ds"
    collect(TINY, root, UNCENSORED, log=quiet)
    store = DatasetStore.load(root)
    picks = {pid: set(passes.configs_to_refine(store.read_problem(pid), 1e9, 2)) for pid in store.parts()}
    summary = passes.refine(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, gpus=2, log=quiet)
    assert summary["done"] == 2 and summary["configs"] == 4 and not summary.get("errors")
    logs = sorted((root / "runs").glob("*-refine.jsonl"))
    # one log a worker; the names start with each worker's start time, which can fall in different seconds
    assert sorted(p.name.rsplit("-", 2)[1] for p in logs) == ["0", "1"]
    assert sorted(json.loads(x)["problem_id"] for p in logs for x in p.read_text().splitlines()) == sorted(picks)
    for pid, ids in picks.items():
        assert set(store.read_retime(pid, "refine").column("config_id").to_pylist()) == ids
    assert len(list(root.glob("refine-*.parquet"))) == 1 and next(root.glob("refine-pack-*.parquet"))
    summary = passes.polish(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, gpus=2, log=quiet)
    assert summary["done"] == 2 and len(store.retimes("polish")) == 2
    with pytest.raises(ValueError, match="gpus"):
        passes.refine(root, CollectOptions(reps=3, workers=1), gpus=0, log=quiet)


def test_pass_gpus_option_is_checked_before_any_work(tmp_path, capsys):
    from autoheur.cli import main

    collect(TINY, tmp_path / "ds", OPTS, log=quiet)
    assert main(["data", "refine", str(tmp_path / "ds"), "--gpus", "two"]) == 2
    assert "--gpus 'two': a number or 'all'" in capsys.readouterr().err
    assert not DatasetStore.load(tmp_path / "ds").retimes("refine")  # nothing was measured


@pytest.mark.parametrize(
    ("kind", "option", "message"),
    [("refine", "--within", "within=nan"), ("polish", "--within", "within=nan"),
     ("retime", "--spread-above", "spread_above=nan")],
)  # fmt: skip
def test_a_pass_refuses_a_nan_threshold_before_any_work(tmp_path, capsys, kind, option, message):
    """A NaN threshold compares false with every figure: the pass picked no config of any problem and recorded each
    one done (an empty file), so that no later run of the pass measured them."""
    from autoheur.cli import main

    collect(TINY, tmp_path / "ds", OPTS, log=quiet)
    if kind == "polish":  # it takes the refined problems only
        passes.refine(tmp_path / "ds", CollectOptions(reps=2, workers=1), within=1e9, top=2, log=quiet)
    assert main(["data", kind, str(tmp_path / "ds"), option, "nan", "--workers", "1"]) == 2
    assert message in capsys.readouterr().err
    assert not DatasetStore.load(tmp_path / "ds").retimes(kind)  # nothing was recorded


def test_polish_end_to_end_after_the_refine(tmp_path):
    """Polish picks from the rows as retimed and refined, times them in its own rounds and overlays them last; the
    refine's figures stay on disk; resumable; a bad selection is refused before any work."""
    root = tmp_path / "ds"
    collect(TINY, root, UNCENSORED, log=quiet)
    passes.refine(root, CollectOptions(reps=3, workers=1), within=1e9, top=3, log=quiet)
    store = DatasetStore.load(root)
    refined = store.read()
    picks = {pid: set(passes.configs_to_refine(store.read_problem(pid), 1e9, 2)) for pid in store.parts()}
    summary = passes.polish(root, CollectOptions(reps=5, workers=1), within=1e9, top=2, log=quiet)
    assert summary["kind"] == "polish" and summary["done"] == 2
    assert summary["configs"] == sum(map(len, picks.values())) == 4
    assert store.read(retimed=["retime", "refine"]).equals(refined)  # the refine's figures, untouched
    now = store.read()
    joined = refined.merge(now, on=["problem_id", "config_id"], suffixes=("", "_new"))
    picked = joined.apply(lambda r: r.config_id in picks[r.problem_id], axis=1)
    assert (joined.loc[picked, "reps_new"] == 5).all() and (joined.loc[picked, "status_new"] == "ok").all()
    assert (joined.loc[~picked, "collected_at_new"] == joined.loc[~picked, "collected_at"]).all()
    for pid in picks:  # read on the refine's scale: the polish's raw figures over its session's median ratio
        raw = store.read_retime(pid, "polish").to_pandas().set_index("config_id").median_ms
        before = refined[refined.problem_id == pid].set_index("config_id").median_ms
        read = now[now.problem_id == pid].set_index("config_id").median_ms
        scale = (raw / before[raw.index]).median()
        assert read[raw.index].to_numpy() == pytest.approx((raw / scale).to_numpy())
    log = [json.loads(line) for line in next((root / "runs").glob("*-polish.jsonl")).read_text().splitlines()]
    assert len(log) == 2 and all(r["kind"] == "polish" and r["polished"] == 2 and r["top"] == 2 for r in log)
    assert len(store.retimes("polish")) == 2 and next(root.glob("polish-pack-*.parquet"))  # packed at the end
    again = passes.polish(root, CollectOptions(reps=5, workers=1), log=quiet)
    assert again["todo"] == 0 and again["already_done"] == 2
    with pytest.raises(ValueError, match="within"):
        passes.polish(root, CollectOptions(reps=5, workers=1), top=0, log=quiet)


def test_polish_waits_for_the_refine_of_each_problem(tmp_path):
    """A refine stopped by its time limit leaves problems unrefined: polish takes the refined ones only, counts the
    others as waiting and says so, and a later polish takes them once refined."""
    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    passes.refine(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, log=quiet)
    collect(TINY, root, OPTS, log=quiet)  # the second problem arrives after the refine
    (refined,) = DatasetStore.load(root).retimes("refine")
    said: list[str] = []
    first = passes.polish(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, log=said.append)
    assert first["done"] == 1 and first["waiting"] == 1
    assert set(DatasetStore.load(root).retimes("polish")) == {refined}
    assert any("waiting for `autoheur data refine` first: 1 problems" in line for line in said)
    passes.refine(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, log=quiet)
    again = passes.polish(root, CollectOptions(reps=3, workers=1), within=1e9, top=2, log=quiet)
    assert again["done"] == 1 and again["waiting"] == 0 and again["already_done"] == 1
    store = DatasetStore.load(root)
    assert set(store.retimes("polish")) == set(store.parts()) and len(store.parts()) == 2


@pytest.mark.parametrize("cmd", ["refine", "polish"])
def test_pass_cli_passes_its_options_or_the_passes_defaults(monkeypatch, capsys, cmd):
    from autoheur.cli import main

    seen = []
    monkeypatch.setattr(passes, cmd, lambda path, opts, **kw: seen.append((str(path), opts, kw)) or {"kind": cmd})
    assert main(["data", cmd, "ds", "--top", "3", "--time-limit", "60", "--workers", "2"]) == 0
    path, opts, kw = seen[0]
    upper = cmd.upper()
    assert path == "ds" and kw == {"within": getattr(passes, f"{upper}_WITHIN"), "top": 3, "gpus": 1}
    assert (opts.reps, opts.time_limit_s, opts.workers) == (getattr(passes, f"{upper}_REPS"), 60, 2)
    assert json.loads(capsys.readouterr().out)["kind"] == cmd
    assert main(["data", cmd, "ds", "--gpus", "1"]) == 0 and seen[1][2]["gpus"] == 1


@pytest.mark.parametrize(
    "cmd, defaults",
    [
        ("refine", (passes.REFINE_WITHIN, passes.REFINE_TOP, passes.REFINE_REPS)),
        ("polish", (passes.POLISH_WITHIN, passes.POLISH_TOP, passes.POLISH_REPS)),
    ],
)
def test_pass_cli_defaults_are_the_passes(capsys, cmd, defaults):
    """The CLI does not import the passes to build its parser (they import torch); its help must state their
    defaults."""
    from autoheur.cli import main

    with pytest.raises(SystemExit):
        main(["data", cmd, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for default in defaults:
        assert f"(default {default})" in help_text


def test_a_pass_worker_whose_parent_is_gone_starts_no_problem(tmp_path, monkeypatch):
    """As the collection's workers (test_runner): a pass's worker of a run that has ended writes and reports
    nothing (runner.parent_gone, checked before each problem)."""
    from .test_store import DEAD_PID, PROBLEMS, fill, make_meta

    fill(tmp_path / "ds", PROBLEMS[:1])
    reports = []
    args = (0, [(PROBLEMS[0], ())], str(tmp_path / "ds"), make_meta(), "refine", OPTS, OPTS, {}, True, {}, None, 2)
    monkeypatch.setattr(runner, "_PARENT", DEAD_PID)
    passes._pass_worker(*args, reports.append)
    assert reports == [] and not DatasetStore.load(tmp_path / "ds").retimes("refine")
    monkeypatch.setattr(runner, "_PARENT", None)  # not spawned: the problem's (empty) refine is written
    passes._pass_worker(*args, reports.append)
    assert [r["kind"] for r in reports] == ["done", "finished"]
    assert set(DatasetStore.load(tmp_path / "ds").retimes("refine")) == {problem_id(PROBLEMS[0])}
