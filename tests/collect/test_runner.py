"""`autoheur collect` end to end under the Triton interpreter: real kernel, real (meaningless) timings, real dataset."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from autoheur.collect import runner
from autoheur.collect.runner import CollectOptions, collect, parse_shard, shard
from autoheur.collect.schema import Metadata, problem_from_row, problem_id
from autoheur.collect.store import DatasetStore
from autoheur.collect.timing import TIMING_VERSION, Timing, _Protocol
from autoheur.problem import Problem
from tests.conftest import DEVICE, HAS_GPU

TINY = [
    Problem("2d3d", 3, (5, 0, 19), 0, 40, 24, "float16", name="tiny-2d3d"),
    Problem("2d2d", 2, (7, 9), 24, 40, 0, "float32", "n", "m", name="tiny-2d2d"),
]
IDS = ("m16n64k32s2w2g1-ptr", "m32n64k32s2w4g8-ptr", "m16n64k64s3w2g1-tma", "m64n64k32s2w4g1-ptr")
OPTS = CollectOptions(reps=2, workers=1, config_ids=IDS)


def quiet(_msg: str) -> None:
    pass


def other_gpu(real, **device):
    """A stand-in for runner.dataset_metadata that fingerprints another GPU (`device`: fields to change too)."""

    def metadata(index=0, family="triton"):
        meta = real(index)
        fp = {**meta.device, "name": "Some Other GPU", **device}
        return Metadata(fp, meta.space_hash, meta.kernel_hash, timing_version=meta.timing_version)

    return metadata


def test_end_to_end_two_problems(tmp_path):
    root = tmp_path / "ds"
    summary = collect(TINY, root, OPTS, log=quiet)
    assert summary["done"] == 2 and not summary["errors"]
    store = DatasetStore.load(root)
    assert store.meta.device_name == runner.device_spec().name  # "Triton interpreter (H100 rules)" on the CPU
    assert store.meta.timing_version == TIMING_VERSION
    df = store.read()
    assert sorted(df["problem_name"].unique()) == ["tiny-2d2d", "tiny-2d3d"]
    assert len(df) == 2 * len(IDS)  # every requested config is feasible for both: one row each
    assert set(df["config_id"]) == set(IDS)
    # interpreter timings are noise: a config may be censored (2x the best, twice), none may fail
    assert df["status"].isin(["ok", "censored"]).all()
    assert (df["median_ms"] > 0).all()
    # 2 runs, or 4 where the two disagreed by more than 25% (round 3: likely on the interpreter's host clock)
    assert (
        df.loc[df["status"] == "ok", "reps"].isin([2, 4]).all()
        and df.loc[df["status"] == "censored", "reps"].isin([1, 2]).all()  # 2: confirmed slow (timing v4)
    )
    for p in TINY:  # the exact problem comes back from its rows
        row = df[df["problem_id"] == problem_id(p)].iloc[0]
        assert problem_from_row(row) == p
    logs = list((root / "runs").glob("*.jsonl"))
    assert logs and sum(len(f.read_text().splitlines()) for f in logs) == 2


def test_rerun_skips_finished_problems(tmp_path):
    root = tmp_path / "ds"
    assert collect(TINY[:1], root, OPTS, log=quiet)["packed"] == 1  # a finished run packs its parts
    (first,) = root.glob("part-pack-*.parquet")
    before = first.read_bytes()
    summary = collect(TINY, root, OPTS, log=quiet)
    assert summary["already_done"] == 1 and summary["done"] == 1 and summary["packed"] == 1
    assert first.read_bytes() == before  # untouched: the second run's problem went into a pack of its own
    assert len(list(root.glob("part-pack-*.parquet"))) == 2 and not list(root.glob(f"part-{'?' * 16}.parquet"))
    df = DatasetStore.load(root).read()
    assert len(df) == len(df.drop_duplicates(["problem_id", "config_id"])) == 2 * len(IDS)


def test_interrupted_problem_is_lost_whole_and_redone(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    real = runner.measure_problem
    calls = []

    def dies_on_second(problem, *a, **k):
        calls.append(problem.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # a kill in the middle of the second problem
        return real(problem, *a, **k)

    monkeypatch.setattr(runner, "measure_problem", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        collect(TINY, root, OPTS, log=quiet)
    store = DatasetStore.load(root)
    assert store.done_problems() == {problem_id(TINY[0])}
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp")]
    monkeypatch.setattr(runner, "measure_problem", real)
    assert collect(TINY, root, OPTS, log=quiet)["done"] == 1
    df = DatasetStore.load(root).read()
    assert df.groupby("problem_id").size().tolist() == [len(IDS), len(IDS)]


def test_sigkill_mid_run_loses_nothing_finished_and_duplicates_nothing(tmp_path):
    """A real kill -9 of a collecting process while it writes its second problem (the temp file written, not yet
    linked into place), then a rerun by a fresh process: every problem exactly once. The kill comes from inside
    the store's write, so it lands at the same point on a slow CPU and on a fast GPU host."""
    root = tmp_path / "ds"
    problems = [Problem("2d3d", 2, (3 + i, 9), 0, 40, 24, "float16", name=f"p{i}") for i in range(4)]
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, signal, sys
        os.environ["TRITON_INTERPRET"] = "1"
        from autoheur.collect import store
        from autoheur.collect.runner import CollectOptions, collect
        from autoheur.problem import Problem
        if sys.argv[1:] == ["kill"]:
            link, calls = store._link_no_clobber, []
            def killing_link(tmp, final):
                calls.append(final)
                if len(calls) == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
                return link(tmp, final)
            store._link_no_clobber = killing_link
        problems = {problems!r}
        collect(problems, {str(root)!r}, CollectOptions(reps=2, workers=1, config_ids={IDS!r}), log=print)
        """)
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}  # the interpreter, GPU or not
    killed = subprocess.run([sys.executable, str(script), "kill"], env=env, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    assert list(root.glob(".tmp-*.parquet")), "the kill should leave the second problem's temp file behind"
    first = DatasetStore.load(root).done_problems()
    assert len(first) == 1  # the first problem finished, the second's write was cut
    rerun = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=300)  # a fresh process
    assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
    assert not list(root.glob(".tmp-*.parquet")), "the rerun removes the dead writer's temp file"
    store = DatasetStore.load(root)
    assert store.done_problems() == {problem_id(p) for p in problems}
    df = store.read()  # validates every part: schema, metadata, no duplicate (problem, config)
    assert len(df) == len(problems) * len(IDS)


def _tagged_workers(tag: str) -> list[int]:
    """Live spawned workers (multiprocessing's `--multiprocessing-fork` processes) whose environment carries `tag`."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and tag.encode() in (proc / "environ").read_bytes():
                if b"--multiprocessing-fork" in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the workers through /proc")
@pytest.mark.skipif(HAS_GPU and torch.cuda.device_count() < 2, reason="needs two GPUs, or none (the interpreter)")
def test_workers_end_with_a_sigkilled_parent(tmp_path):
    """`collect --gpus 2` killed with SIGKILL while its workers collect: they end with it, and no problem is written
    after the kill settles (orphans went on writing, and a rerun then ran beside them)."""
    root, tag = tmp_path / "ds", f"autoheur-test-{tmp_path.name}-{os.getpid()}"
    problems = [Problem("2d3d", 2, (3 + i, 9), 0, 40, 24, "float16", name=f"p{i}") for i in range(40)]
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        from autoheur.collect.runner import CollectOptions, collect
        from autoheur.problem import Problem
        if __name__ == "__main__":  # the spawned workers import this file too
            opts = CollectOptions(reps=2, workers=1, config_ids={IDS!r})
            collect({problems!r}, {str(root)!r}, opts, gpus=2, log=print)
        """)
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "AUTOHEUR_TEST_TAG": tag}
    with open(tmp_path / "log", "wb") as log:
        parent = subprocess.Popen([sys.executable, str(script)], env=env, stdout=log, stderr=log)
    try:
        deadline = time.time() + 300
        while not list(root.glob("part-*.parquet")) and parent.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert parent.poll() is None, (tmp_path / "log").read_text()[-2000:]
        assert list(root.glob("part-*.parquet")), "no worker wrote a problem in time"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        time.sleep(3)  # the kill settles: a worker in the middle of a write ends it or not
        written = sorted(p.name for p in root.glob("part-*.parquet"))
        time.sleep(8)  # a worker goes on at ~1 problem a second here
        assert sorted(p.name for p in root.glob("part-*.parquet")) == written
        assert len(written) < len(problems)
        assert _tagged_workers(tag) == []
    finally:
        for pid in _tagged_workers(tag):  # this test's own orphans, if the fix fails
            os.kill(pid, signal.SIGKILL)


def test_a_worker_whose_parent_is_gone_starts_no_problem(tmp_path, monkeypatch):
    """The check before each problem (where the parent's death does not kill the worker: not Linux): a worker of
    a run that has ended returns without measuring, writing or reporting."""
    from .test_store import DEAD_PID, PROBLEMS, fill, make_meta

    fill(tmp_path / "ds", PROBLEMS[:1])
    reports = []
    args = (0, PROBLEMS[:1], str(tmp_path / "ds"), make_meta(), OPTS, {}, None, reports.append)
    runner._worker(*args)  # not spawned (or its parent alive): on to the problem, done already
    assert [r["kind"] for r in reports] == ["skipped", "finished"]
    reports.clear()
    monkeypatch.setattr(runner, "_PARENT", DEAD_PID)
    runner._worker(*args)
    assert reports == []


def test_a_problem_another_run_wrote_first_is_counted_in_the_summary(tmp_path, monkeypatch):
    """Two collections into one directory: a problem the other run wrote while this one was on its list is skipped,
    and the summary counts it (it said todo 2, done 1, no errors: one problem seemingly lost)."""
    real = DatasetStore.done_problems
    calls = []

    def done_problems(self):  # the run's own list first; then the other run has written TINY[1]
        calls.append(1)
        return real(self) | ({problem_id(TINY[1])} if len(calls) > 1 else set())

    monkeypatch.setattr(DatasetStore, "done_problems", done_problems)
    summary = collect(TINY, tmp_path / "ds", OPTS, log=quiet)
    assert summary["todo"] == 2 and summary["done"] == 1 and summary["done_by_another_run"] == 1


def test_a_second_collection_into_a_directory_is_refused_while_one_runs(tmp_path):
    """Two `autoheur collect` into one directory at once measured every problem twice and both packed the parts at
    their end: one read a part the other had just packed away and ended in a FileNotFoundError traceback. The
    directory's writer lock now refuses the second at once, with what to do; once the first ends, the next runs."""
    from autoheur.collect.store import WRITER_LOCK, one_writer

    root = tmp_path / "ds"
    with one_writer(root):  # a run in progress (the lock is per open file: this process counts as another run)
        with pytest.raises(ValueError, match="another `autoheur collect` or .* is writing into .*--out.*data merge"):
            collect(TINY[:1], root, OPTS, log=quiet)
    assert [p.name for p in root.iterdir()] == [WRITER_LOCK]  # nothing written but the lock
    assert collect(TINY[:1], root, OPTS, log=quiet)["done"] == 1  # a directory holding only the lock: a new dataset
    assert collect(TINY, root, OPTS, log=quiet)["done"] == 1  # the lock let go at the end


def test_other_device_dataset_is_refused_unless_new(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    monkeypatch.setattr(runner, "dataset_metadata", other_gpu(runner.dataset_metadata, sm_count=100))
    with pytest.raises(ValueError, match="not comparable.*--new-dataset"):
        collect(TINY, root, OPTS, log=quiet)
    summary = collect(TINY, root, OPTS, new=True, log=quiet)  # the old one is moved aside, never deleted
    assert summary["done"] == 2
    assert len(list(tmp_path.glob("ds.old-*"))) == 1


def test_a_new_dataset_keeps_its_directory_locked(tmp_path, monkeypatch):
    """--new-dataset moves the old dataset aside with the lock file the run holds: the directory it then collects
    into had no lock held, and a second run into it was let in beside the first."""
    from autoheur.collect.store import one_writer

    root = tmp_path / "ds"
    collect(TINY[:1], root, OPTS, log=quiet)
    real, second = DatasetStore.done_problems, []

    def done_problems(self):  # while the run collects into the new directory: a second writer tries it
        try:
            with one_writer(root):
                second.append("let in")
        except ValueError:
            second.append("refused")
        return real(self)

    monkeypatch.setattr(DatasetStore, "done_problems", done_problems)
    assert collect(TINY[1:], root, OPTS, new=True, log=quiet)["done"] == 1
    assert second and set(second) == {"refused"}
    (aside,) = tmp_path.glob("ds.old-*")
    assert len(DatasetStore.load(aside).parts()) == 1 and len(DatasetStore.load(root).parts()) == 1


def test_older_timing_protocol_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    real = runner.dataset_metadata
    monkeypatch.setattr(
        runner,
        "dataset_metadata",
        lambda index=0, family="triton": Metadata(**{**real(index).to_dict(), "timing_version": 1}),
    )
    collect(TINY[:1], root, OPTS, log=quiet)
    monkeypatch.setattr(runner, "dataset_metadata", real)
    with pytest.raises(ValueError, match="timing_version"):
        collect(TINY, root, OPTS, log=quiet)


def test_wrong_config_is_recorded_and_never_timed(tmp_path, monkeypatch):
    from autoheur.kernels.launcher import BoundLaunch

    real = BoundLaunch.__call__
    bad = IDS[1]

    def launch(self, a, b, offs, out=None):
        out = real(self, a, b, offs, out)
        if self.config.config_id == bad:
            out.mul_(1.5)  # a plausible-looking but wrong result
        return out

    monkeypatch.setattr(BoundLaunch, "__call__", launch)
    collect(TINY[:1], tmp_path / "ds", OPTS, log=quiet)
    df = DatasetStore.load(tmp_path / "ds").read().set_index("config_id")
    assert df.loc[bad, "status"] == "wrong"
    assert df.loc[bad, "reps"] == 0 and df["median_ms"].isna().sum() == 1
    # the rest were timed; on the interpreter's noisy clock one may be censored (2x the best, twice), as above
    assert df.drop(bad)["status"].isin(["ok", "censored"]).all()


def test_config_sample_is_a_fixed_subset(tmp_path):
    opts = CollectOptions(reps=1, workers=1, config_sample=3, seed=5)
    spec = runner.device_spec()
    a = runner.feasible_for(TINY[0], spec, opts)
    b = runner.feasible_for(TINY[0], spec, opts)
    assert len(a) == 3 and a == b
    assert runner.feasible_for(TINY[0], spec, CollectOptions(config_sample=3, seed=6)) != a


@pytest.mark.skipif(HAS_GPU and torch.cuda.device_count() < 2, reason="needs two GPUs, or none (the interpreter)")
def test_two_workers_share_the_problems(tmp_path):
    """--gpus 2 code path (two spawned workers; on the CPU both run the interpreter)."""
    summary = collect(TINY, tmp_path / "ds", OPTS, gpus=2, log=quiet)
    assert summary["done"] == 2 and not summary["errors"]
    assert DatasetStore.load(tmp_path / "ds").done_problems() == {problem_id(p) for p in TINY}


def test_a_config_subset_trial_and_a_full_collection_never_share_a_dataset(tmp_path):
    """A `--sample-configs` (or `--configs`) trial's problems count as collected; so its dataset says what it covers,
    and a collection of another subset or of the whole space is refused there before any work (else the trial's
    problems would be skipped as done and the dataset would mix oracles of subsets and of the space)."""
    root = tmp_path / "ds"

    def opts(**kw):  # time_limit_s: open the dataset, collect nothing
        return CollectOptions(reps=1, workers=1, time_limit_s=1e-9, **kw)

    assert collect(TINY, root, opts(config_sample=3, seed=5), log=quiet)["done"] == 0
    assert DatasetStore.load(root).meta.configs == "sample:3:seed5"
    for other in (opts(), opts(config_sample=4, seed=5), opts(config_sample=3, seed=6), opts(config_ids=IDS)):
        with pytest.raises(ValueError, match="configs: 'sample:3:seed5' != .*do not mix.*--new-dataset"):
            collect(TINY, root, other, log=quiet)
    collect(TINY, root, opts(config_sample=3, seed=5), log=quiet)  # the same trial resumes
    assert runner.configs_label(CollectOptions()) == "all"
    assert runner.configs_label(CollectOptions(config_ids=(IDS[1], IDS[0], IDS[1]))) == runner.configs_label(
        CollectOptions(config_ids=IDS[:2])
    )
    assert runner.configs_label(CollectOptions(config_ids=IDS[:1])).startswith("list:")


def test_a_trial_says_so_in_info_and_when_loaded_for_training(tmp_path):
    from autoheur.collect.info import format_info, info
    from autoheur.models.data import load_dataset

    root = tmp_path / "trial"
    assert collect(TINY[:1], root, CollectOptions(reps=1, workers=1, config_sample=3), log=quiet)["done"] == 1
    assert "a trial over a config subset (sample:3:seed0)" in format_info(info(root))
    with pytest.warns(UserWarning, match=r"trial over a config subset \(sample:3:seed0\).*without --sample-configs"):
        rows, _, _ = load_dataset(root)
    assert rows["config_id"].nunique() == 3


def test_time_limit_stops_before_new_problems(tmp_path):
    opts = CollectOptions(reps=1, workers=1, config_ids=IDS, time_limit_s=1e-9)
    summary = collect(TINY, tmp_path / "ds", opts, log=quiet)
    assert summary["done"] == 0


def test_shards_are_disjoint_and_cover():
    items = list(range(10))
    parts = [shard(items, i, 3) for i in range(3)]
    assert sorted(sum(parts, [])) == items
    assert parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "x", "1/0", "-1/2"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_a_dry_run_lists_its_shard_of_what_the_run_collects(tmp_path, monkeypatch, capsys):
    """`collect --dry-run --shard i/N` lists the problems the run of that shard collects, in its order: the run takes
    the shares after the duplicates (and the problems that never launch) are left out, and the dry run took them of
    the list as given (a-again for a, shares shifted by the duplicates and `idle`)."""
    from autoheur.cli import main

    lines = [([5, 0, 19], "a"), ([5, 0, 19], "a-again"), ([0, 0], "idle"), ([7, 9], "b"), ([3, 3], "c"),
             ([7, 9], "b-again"), ([1, 2], "d")]  # fmt: skip
    f = tmp_path / "shapes.jsonl"
    f.write_text("".join(json.dumps(dict(sizes=s, n=40, k=24, dtype="float16", name=n)) + "\n" for s, n in lines))
    ran: list[list[str]] = []  # the problems each run hands its worker: what it collects
    monkeypatch.setattr(runner, "precompile_all", lambda todo, *args: {})
    monkeypatch.setattr(runner, "_worker", lambda rank, todo, *args: ran.append([p.name for p in todo]))
    for spec in ("0/1", "0/2", "1/2", "0/3", "1/3", "2/3"):
        assert main(["collect", "--shapes", str(f), "--shard", spec, "--dry-run"]) == 0
        listed = [line.rsplit(None, 1)[-1] for line in capsys.readouterr().out.strip().splitlines()]
        out = tmp_path / spec.replace("/", "-")
        assert main(["collect", "--shapes", str(f), "--shard", spec, "--out", str(out), "--configs", IDS[0]]) == 0
        capsys.readouterr()
        assert listed == ran.pop(), spec
    assert listed == ["c"]  # 2/3 of a-again, b-again, c, d


class FixedTimes(_Protocol):
    """The screening protocol over preset run times (ms): config -> list of its successive runs."""

    def __init__(self, times: dict[str, list[float]]):
        self.times = {k: list(v) for k, v in times.items()}
        self.calls: list[tuple[str, int]] = []

    def _times(self, fns, names, runs, after=None):
        out = {}
        for n in names:
            self.calls.append((n, runs))
            out[n] = [self.times[n].pop(0) for _ in range(runs)]
            if after is not None:
                for _ in range(runs):
                    after(n)
        return out


class FakeCheck:
    """What the screen asks of verify.OutputCheck: `after(name)` per checked run, `verdicts()` after round 1."""

    def __init__(self, wrong: set[str]):
        self.wrong, self.seen = wrong, []

    def after(self, name):
        self.seen.append(name)

    def verdicts(self):
        return {n: "wrong" if n in self.wrong else "ok" for n in self.seen}


def test_screen_censors_hopeless_configs_after_one_run():
    t = FixedTimes({"fast": [1.0, 1.2, 1.1, 0.9], "ok": [2.9, 3.0, 3.1, 3.0], "slow": [3.2, 9, 9, 9]})
    out = t.screen(dict.fromkeys(t.times, lambda: None), reps=4, abort_factor=3.0)
    assert out["slow"] == Timing(3.2, 0.0, 1, True)  # 3.2 > 3 x 1.0: one run, a lower bound
    assert out["fast"].reps == 4 and not out["fast"].censored
    assert out["fast"].median_ms == pytest.approx(1.05)
    assert out["ok"].median_ms == pytest.approx(3.0)
    assert ("slow", 3) not in t.calls  # no further runs spent on it


def test_screen_retimes_configs_whose_runs_disagree():
    """A stall during two of three runs would be the median: such a config gets `reps` more runs, once."""
    t = FixedTimes({"stalled": [1.0, 3.0, 3.0, 1.0, 1.0, 1.1], "steady": [1.0, 1.01, 0.99]})
    out = t.screen(dict.fromkeys(t.times, lambda: None), reps=3, abort_factor=5.0)
    assert out["stalled"].reps == 6 and out["stalled"].median_ms == pytest.approx(1.05)
    assert out["steady"].reps == 3 and ("steady", 3) not in t.calls  # runs that agree: nothing more spent
    with pytest.raises(ValueError, match="retime_spread"):
        t.screen({"a": lambda: None}, reps=3, retime_spread=0)


def test_screen_single_rep_and_bad_arguments():
    t = FixedTimes({"a": [1.0], "b": [5.0]})
    out = t.screen(dict.fromkeys(t.times, lambda: None), reps=1, abort_factor=2.0)
    assert out["a"] == Timing(1.0, 0.0, 1, False) and out["b"].censored
    with pytest.raises(ValueError):
        t.screen({"a": lambda: None}, reps=0)
    assert t.screen({}, reps=3) == {}


def test_compile_keys_split_exactly_where_binaries_do():
    """One precompile per set of problems that share binaries: a 2D x 3D problem's token total is in no int the
    kernel takes, so any total shares its key; a 3D x 2D problem's total is its output's leading stride, so its
    residue mod 16 splits keys (a key per residue for 2D x 3D once cost 16 whole-space precompiles)."""
    from autoheur.device import H100_SXM

    def key(layout, sizes):
        p = Problem(layout=layout, groups=len(sizes), sizes=sizes, m=64, n=256, k=128, dtype="bfloat16")
        return runner.compile_key(p, H100_SXM)

    assert len({key("2d3d", s) for s in [(8, 0, 24), (5, 0, 3, 17), (100, 3, 1, 1, 9)]}) == 1
    assert key("3d2d", (8, 0, 24)) == key("3d2d", (16, 0, 32)) != key("3d2d", (8, 0, 25))
    many = (1,) * 257  # past the one-loop schedule's group limit: the per-group walk, other binaries
    assert key("2d3d", many) == key("2d3d", (1,) * 300) != key("2d3d", (1,) * 256) == key("2d3d", (8, 0, 24))


def test_compile_keys_split_where_the_kernels_constexprs_do():
    """A weight gradient (2D x 2D, A = x.t()) whose reduction is one token has a [M, 1] A that the kernel reads as
    K-contiguous: other binaries, so another key (sharing one made the collection compile its whole space serially
    while timing, stop 23). Problems that share a key launch with the same constexprs."""
    from autoheur.device import H100_SXM
    from autoheur.kernels.config import KernelConfig
    from autoheur.kernels.grouped_gemm import launch_args
    from autoheur.kernels.validate import validate

    def wgrad(sizes):
        return Problem(layout="2d2d", groups=len(sizes), sizes=sizes, m=64, n=256, k=0, a_major="m", b_major="n")

    def flags(p):
        _, _, kwargs = launch_args(validate(*p.make_inputs(DEVICE), check_offsets=False), KernelConfig.from_id(IDS[0]))
        return {k: v for k, v in kwargs.items() if k.isupper()}

    problems = [wgrad(s) for s in [(1,), (17,), (0, 1), (8, 0, 24), (2,), (5, 3, 9)]]
    keys = [runner.compile_key(p, H100_SXM) for p in problems]
    assert keys[0] == keys[2] != keys[1] == keys[3]  # a one-token reduction apart from every other total
    assert flags(problems[0])["A_K_CONTIG"] and not flags(problems[1])["A_K_CONTIG"]
    for p, key in zip(problems, keys, strict=True):
        for q, other in zip(problems, keys, strict=True):
            if key == other:
                assert flags(p) == flags(q), (p.sizes, q.sizes)


def test_compile_jobs_keep_every_worker_busy():
    from autoheur.collect.precompile import split_jobs

    assert [len(c) for c in split_jobs(list(range(10)), workers=10)] == [1] * 10  # a run-time top-10
    assert [len(c) for c in split_jobs(list(range(10)), workers=3)] == [3, 3, 3, 1]
    sweep = split_jobs(list(range(2182)), workers=16)
    assert max(map(len, sweep)) == 4 and sum(map(len, sweep)) == 2182  # a whole space: chunks of 4
    assert [x for c in sweep for x in c] == list(range(2182))


def test_collect_skips_problems_that_never_launch(tmp_path):
    idle = Problem("2d3d", 2, (0, 0), 0, 40, 24, "float16", name="no-tokens")
    lines = []
    summary = collect([idle, TINY[0]], tmp_path / "ds", OPTS, log=lines.append)
    assert summary["done"] == 1 and set(DatasetStore.load(tmp_path / "ds").parts()) == {problem_id(TINY[0])}
    assert any("never launch" in line and "no-tokens" in line for line in lines)


def test_rounds_time_every_config_once_per_round_in_a_new_order():
    """The refine protocol: interleaved rounds, no abort, no round 3; the order is seeded."""
    times = {"a": [1.0, 1.1, 0.9, 1.0], "b": [9.0, 9.2, 8.8, 9.0], "c": [2.0, 6.0, 6.0, 2.0]}
    t = FixedTimes(times)
    out = t.rounds(dict.fromkeys(times, lambda: None), reps=4, seed=3)
    assert all(runs == 1 for _, runs in t.calls)  # one run per config per round: interleaved
    order = [name for name, _ in t.calls]
    rounds = [order[i : i + 3] for i in range(0, 12, 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1  # the order changes between rounds
    assert out["a"].median_ms == pytest.approx(1.0) and out["a"].reps == 4
    assert not out["b"].censored and out["b"].reps == 4  # 9x the best: still timed in full, never censored
    assert out["c"].median_ms == pytest.approx(4.0) and out["c"].reps == 4  # disagreeing runs: no extra round
    again = FixedTimes(times)
    again.rounds(dict.fromkeys(times, lambda: None), reps=4, seed=3)
    assert again.calls == t.calls  # seeded
    with pytest.raises(ValueError, match="reps"):
        t.rounds({"a": lambda: None}, reps=0)


def test_screen_confirms_aborts_when_asked():
    """A stall during the one run of round 1 must not rule a fast config out when aborts are confirmed."""
    times = {"stalled": [9.0, 0.9, 0.95, 0.9], "fast": [1.0, 1.0, 1.0], "hopeless": [5.0, 4.0]}
    t = FixedTimes({k: list(v) for k, v in times.items()})
    out = t.screen(dict.fromkeys(t.times, lambda: None), reps=3, abort_factor=3.0, confirm_aborts=True)
    assert not out["stalled"].censored and out["stalled"].reps == 3  # the stalled run is dropped
    assert out["stalled"].median_ms == pytest.approx(0.9)
    assert out["hopeless"] == Timing(4.0, 0.0, 2, True)  # slow twice: censored, the faster run as its bound
    assert ("hopeless", 2) not in t.calls
    unconfirmed = FixedTimes({k: list(v) for k, v in times.items()})
    out = unconfirmed.screen(dict.fromkeys(times, lambda: None), reps=3, abort_factor=3.0)
    assert out["stalled"] == Timing(9.0, 0.0, 1, True)  # unconfirmed (collection before v4): censored after one run
    assert CollectOptions().confirm_aborts


def test_screen_confirms_only_aborts_near_the_line_when_given_a_slack():
    """A stall adds time: a run far above the abort line was slow, and confirming it would cost a long run."""
    times = {"best": [1.0, 1.0, 1.0], "near": [2.4, 1.1, 1.1, 1.1], "far": [30.0]}
    t = FixedTimes({k: list(v) for k, v in times.items()})
    out = t.screen(
        dict.fromkeys(times, lambda: None), reps=3, abort_factor=2.0, confirm_aborts=True, confirm_slack_ms=1
    )
    assert not out["near"].censored and out["near"].median_ms == pytest.approx(1.1)  # 2.4 <= 2 + 1: confirmed
    assert out["far"] == Timing(30.0, 0.0, 1, True) and ("far", 1) in t.calls and t.calls.count(("far", 1)) == 1
    assert CollectOptions().confirm_slack_ms == 1.0


def test_screen_drops_configs_the_round_1_check_finds_wrong():
    """A wrong config is often the fastest (it skipped work): it must neither be timed again nor set the best."""
    times = {"skips_work": [0.1], "a": [1.0, 1.1, 1.0], "b": [1.5, 1.5, 1.6], "slow": [2.5, 2.6]}
    t = FixedTimes(times)
    check = FakeCheck({"skips_work"})
    out = t.screen(dict.fromkeys(times, lambda: None), reps=3, abort_factor=2.0, confirm_aborts=True, check=check)
    assert "skips_work" not in out and ("skips_work", 2) not in t.calls
    assert not out["b"].censored and out["b"].reps == 3  # 1.5 <= 2 x 1.0: the best is a's, not the wrong one's
    assert out["slow"] == Timing(2.5, 0.0, 2, True)
    assert check.seen == list(times)  # checked once each, in round 1 only
    none_ok = FixedTimes({"x": [1.0]})
    assert none_ok.screen({"x": lambda: None}, reps=3, check=FakeCheck({"x"})) == {}


def test_rounds_check_first_in_an_untimed_pass():
    times = {"a": [5.0, 1.0, 1.0], "wrong": [0.1]}
    t = FixedTimes(times)
    out = t.rounds(dict.fromkeys(times, lambda: None), reps=2, check=FakeCheck({"wrong"}))
    assert set(out) == {"a"} and out["a"].median_ms == pytest.approx(1.0)  # the checking run is not a round


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"reps": 0}, "reps=0 (at least 1)"),
        ({"abort_factor": 0.5}, "abort_factor=0.5"),
        ({"abort_factor": float("nan")}, "abort_factor=nan"),
        ({"workers": -1}, "workers=-1"),
        ({"time_limit_s": -5.0}, "time_limit=-5.0"),
        ({"config_sample": 0}, "sample_configs=0"),
        ({"config_sample": -2}, "sample_configs=-2"),  # it took the whole space
        ({"seed": 1.5}, "seed=1.5"),
        ({"seed": 2**64}, "seed=18446744073709551616"),
        ({"family": "inductor", "config_sample": 5}, "the inductor family times Inductor's whole grid"),
        ({"config_ids": ()}, "configs: none given"),
        ({"config_ids": (IDS[0], "bogus")}, "configs: ['bogus'] is not in the space"),
    ],
)
def test_bad_options_are_refused_before_a_dataset_is_begun(tmp_path, kw, message):
    """Each was found after the precompile, with a dataset directory begun (or not at all: a negative sample took the
    whole space, an unknown config id was dropped); now when the options are made, which `collect` does first."""
    with pytest.raises(ValueError, match=f"bad collection options: .*{re.escape(message)}"):
        CollectOptions(**kw)
    assert CollectOptions(abort_factor=float("inf")).abort_factor == float("inf")  # the passes': censor nothing
    assert CollectOptions(workers=0, time_limit_s=0, seed=-1).workers == 0  # 0: all cores, no limit, as before


def test_collect_refuses_bad_options_leaving_nothing(tmp_path, capsys):
    from autoheur.cli import main

    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    out = tmp_path / "d"
    for bad in (["--reps", "0"], ["--configs", "bogus"], ["--configs", ","], ["--sample-configs", "-2"]):
        assert main(["collect", "--shapes", str(shapes), *bad, "--out", str(out)]) == 2
        assert "bad collection options" in capsys.readouterr().err and not out.exists()
    assert main(["collect", "--dry-run", "--workload", "sampled", "--layouts", ",", "--count", "2"]) == 2
    assert "give at least one of each" in capsys.readouterr().err


def test_a_problem_none_of_the_listed_configs_can_run_is_left_out_not_fatal(tmp_path):
    """`--configs` times the listed configs where feasible: a problem for which none is (here a tile too large for
    float32's shared memory) has no rows. Its empty part was refused by the store, and that ValueError ended the
    collection at it, on every rerun: the problems after it were never collected, those before it left unpacked."""
    from dataclasses import replace

    big = "m128n128k128s2w4g1-ptr"
    spec = runner.device_spec(0)
    assert [c.config_id for c in runner.feasible_for(TINY[0], spec, CollectOptions(config_ids=(big,)))] == [big]
    assert runner.feasible_for(TINY[1], spec, CollectOptions(config_ids=(big,))) == []
    lines = []
    summary = collect(TINY[::-1], tmp_path / "ds", replace(OPTS, config_ids=(big,)), log=lines.append)
    assert summary["done"] == 1 and summary["no_feasible_config"] == 1 and not summary["errors"]
    assert summary["packed"] == 1
    assert DatasetStore.load(tmp_path / "ds").done_problems() == {problem_id(TINY[0])}
    assert any("none of the listed configs" in line and "tiny-2d2d" in line for line in lines)
