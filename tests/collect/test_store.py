"""The dataset store: append-only parts, resume, refusals, kill safety, merge and info (CPU, fake timings)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import autoheur.collect.store as store_mod
from autoheur.collect.info import format_info, info
from autoheur.collect.schema import COLUMNS, Metadata, device_fingerprint, problem_from_row, problem_id, rows_for
from autoheur.collect.store import MANIFEST, DatasetStore
from autoheur.collect.timing import Timing
from autoheur.device import H100_SXM, H200
from autoheur.kernels.config import KernelConfig
from autoheur.problem import Problem

CONFIGS = [KernelConfig(64, 128, 64, 3, 4), KernelConfig(128, 64, 32, 2, 4), KernelConfig(32, 32, 32, 2, 2)]
PROBLEMS = [
    Problem("2d3d", 2, (64, 192), 0, 256, 128, name="a"),
    Problem("2d2d", 3, (10, 0, 50), 128, 64, 0, dtype="float16", name="b"),
    Problem("3d3d", 2, (), 64, 64, 64, name="c"),
]
DEAD_PID = 999_999_999  # above any pid_max: never a live process
WHEN = datetime(2025, 6, 1, tzinfo=timezone.utc)  # fixed, so two shards can hold identical rows


def make_meta(spec=H100_SXM, torch="2.13.0", kernel_hash="k0", **fields) -> Metadata:
    versions = {"torch": torch, "triton": "3.6.0", "cuda": "13.0"}
    fp = device_fingerprint(spec, 3000.0, 700.0, {"sm_mhz": 1980}, "570.86", versions)
    return Metadata(device=fp, kernel_hash=kernel_hash, **fields)


def table_for(problem: Problem, scale: float = 1.0):
    results = [
        (CONFIGS[0], "ok", Timing(0.1 * scale, 0.01, 5, False)),
        (CONFIGS[1], "ok", Timing(0.5 * scale, 0.0, 1, True)),
        (CONFIGS[2], "compile_error", None),
    ]
    return rows_for(problem, results, collected_at=WHEN)


def fill(root, problems=PROBLEMS, meta=None, scale=1.0) -> DatasetStore:
    store = DatasetStore.open(root, meta or make_meta())
    for p in problems:
        store.write_problem(p, table_for(p, scale))
    return store


def test_open_write_read(tmp_path):
    root = tmp_path / "data" / H100_SXM.slug
    store = fill(root)
    assert json.loads((root / MANIFEST).read_text())["metadata"]["device"]["name"] == H100_SXM.name
    df = store.read()
    assert list(df.columns) == list(COLUMNS) and len(df) == 9
    assert set(df["problem_id"]) == {problem_id(p) for p in PROBLEMS}
    assert list(store.read(["problem_id", "status"]).columns) == ["problem_id", "status"]
    part = pq.read_metadata(store.part_path(problem_id(PROBLEMS[0])))
    assert part.row_group(0).column(0).compression == "ZSTD"
    with pytest.raises(ValueError, match="unknown columns"):
        store.read(["nope"])


def test_empty_store_reads_empty_frame(tmp_path):
    df = DatasetStore.open(tmp_path / "d", make_meta()).read()
    assert df.empty and list(df.columns) == list(COLUMNS)


def test_resume_after_reopen(tmp_path):
    fill(tmp_path / "d", PROBLEMS[:2])
    store = DatasetStore.open(tmp_path / "d", make_meta())
    assert store.done_problems() == {problem_id(p) for p in PROBLEMS[:2]}
    store.write_problem(PROBLEMS[2], table_for(PROBLEMS[2]))
    assert len(DatasetStore.open(tmp_path / "d", make_meta()).read()) == 9


def test_noise_in_measurements_is_accepted(tmp_path):
    fill(tmp_path / "d", PROBLEMS[:1])
    noisy = make_meta()
    noisy = dataclasses.replace(noisy, device={**noisy.device, "copy_GBps": 2800.0, "clocks": {"sm_mhz": 1700}})
    DatasetStore.open(tmp_path / "d", noisy).write_problem(PROBLEMS[1], table_for(PROBLEMS[1]))
    assert len(DatasetStore.load(tmp_path / "d").read()) == 6


@pytest.mark.parametrize(
    "meta, field",
    [
        (make_meta(spec=H200), "device.name"),
        (make_meta(spec=dataclasses.replace(H100_SXM, sm_count=114)), "device.sm_count"),
        (make_meta(torch="2.12.0"), "device.torch"),
        (make_meta(space_hash="0123456789abcdef"), "space_hash"),
        (make_meta(kernel_hash="k1"), "kernel_hash"),
    ],
)
def test_refuses_mismatched_dataset(tmp_path, meta, field):
    fill(tmp_path / "d", PROBLEMS[:1])
    with pytest.raises(ValueError, match=rf"{field}.*new=True \(--new-dataset\).*another --out"):
        DatasetStore.open(tmp_path / "d", meta)


def test_new_moves_old_dataset_aside(tmp_path):
    fill(tmp_path / "d", PROBLEMS[:1])
    store = DatasetStore.open(tmp_path / "d", make_meta(spec=H200), new=True)
    assert store.done_problems() == set()
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("d.old-")]
    assert DatasetStore.load(aside).done_problems() == {problem_id(PROBLEMS[0])}
    assert DatasetStore.load(tmp_path / "d").meta.device_name == H200.name


def test_a_new_dataset_at_dot_is_refused_and_nothing_moves(tmp_path, monkeypatch, capsys):
    """`collect --new-dataset --out .` ended in "PosixPath('.') has an empty name" (no name to set the old dataset
    aside under): refused now, saying what to give; the dataset is left where it is."""
    from autoheur.cli import main

    fill(tmp_path / "d", PROBLEMS[:1])
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    monkeypatch.chdir(tmp_path / "d")
    for root in (".", "../d/.."):
        with pytest.raises(ValueError, match="would move the directory it is in aside: give the path from outside"):
            DatasetStore.open(Path(root), make_meta(), new=True)
    assert main(["collect", "--shapes", str(shapes), "--out", ".", "--new-dataset"]) == 2
    assert "would move the directory it is in aside" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "s.jsonl"]
    assert DatasetStore.load(tmp_path / "d").done_problems() == {problem_id(PROBLEMS[0])}


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an autoheur dataset"):
        DatasetStore.open(tmp_path / "d", make_meta())


def test_same_problem_twice_raises(tmp_path):
    store = fill(tmp_path / "d", PROBLEMS[:1])
    renamed = dataclasses.replace(PROBLEMS[0], name="same problem, other name")
    with pytest.raises(FileExistsError, match="already collected"):
        store.write_problem(renamed, table_for(renamed))
    assert len(store.read()) == 3


def test_table_of_another_problem_is_refused(tmp_path):
    store = DatasetStore.open(tmp_path / "d", make_meta())
    with pytest.raises(ValueError, match="expected only"):
        store.write_problem(PROBLEMS[0], table_for(PROBLEMS[1]))


def test_crash_inside_write_problem_leaves_nothing(tmp_path, monkeypatch):
    store = fill(tmp_path / "d", PROBLEMS[:1])

    def boom(tmp, final):
        raise KeyboardInterrupt("killed between fsync and publish")

    monkeypatch.setattr(store_mod, "_link_no_clobber", boom)
    with pytest.raises(KeyboardInterrupt):
        store.write_problem(PROBLEMS[1], table_for(PROBLEMS[1]))
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "d").iterdir() if p.name != MANIFEST) == [
        f"part-{problem_id(PROBLEMS[0])}.parquet"
    ]
    store = DatasetStore.open(tmp_path / "d", make_meta())
    assert store.done_problems() == {problem_id(PROBLEMS[0])}
    store.write_problem(PROBLEMS[1], table_for(PROBLEMS[1]))  # the retry succeeds, once
    df = store.read()
    assert len(df) == 6 and not df.duplicated(["problem_id", "config_id"]).any()


def test_stale_temp_files_are_ignored_and_cleaned(tmp_path):
    store = fill(tmp_path / "d", PROBLEMS[:1])
    stale = tmp_path / "d" / f".tmp-{DEAD_PID}-deadbeef.parquet"
    stale.write_bytes(b"PAR1 half a file")
    live = tmp_path / "d" / f".tmp-{os.getpid()}-cafef00d.parquet"  # a live writer's file is not ours to delete
    live.write_bytes(b"PAR1")
    assert store.done_problems() == {problem_id(PROBLEMS[0])} and len(store.read()) == 3
    DatasetStore.open(tmp_path / "d", make_meta())
    assert not stale.exists() and live.exists()


def test_hard_kill_during_write(tmp_path):
    """A real process dies (os._exit) after the temp part is written: the reopened store has no trace of it."""
    root = tmp_path / "d"
    fill(root, PROBLEMS[:1])
    script = textwrap.dedent(f"""
        import os
        import autoheur.collect.store as s
        from test_store import PROBLEMS, make_meta, table_for
        s._link_no_clobber = lambda tmp, final: os._exit(3)
        s.DatasetStore.open({str(root)!r}, make_meta()).write_problem(PROBLEMS[1], table_for(PROBLEMS[1]))
    """)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert any(p.name.startswith(".tmp-") for p in root.iterdir())  # the killed run's temp part
    store = DatasetStore.open(root, make_meta())
    assert not any(p.name.startswith(".tmp-") for p in root.iterdir())
    assert store.done_problems() == {problem_id(PROBLEMS[0])} and len(store.read()) == 3


def test_read_refuses_foreign_part(tmp_path):
    fill(tmp_path / "a", PROBLEMS[:1], meta=make_meta(torch="2.12.0"))
    store = fill(tmp_path / "b", PROBLEMS[1:2])
    pid = problem_id(PROBLEMS[0])
    os.replace(tmp_path / "a" / f"part-{pid}.parquet", tmp_path / "b" / f"part-{pid}.parquet")
    with pytest.raises(ValueError, match="collected under other conditions.*device.torch"):
        store.read()


# -- retime files ------------------------------------------------------------------------------------------------


def retimed_table(problem: Problem):
    return rows_for(problem, [(CONFIGS[0], "ok", Timing(0.08, 0.02, 5, False))], collected_at=WHEN)


def test_retime_overlays_the_first_measurement_and_keeps_it(tmp_path):
    store = fill(tmp_path / "d")
    newer = make_meta(timing_version=3)
    pid = problem_id(PROBLEMS[0])
    before = store.part_path(pid).read_bytes()
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    assert store.part_path(pid).read_bytes() == before  # parts are never rewritten
    assert set(store.retimes()) == {pid}
    df = store.read()
    assert len(df) == 3 * len(CONFIGS)  # replaced in place: no duplicate (problem, config)
    row = df[(df.problem_id == pid) & (df.config_id == CONFIGS[0].config_id)].iloc[0]
    assert (row.median_ms, row.reps) == (0.08, 5)
    first = store.read(retimed=False)
    row = first[(first.problem_id == pid) & (first.config_id == CONFIGS[0].config_id)].iloc[0]
    assert (row.median_ms, row.reps) == (0.1, 5) and row.spread == 0.01
    other = df[df.problem_id != pid].sort_values(["problem_id", "config_id"]).reset_index(drop=True)
    same = first[first.problem_id != pid].sort_values(["problem_id", "config_id"]).reset_index(drop=True)
    assert other.equals(same)
    with pytest.raises(FileExistsError):  # once per problem, like parts
        store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    assert info(tmp_path / "d")["datasets"][0]["retimed_rows"] == 1
    assert "(1 retimed)" in format_info(info(tmp_path / "d"))


def test_retime_with_no_rows_marks_the_problem_done(tmp_path):
    store = fill(tmp_path / "d")
    store.write_retime(PROBLEMS[1], rows_for(PROBLEMS[1], []), make_meta(timing_version=3))
    assert problem_id(PROBLEMS[1]) in store.retimes()
    assert store.read().equals(store.read(retimed=False))


def test_retime_refusals(tmp_path):
    store = fill(tmp_path / "d", PROBLEMS[:2])
    newer = make_meta(timing_version=3)
    with pytest.raises(ValueError, match="no part"):
        store.write_retime(PROBLEMS[2], retimed_table(PROBLEMS[2]), newer)
    with pytest.raises(ValueError, match="expected only"):
        store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[1]), newer)
    with pytest.raises(ValueError, match="other conditions.*device.name"):
        store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(spec=H200, timing_version=3))
    with pytest.raises(ValueError, match="older"):
        store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=0))
    stranger = rows_for(PROBLEMS[0], [(KernelConfig(16, 32, 32, 2, 2), "ok", Timing(0.1, 0.0, 5, False))])
    with pytest.raises(ValueError, match="not in problem"):
        store.write_retime(PROBLEMS[0], stranger, newer)
    assert not store.retimes()
    # a retime file whose part is gone is refused on read, with what to do
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    store.part_path(problem_id(PROBLEMS[0])).unlink()
    with pytest.raises(ValueError, match="without a part.*delete"):
        store.read()


def test_refine_overlays_after_the_retime(tmp_path):
    """Two kinds of pass on one config: reads apply the retime, then the refine; each kind can be read alone."""
    store = fill(tmp_path / "d")
    newer = make_meta(timing_version=3)
    pid, cid = problem_id(PROBLEMS[0]), CONFIGS[0].config_id
    refined = rows_for(PROBLEMS[0], [(CONFIGS[0], "ok", Timing(0.09, 0.004, 20, False))], collected_at=WHEN)
    store.write_retime(PROBLEMS[0], refined, newer, kind="refine")  # written first: the order of reads is fixed
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    assert set(store.retimes("refine")) == set(store.retimes()) == {pid}

    def figure(**read):
        df = store.read(**read)
        assert len(df) == 3 * len(CONFIGS)
        row = df[(df.problem_id == pid) & (df.config_id == cid)].iloc[0]
        return row.median_ms, row.reps

    assert figure() == (0.09, 20)
    assert figure(retimed=["retime"]) == (0.08, 5)
    assert figure(retimed=["refine"]) == (0.09, 20)
    assert figure(retimed=False) == (0.1, 5)
    both = store.read_problem(pid, retimed=["refine", "retime"]).to_pandas()  # to pandas: NaN equals NaN
    assert both.equals(store.read_problem(pid).to_pandas())
    with pytest.raises(FileExistsError, match="refine pass"):
        store.write_retime(PROBLEMS[0], refined, newer, kind="refine")
    with pytest.raises(ValueError, match="unknown retime kind"):
        store.read(retimed=["shine"])
    with pytest.raises(ValueError, match="unknown retime kind"):
        store.retimes("shine")
    d = info(tmp_path / "d")["datasets"][0]
    assert (d["retimed_rows"], d["refined_rows"], d["polished_rows"]) == (1, 1, 0)
    assert "(1 retimed, 1 refined)" in format_info(info(tmp_path / "d"))
    # the last kind: it overlays both, on their scale: this session ran CONFIGS[0] 1.1x slower than the refine did,
    # so CONFIGS[1] (censored before: no scale from it) is read at 0.11 / 1.1
    polished = [(CONFIGS[0], "ok", Timing(0.099, 0.002, 48, False)), (CONFIGS[1], "ok", Timing(0.11, 0.0, 48, False))]
    store.write_retime(PROBLEMS[0], rows_for(PROBLEMS[0], polished, collected_at=WHEN), newer, kind="polish")
    assert figure() == (pytest.approx(0.09), 48)
    row = store.read().set_index(["problem_id", "config_id"]).loc[(pid, CONFIGS[1].config_id)]
    assert (row.median_ms, row.reps, row.status) == (pytest.approx(0.1), 48, "ok")
    assert store.read_retime(pid, "polish").column("median_ms").to_pylist() == [0.099, 0.11]  # the file: raw figures
    assert figure(retimed=["retime", "refine"]) == (0.09, 20)
    assert "(1 retimed, 1 refined, 2 polished)" in format_info(info(tmp_path / "d"))
    store.retime_path(pid, "polish").unlink()
    store.part_path(pid).unlink()  # a refine file without its part is refused like a retime's
    store.retime_path(pid).unlink()
    with pytest.raises(ValueError, match="refine files without a part"):
        store.read()


def test_session_scale_and_alignment():
    from autoheur.collect.store import align_session, session_scale

    assert session_scale({"a": 1.1, "b": 2.4, "c": 9.0}, {"a": 1.0, "b": 2.0, "d": 1.0}) == pytest.approx(1.15)
    assert session_scale({"a": 1.1}, {"b": 1.0}) == 1.0  # nothing in common: no scale
    old = table_for(PROBLEMS[0])  # CONFIGS[0] ok at 0.1, CONFIGS[1] censored, CONFIGS[2] failed
    new = rows_for(PROBLEMS[0], [(CONFIGS[0], "ok", Timing(0.12, 0.0, 48, False)),
                                 (CONFIGS[1], "ok", Timing(0.3, 0.0, 48, False))], collected_at=WHEN)  # fmt: skip
    out = align_session(new, old)
    assert out.column("median_ms").to_pylist() == pytest.approx([0.1, 0.25])  # 1.2x slower session
    assert out.drop_columns(["median_ms"]).equals(new.drop_columns(["median_ms"]))
    assert align_session(new, new) is new  # the same scale: untouched


def test_pack_moves_the_problems_files_into_one_and_reads_the_same(tmp_path):
    store = fill(tmp_path / "d")
    newer = make_meta(timing_version=3)
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    store.write_retime(PROBLEMS[1], rows_for(PROBLEMS[1], []), newer)  # done, with no rows
    store.write_retime(PROBLEMS[2], retimed_table(PROBLEMS[2]), make_meta(timing_version=4))  # another run's metadata
    before = store.read()
    assert store.pack()["moved"] == 3 and store.pack()["moved"] == 0
    files = sorted(p.name for p in tmp_path.joinpath("d").iterdir() if p.name.startswith("retime-"))
    assert len(files) == 2 and all(f.startswith("retime-pack-") for f in files)  # one pack per metadata
    assert set(store.retimes()) == {problem_id(p) for p in PROBLEMS}
    assert DatasetStore.load(tmp_path / "d").read().equals(before)
    assert store.read_retime(problem_id(PROBLEMS[1])).num_rows == 0
    assert store.read_retime(problem_id(PROBLEMS[2])).schema.metadata == retime_md(store, PROBLEMS[2])
    with pytest.raises(FileExistsError, match="already had a retime pass"):
        store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), newer)
    assert info(tmp_path / "d")["datasets"][0]["retimed_rows"] == 2
    # a pack cut short before it removed a file: the next pack removes it, if its rows are the pack's
    pid = problem_id(PROBLEMS[0])
    leftover = store.read_retime(pid)
    pq.write_table(leftover, store.retime_path(pid))
    assert store.retimes()[pid].name.startswith("retime-pack-") and store.read().equals(before)
    assert store.pack() == {"moved": 0, "leftovers_removed": 1, "temps_removed": 0}  # what it did, said
    assert not store.retime_path(pid).exists()
    other = leftover.set_column(COLUMNS.index("median_ms"), "median_ms", [[0.5]])  # not the pack's rows
    pq.write_table(other, store.retime_path(pid))
    with pytest.raises(ValueError, match="differs from its rows"):
        store.pack()


def retime_md(store, problem):
    """The metadata a problem's own retime file had: the pack's, less its list of problems."""
    path = store.retimes()[problem_id(problem)]
    return {k: v for k, v in pq.read_schema(path).metadata.items() if k != store_mod.DONE_KEY}


def test_a_pack_without_its_list_of_problems_is_refused(tmp_path):
    store = fill(tmp_path / "d")
    pq.write_table(retimed_table(PROBLEMS[0]), tmp_path / "d" / f"retime-pack-{'0' * 16}.parquet")
    with pytest.raises(ValueError, match="not a pack; delete it"):
        store.read()


# -- part packs --------------------------------------------------------------------------------------------------

EXTRA = Problem("2d3d", 4, (8, 0, 40, 16), 0, 128, 64, name="d")


def test_pack_parts_reads_the_same_and_keeps_the_dataset_whole(tmp_path):
    store = fill(tmp_path / "d", PROBLEMS[:2])
    noisy = make_meta()
    noisy = dataclasses.replace(noisy, device={**noisy.device, "clocks": {"sm_mhz": 1700}})  # another run's metadata
    DatasetStore.open(tmp_path / "d", noisy).write_problem(PROBLEMS[2], table_for(PROBLEMS[2]))
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3))
    before = store.read()
    parts_before = {pid: store.read_part(pid) for pid in store.parts()}
    assert store.pack_parts()["moved"] == 3 and store.pack_parts()["moved"] == 0
    names = sorted(p.name for p in (tmp_path / "d").iterdir() if p.name.startswith("part-"))
    assert len(names) == 2 and all(n.startswith("part-pack-") for n in names)  # one pack per run metadata
    again = DatasetStore.load(tmp_path / "d")
    assert again.read().equals(before) and again.done_problems() == {problem_id(p) for p in PROBLEMS}
    for pid, table in parts_before.items():  # each problem reads back as its part, with its run's metadata
        packed = again.read_part(pid)  # (pandas: NaN equals NaN)
        assert packed.to_pandas().equals(table.to_pandas()) and packed.schema.metadata == table.schema.metadata
    with pytest.raises(FileExistsError, match="already collected"):  # packed is done: never a duplicate
        again.write_problem(PROBLEMS[1], table_for(PROBLEMS[1]))
    again.write_problem(EXTRA, table_for(EXTRA))  # collection goes on in parts of their own
    assert len(again.read()) == 12 and again.pack_parts()["moved"] == 1
    assert len(DatasetStore.load(tmp_path / "d").read()) == 12


def test_a_part_pack_cut_short_is_finished_and_a_lying_one_refused(tmp_path):
    store = fill(tmp_path / "d")
    store.pack_parts()
    pid = problem_id(PROBLEMS[0])
    leftover = store.read_part(pid)
    pq.write_table(leftover, store.part_path(pid))  # killed after writing the pack, before removing the part
    assert store.parts()[pid].name.startswith("part-pack-") and len(store.read()) == 9
    assert store.pack_parts() == {"moved": 0, "leftovers_removed": 1, "temps_removed": 0}
    assert not store.part_path(pid).exists()
    other = leftover.set_column(COLUMNS.index("median_ms"), "median_ms", [[9.0, 9.0, None]])
    pq.write_table(other, store.part_path(pid))
    with pytest.raises(ValueError, match="differs from its rows"):
        store.pack_parts()
    store.part_path(pid).unlink()
    (pack,) = [p for p in (tmp_path / "d").iterdir() if p.name.startswith("part-pack-")]
    table = pq.read_table(pack)
    md = {**table.schema.metadata, store_mod.DONE_KEY: json.dumps([pid]).encode()}  # a list that leaves two out
    pq.write_table(table.replace_schema_metadata(md), pack)
    with pytest.raises(ValueError, match="other problems than its list"):
        DatasetStore.load(tmp_path / "d").read()


def test_a_column_read_of_a_pack_reads_the_same_and_checks_what_it_reads(tmp_path):
    store = fill(tmp_path / "d")
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3))
    loose, summary = store.read(), info(tmp_path / "d")
    store.pack_parts()
    packed = DatasetStore.load(tmp_path / "d")
    for cols in (["median_ms"], ["problem_id", "status", "median_ms"], ["sizes", "config_id", "layout"]):
        assert packed.read(cols).equals(loose[cols])
    assert info(tmp_path / "d") == summary  # info reads six columns of the pack
    (pack,) = [p for p in (tmp_path / "d").iterdir() if p.name.startswith("part-pack-")]
    good = pq.read_table(pack)
    md = good.schema.metadata
    corrupt = {
        "duplicate": pa.concat_tables([good, good.slice(0, 1)]),
        "unknown status": good.set_column(COLUMNS.index("status"), "status", pa.array(["lost"] * len(good))),
        "wrong types": good.set_column(COLUMNS.index("n"), "n", pa.array([1.0] * len(good))),
    }
    for match, table in corrupt.items():
        pq.write_table(table.replace_schema_metadata(md), pack)
        with pytest.raises(ValueError, match=match):
            DatasetStore.load(tmp_path / "d").read(["median_ms"])
    bare = {k: v for k, v in md.items() if k != b"autoheur"}  # its list of problems, no run metadata
    pq.write_table(good.replace_schema_metadata(bare), pack)
    with pytest.raises(ValueError, match="metadata"):
        DatasetStore.load(tmp_path / "d").read(["median_ms"])


def test_a_part_pack_whose_rows_are_interleaved_reads_the_same(tmp_path):
    store = fill(tmp_path / "d")
    before = store.read()
    store.pack_parts()
    (pack,) = [p for p in (tmp_path / "d").iterdir() if p.name.startswith("part-pack-")]
    table = pq.read_table(pack)
    pq.write_table(table.take([8, 0, 4, 1, 7, 2, 5, 3, 6]), pack)  # rows of the three problems mixed
    assert (
        DatasetStore.load(tmp_path / "d")
        .read()
        .sort_values(["problem_id", "config_id"])
        .reset_index(drop=True)
        .equals(before.sort_values(["problem_id", "config_id"]).reset_index(drop=True))
    )


# -- problem ids: `autoheur data ids`, `autoheur collect --skip / --only` ----------------------------------------------


def test_read_problem_ids_of_a_dataset_and_of_a_file(tmp_path):
    from autoheur.collect.store import read_problem_ids

    root = tmp_path / "ds"
    fill(root, PROBLEMS[:2])
    ids = {problem_id(p) for p in PROBLEMS[:2]}
    assert read_problem_ids(root) == ids
    f = tmp_path / "ids.txt"
    a, b = sorted(ids)
    f.write_text(f"# what call 1 collected\n{a}\n\n  {b}  # and a comment\n{a}\n")
    assert read_problem_ids(f) == ids
    f.write_text(f"{a}\ndeepseek-v3/down/prefill\n")
    with pytest.raises(ValueError, match=r"ids\.txt:2: 'deepseek-v3/down/prefill' is not a problem id"):
        read_problem_ids(f)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_problem_ids(tmp_path / "none.txt")
    with pytest.raises(ValueError, match="not an autoheur dataset"):
        read_problem_ids(tmp_path)  # a directory without a manifest


def test_cli_data_ids_and_collect_skip(tmp_path, capsys):
    from autoheur.cli import main
    from autoheur.collect.workloads import workload

    problems = [p for p in workload("backward", 12) if p.launches]
    root = tmp_path / "ds"
    fill(root, problems[:3])
    assert main(["data", "ids", str(root)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == sorted(problem_id(p) for p in problems[:3])
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(printed) + "\n")
    for skip in (root, ids):  # a dataset, or the file `data ids` wrote
        assert main(["collect", "--workload", "backward", "--count", "12", "--dry-run", "--skip", str(skip)]) == 0
        out, err = capsys.readouterr()
        listed = [line.rsplit(None, 1)[-1] for line in out.strip().splitlines()]
        assert listed == [p.name for p in workload("backward", 12) if p not in problems[:3]]
        assert f"3 of {len(workload('backward', 12))} problems left out" in err
    assert main(["collect", "--workload", "backward", "--count", "12", "--dry-run", "--skip", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # --only keeps the listed problems, in the list's order; with --skip too, those of one dataset less another's
    other = tmp_path / "other"
    fill(other, problems[1:2])
    for only, skip, want in ((ids, None, problems[:3]), (root, other, [problems[0], problems[2]])):
        assert main(["collect", "--workload", "backward", "--count", "12", "--dry-run", "--only", str(only),
                     *(["--skip", str(skip)] if skip else [])]) == 0  # fmt: skip
        out, err = capsys.readouterr()
        assert [line.rsplit(None, 1)[-1] for line in out.strip().splitlines()] == [p.name for p in want]
        assert f"{len(workload('backward', 12)) - 3} of {len(workload('backward', 12))} problems left out" in err
    assert main(["collect", "--workload", "backward", "--count", "12", "--dry-run", "--only", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["data", "ids", str(tmp_path / "x")]) == 2


def test_collect_only_that_keeps_nothing_is_refused_before_the_dataset_is_begun(tmp_path, capsys):
    """`--only` of an empty file (or of ids none of the listed problems has) kept no problem, and collect went on:
    it made --out and began an empty dataset there (its manifest), and ended 0 having collected nothing."""
    from autoheur.cli import main
    from autoheur.collect.workloads import workload

    empty, others, out = tmp_path / "empty.txt", tmp_path / "others.txt", tmp_path / "out"
    empty.write_text("# nothing yet\n")
    others.write_text(problem_id(PROBLEMS[0]) + "\n")  # not a problem of the backward workload
    base = ["collect", "--workload", "backward", "--count", "4", "--out", str(out)]
    assert main([*base, "--only", str(empty)]) == 2
    assert f"--only {empty} lists no problem ids" in capsys.readouterr().err
    assert main([*base, "--only", str(others)]) == 2
    assert f"--only {others}: none of its 1 problem ids is among the {len(workload('backward', 4))}" in (
        capsys.readouterr().err
    )
    assert not out.exists()
    assert main([*base, "--dry-run", "--skip", str(empty)]) == 0  # an empty --skip leaves out nothing: no refusal
    assert "0 of" in capsys.readouterr().err


def test_collect_skip_of_an_inductor_dataset_matches_what_inductor_timed(capsys):
    """The inductor family's datasets key each problem by the one Inductor times (offsets split evenly), so `--skip`
    and `--only` of such a dataset match a listed problem by that id too: the shipped H200 Inductor dataset holds the
    first 57 problems of `aten_backward` (stop 85) and, from stop 86, more of its weight gradients, so what it holds
    of the list is read from it (a fixed answer broke when the dataset grew), with some of the list not there."""
    from autoheur.cli import main
    from autoheur.collect.workloads import workload
    from autoheur.inductor.collect import as_benchmarked

    root = Path(__file__).resolve().parents[2] / "data" / "inductor-nvidia-h200"
    listed = workload("aten_backward", 60)
    have = DatasetStore.load(root).done_problems()
    assert [problem_id(p) in have for p in listed].count(True) < 5  # the raw ids alone would miss them
    done = [problem_id(as_benchmarked(p)) in have for p in listed]
    assert all(done[:57]) and 0 < done.count(False)
    there = [p for p, d in zip(listed, done, strict=True) if d]
    missing = [p for p, d in zip(listed, done, strict=True) if not d]
    base = ["collect", "--family", "inductor", "--workload", "aten_backward", "--count", "60", "--dry-run"]
    for flag, want in (("--skip", missing), ("--only", there)):
        assert main([*base, flag, str(root)]) == 0
        out, err = capsys.readouterr()
        assert [line.rsplit(None, 1)[-1] for line in out.strip().splitlines()] == [p.name for p in want]
        assert f"{60 - len(want)} of 60 problems left out" in err


def test_by_ids_matches_the_even_split_for_the_inductor_family_only(tmp_path, capsys):
    """`_by_ids` on a file of ids (`autoheur data ids` of an Inductor dataset): a routed problem is matched by its even
    split for the inductor family alone (the triton family times the routing itself), a batched one (no offsets) by
    its own id either way, and the count of problems left out is of the list as given."""
    from autoheur.cli import _by_ids
    from autoheur.inductor.collect import as_benchmarked

    routed = Problem("2d3d", 4, (5, 40, 3, 16), 0, 256, 512, name="routed")
    same_shapes = dataclasses.replace(routed, sizes=(40, 5, 16, 3), name="same shapes, other routing")
    batched = Problem("3d3d", 2, (64, 64), 64, 128, 256, name="batched")
    other = Problem("2d3d", 2, (8, 8), 0, 128, 256, name="other")
    assert problem_id(as_benchmarked(routed)) != problem_id(routed)
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{problem_id(as_benchmarked(routed))}\n{problem_id(batched)}\n")
    listed = [routed, same_shapes, batched, other]
    assert _by_ids(listed, str(ids), keep=False, family="inductor") == [other]
    assert _by_ids(listed, str(ids), keep=True, family="inductor") == [routed, same_shapes, batched]
    assert _by_ids(listed, str(ids), keep=False, family="triton") == [routed, same_shapes, other]
    err = capsys.readouterr().err
    assert "3 of 4 problems left out" in err and "1 of 4 problems left out" in err


def test_read_is_the_table_pack_by_pack_with_shared_sizes():
    """`read` (pack by pack, one sizes array per problem) gives exactly `read_table`'s rows, retimes applied, on a
    shipped dataset with packs, refine and polish files."""
    root = Path(__file__).resolve().parents[2] / "data" / "retest-nvidia-h200"
    store = DatasetStore.load(root)
    fast = store.read()
    slow = DatasetStore.load(root).read_table().to_pandas()
    assert len(fast) == len(slow) > 0 and list(fast.columns) == list(slow.columns)
    pd.testing.assert_frame_equal(fast.drop(columns="sizes"), slow.drop(columns="sizes"), check_exact=True)
    assert all(np.array_equal(a, b) for a, b in zip(fast["sizes"], slow["sizes"], strict=True))
    first = fast.groupby("problem_id", sort=False)["sizes"].agg(lambda s: len({id(x) for x in s}))
    assert (first == 1).all()  # one array per problem
    assert store._cache == {} or all(not k[0].name.startswith("part-pack") for k in store._cache)
    sub = DatasetStore.load(root).read(["problem_id", "median_ms"])
    pd.testing.assert_frame_equal(sub, slow[["problem_id", "median_ms"]], check_exact=True)


def test_read_batches_hold_whole_problems_and_together_the_rows_of_read():
    """`read_batches`: each batch at least `min_rows` rows (the last may be fewer), no problem split between two,
    and together exactly `read`'s rows, in file order."""
    root = Path(__file__).resolve().parents[2] / "data" / "retest-nvidia-h200"
    cols = ["problem_id", "config_id", "median_ms", "status"]
    whole = DatasetStore.load(root).read(cols)
    batches = list(DatasetStore.load(root).read_batches(cols, min_rows=30_000))
    assert len(batches) > 3
    assert all(len(b) >= 30_000 for b in batches[:-1])
    seen = [set(b["problem_id"]) for b in batches]
    assert sum(len(s) for s in seen) == len(set().union(*seen)) == whole["problem_id"].nunique()
    key = ["problem_id", "config_id"]
    together = pd.concat(batches, ignore_index=True).sort_values(key, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        together, whole.sort_values(key, kind="stable").reset_index(drop=True), check_exact=True
    )


def _plain_read(root: Path) -> pd.DataFrame:
    """The overlay written out plainly, as a reference for `read`'s faster path: each file read whole, a problem's
    rows found by filtering on its id, the polish's session scale from `session_scale`'s dicts, a retimed config's
    rows put after the part's others."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from autoheur.collect.store import ALIGNED_KINDS, PACK_RES, RETIME_KINDS, session_scale

    def rows(files, pid):
        found = [t.filter(pc.equal(t.column("problem_id"), pid)) for t in files]
        return pa.concat_tables([t.replace_schema_metadata(None) for t in found])

    def ok_ms(t):
        ids, status, ms = (t.column(c).to_pylist() for c in ("config_id", "status", "median_ms"))
        return {c: m for c, st, m in zip(ids, status, ms, strict=True) if st == "ok" and m == m}

    parts = [pq.read_table(p) for p in sorted(root.glob("part-*.parquet"))]
    passes = {
        k: [pq.read_table(p) for p in sorted(root.iterdir()) if PACK_RES[k].fullmatch(p.name)] for k in RETIME_KINDS
    }
    pids = sorted(set().union(*(t.column("problem_id").to_pylist() for t in parts)))
    out = []
    for pid in pids:
        table = rows(parts, pid)
        for kind in RETIME_KINDS:
            if not passes[kind]:
                continue
            new = rows(passes[kind], pid)
            if not new.num_rows:
                continue
            if kind in ALIGNED_KINDS:
                scale = session_scale(ok_ms(new), ok_ms(table))
                i = new.schema.get_field_index("median_ms")
                new = new.set_column(i, new.schema.field(i), pc.divide(new.column(i), scale))
            retimed = set(new.column("config_id").to_pylist())
            keep = [c not in retimed for c in table.column("config_id").to_pylist()]
            table = pa.concat_tables([table.filter(pa.array(keep)), new])
        out.append(table.to_pandas())
    return pd.concat(out, ignore_index=True)


def test_read_is_the_plain_overlay_on_a_shipped_dataset():
    """`read`'s fast path (pack splits and problem lists kept per file, the overlay on the asked columns only, one
    pandas conversion per pack) gives the plain overlay's rows exactly, on a shipped dataset with part packs and
    refine and polish packs."""
    root = Path(__file__).resolve().parents[2] / "data" / "retest-nvidia-h200"
    assert any(p.name.startswith("polish-pack-") for p in root.iterdir())
    plain = _plain_read(root)
    fast = DatasetStore.load(root).read()
    assert len(fast) == len(plain) > 0
    pd.testing.assert_frame_equal(fast.drop(columns="sizes"), plain.drop(columns="sizes"), check_exact=True)
    assert all(np.array_equal(a, b) for a, b in zip(fast["sizes"], plain["sizes"], strict=True))
    cols = ["median_ms", "problem_id", "layout"]  # a few columns, not in schema order, without the overlay's own
    pd.testing.assert_frame_equal(DatasetStore.load(root).read(cols), plain[cols], check_exact=True)


def test_table_session_scale_is_session_scale():
    """The overlay's vectorized scale equals `session_scale` over the same tables: configs in one table only,
    censored and failed rows, a NaN time, a config timed at 0."""
    from autoheur.collect.store import _table_session_scale, session_scale

    def ok_ms(t):
        ids, status, ms = (t.column(c).to_pylist() for c in ("config_id", "status", "median_ms"))
        return {c: m for c, st, m in zip(ids, status, ms, strict=True) if st == "ok" and m == m}

    rng = np.random.default_rng(0)
    configs = [KernelConfig(bm, bn, bk, s, w) for bm in (32, 64, 128) for bn in (32, 64) for bk in (32, 64)
               for s in (2, 3) for w in (4, 8)]  # fmt: skip

    def results(n, zero=False, nan=False):
        picked = rng.choice(len(configs), size=n, replace=False)
        out = []
        for i in picked:
            kind = str(rng.choice(["ok", "ok", "ok", "censored", "compile_error"]))
            ms = 0.0 if zero and i == picked[0] else float(rng.uniform(0.01, 1.0))
            ms = float("nan") if nan and i == picked[-1] else ms
            timing = None if kind == "compile_error" else Timing(ms, 0.0, 5, kind == "censored")
            out.append((configs[i], kind, timing))
        return rows_for(PROBLEMS[0], out, collected_at=WHEN)

    for trial in range(20):
        old, new = results(40, zero=trial == 3), results(int(rng.integers(1, 20)), nan=trial == 5)
        assert _table_session_scale(new, old) == session_scale(ok_ms(new), ok_ms(old))


def test_to_pandas_each_is_to_pandas_of_each():
    """One conversion for many tables gives each table's own `_to_pandas` frame (rows, columns, one sizes array per
    problem), also for an empty table and a problem without sizes."""
    import pyarrow as pa

    from autoheur.collect.store import _to_pandas, _to_pandas_each

    tables = [table_for(p) for p in PROBLEMS]
    tables.insert(1, tables[0].slice(0, 0))
    i = tables[3].column_names.index("sizes")  # the 3D x 3D problem (empty sizes), here with none at all
    field = tables[3].schema.field(i)
    tables[3] = tables[3].set_column(i, field, pa.array([None] * tables[3].num_rows, type=field.type))
    each = _to_pandas_each(tables)
    assert len(each) == len(tables)
    for frame, table in zip(each, tables, strict=True):
        one = _to_pandas(table)
        pd.testing.assert_frame_equal(
            frame.reset_index(drop=True).drop(columns="sizes"), one.drop(columns="sizes"), check_exact=True
        )
        assert [None if s is None else s.tolist() for s in frame["sizes"]] == [
            None if s is None else s.tolist() for s in one["sizes"]
        ]
        if len(frame):
            assert len({id(s) for s in frame["sizes"]}) == 1
    assert _to_pandas_each([pa.concat_tables(tables)])[0].shape == (sum(t.num_rows for t in tables), len(COLUMNS))


# -- damaged files ---------------------------------------------------------------------------------------------------

RETEST = Path(__file__).resolve().parents[2] / "data" / "retest-nvidia-h200"
RETEST_PACK = "part-pack-75ccce406e52eaf2.parquet"  # 12 problems, 26,184 rows, 243 KB


def _garble(path: Path, at: int = 50_000, count: int = 400) -> None:
    """XOR `count` bytes from `at` with 0x5A (the review's corruption: a page in the middle of the file, its footer
    intact; in the shipped pack below, the page still decompresses)."""
    data = bytearray(path.read_bytes())
    data[at : at + count] = bytes(b ^ 0x5A for b in data[at : at + count])
    path.write_bytes(bytes(data))


def _shipped_pack_copy(root: Path) -> Path:
    """A dataset of one shipped pack (written before page checksums), copied as is."""
    root.mkdir()
    for name in (MANIFEST, RETEST_PACK):
        (root / name).write_bytes((RETEST / name).read_bytes())
    return root / RETEST_PACK


def test_a_garbled_pack_without_checksums_is_refused_by_its_times(tmp_path):
    """A shipped pack with 400 bytes garbled mid-file decodes: its times read as -1e260 and the like, which reads
    and `data info` took as data. Now refused, naming the file."""
    pack = _shipped_pack_copy(tmp_path / "d")
    assert len(DatasetStore.load(tmp_path / "d").read(["problem_id", "median_ms"])) == 26_184  # reads as shipped
    _garble(pack)
    want = rf"{RETEST_PACK}: \d+ timed rows .*not a positive finite time .*corrupt; restore it from git"
    with pytest.raises(ValueError, match=want):
        DatasetStore.load(tmp_path / "d").read()
    with pytest.raises(ValueError, match=want):
        info(tmp_path / "d")


def test_new_files_carry_page_checksums_and_a_garbled_page_is_refused(tmp_path):
    """The same rows written by the store (parts, then their pack) carry page checksums, which reads verify: the same
    garbling is refused by the checksum, whatever column it hits. Files without checksums still read (above)."""
    source = DatasetStore.load(RETEST)
    store = DatasetStore.open(tmp_path / "d", source.meta)
    tables = [source.read_part(pid, RETEST / RETEST_PACK) for pid in source._pack_done(RETEST / RETEST_PACK)]
    for rows in tables:
        store.write_problem(problem_from_row(rows.slice(0, 1).to_pylist()[0]), rows.replace_schema_metadata(None))
    assert store.pack_parts()["moved"] == 12
    (pack,) = (tmp_path / "d").glob("part-pack-*.parquet")
    order = [("problem_id", "ascending"), ("config_id", "ascending")]
    shipped = pa.concat_tables([t.replace_schema_metadata(None) for t in tables]).sort_by(order)
    assert DatasetStore.load(tmp_path / "d").read_table().sort_by(order).equals(shipped)
    _garble(pack)
    with pytest.raises(ValueError, match=rf"{pack.name} is corrupt \(.*CRC checksum.*\); restore it from git"):
        DatasetStore.load(tmp_path / "d").read()


def test_a_truncated_file_is_refused_naming_it_and_what_to_do(tmp_path):
    """pyarrow's "Parquet magic bytes not found" names no file: a part, a pack and a pass's pack cut short are each
    refused with their path and how to get them back."""
    store = fill(tmp_path / "d", PROBLEMS[:2])
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3), kind="refine")
    store.pack("refine")
    part = store.part_path(problem_id(PROBLEMS[1]))
    (refine,) = (tmp_path / "d").glob("refine-pack-*.parquet")
    for cut, then in (
        (refine, "run `autoheur data refine` on the dataset again"),
        (part, "collect its problems again"),
    ):
        whole = cut.read_bytes()
        cut.write_bytes(whole[: len(whole) // 2])
        with pytest.raises(ValueError, match=rf"{cut} is corrupt \(.*magic bytes.*\); restore it from git .*{then}"):
            DatasetStore.load(tmp_path / "d").read()
        cut.write_bytes(whole)
    store.pack_parts()
    (pack,) = (tmp_path / "d").glob("part-pack-*.parquet")
    pack.write_bytes(pack.read_bytes()[:100])
    with pytest.raises(ValueError, match=rf"{pack} is corrupt .*collect its problems again"):
        DatasetStore.load(tmp_path / "d").done_problems()


def test_a_kill_while_the_manifest_is_written_leaves_a_fresh_start(tmp_path):
    """A real process dies (os._exit) half-way through writing a new dataset's manifest: the directory holds no
    manifest, only the dead run's temp file, and the next run starts the dataset afresh (a manifest written in place
    would be left half-written: every later run refused as corrupt)."""
    root = tmp_path / "d"
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from test_store import make_meta
        from autoheur.collect.store import DatasetStore
        def half_then_die(self, data):
            with open(self, "wb") as f:
                f.write(data[: len(data) // 2])
            os._exit(3)
        Path.write_bytes = half_then_die
        DatasetStore.open({str(root)!r}, make_meta())
    """)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert not (root / MANIFEST).exists() and [p.name[:5] for p in root.iterdir()] == [".tmp-"]
    store = fill(root, PROBLEMS[:1])
    assert store.done_problems() == {problem_id(PROBLEMS[0])}
    assert DatasetStore.load(root).meta == make_meta()


@pytest.mark.parametrize(
    "text", ['{"metadata": {"device": {"na', "[]", '{"metadata": [1]}', '{"meta": {}}', '{"metadata": {"device": 5}}']
)
def test_a_garbled_manifest_is_refused_naming_it(tmp_path, text):
    fill(tmp_path / "d", PROBLEMS[:1])
    (tmp_path / "d" / MANIFEST).write_text(text)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'd' / MANIFEST}.* restore it from git"):
        DatasetStore.load(tmp_path / "d")


def test_an_unreadable_dataset_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    """A dataset this user may not read (a directory without read permission, a manifest that is no file) was a raw
    OSError traceback from `autoheur eval` and `autoheur data ...`; now refused as a bad dataset is, naming it."""
    import pathlib

    from autoheur.cli import main
    from autoheur.collect.info import info

    (tmp_path / "d" / MANIFEST).mkdir(parents=True)  # root reads any file: a directory in its place fails as well
    for argv in (["data", "ids"], ["data", "pack"], ["data", "info"], ["data", "merge", "--into", str(tmp_path / "m")],
                 ["eval", "--data"]):  # fmt: skip
        assert main([*argv, str(tmp_path / "d")]) == 2, argv
        assert f"{tmp_path / 'd' / MANIFEST} cannot be read (Is a directory)" in capsys.readouterr().err, argv
    locked, exists = tmp_path / "locked", pathlib.Path.exists

    def no_access(self):
        if locked in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return exists(self)

    monkeypatch.setattr(pathlib.Path, "exists", no_access)
    for read in (DatasetStore.load, info):
        with pytest.raises(ValueError, match=r"locked.* cannot be read \(Permission denied\)"):
            read(locked)


def test_a_problem_in_two_packs_is_refused_naming_both(tmp_path):
    """A pack copied in beside another that lists the same problems (from another collection, with other rows) was
    read as whichever name sorted last; now refused, as is the same for a pass's packs."""
    store = fill(tmp_path / "d")
    store.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3), kind="refine")
    store.pack_parts()
    store.pack("refine")
    for prefix in ("part", "refine"):
        (pack,) = (tmp_path / "d").glob(f"{prefix}-pack-*.parquet")
        table = pq.read_table(pack)
        i = table.schema.get_field_index("median_ms")
        other = table.set_column(i, table.schema.field(i), pc.multiply(table.column(i), 2.0))
        copy = tmp_path / "d" / f"{prefix}-pack-{'f' * 16}.parquet"
        pq.write_table(other, copy)
        want = rf"problem [0-9a-f]{{16}} is in two packs of .*: {pack.name} and {copy.name}\. .*keep the pack"
        with pytest.raises(ValueError, match=want):
            DatasetStore.load(tmp_path / "d").read()
        copy.unlink()
    assert len(DatasetStore.load(tmp_path / "d").read()) == 9


def test_pack_removes_dead_runs_temps_and_says_what_it_did(tmp_path, capsys):
    """`autoheur data pack` after a killed run: its temp files go (a live writer's stay), and the summary says what
    was removed, not only what was packed (it said `packed: 0` after removing a cut-short pack's leftovers)."""
    from autoheur.cli import main

    store = fill(tmp_path / "d")
    stale = tmp_path / "d" / f".tmp-{DEAD_PID}-deadbeef.parquet"
    live = tmp_path / "d" / f".tmp-{os.getpid()}-cafef00d.parquet"
    for temp in (stale, live):
        temp.write_bytes(b"PAR1 half a file")
    assert DatasetStore.load(tmp_path / "d").pack_parts() == {"moved": 3, "leftovers_removed": 0, "temps_removed": 1}
    assert not stale.exists() and live.exists()
    pid = problem_id(PROBLEMS[0])
    pq.write_table(store.read_part(pid), store.part_path(pid))  # a pack killed before it removed this part
    assert main(["data", "pack", str(tmp_path / "d")]) == 0
    packed = json.loads(capsys.readouterr().out)["packed"]["part"]
    assert packed == {"moved": 0, "leftovers_removed": 1, "temps_removed": 0} and not store.part_path(pid).exists()


def test_problem_ids_from_a_file_that_is_not_text_say_so(tmp_path):
    from autoheur.collect.store import read_problem_ids

    binary = tmp_path / "part.parquet"
    binary.write_bytes(b"PAR1\xa8\xff\x00")
    with pytest.raises(ValueError, match="part.parquet is not a text file of problem ids"):
        read_problem_ids(binary)


def test_problem_ids_file_may_start_with_a_byte_order_mark(tmp_path):
    """A list saved by a Windows editor starts with U+FEFF, which was read into the first id (refused as malformed)."""
    from autoheur.collect.store import read_problem_ids

    pid = problem_id(PROBLEMS[0])
    listed = tmp_path / "seen.txt"
    listed.write_bytes(b"\xef\xbb\xbf" + f"{pid}\n".encode())
    assert read_problem_ids(listed) == {pid}


def test_pack_and_merge_wait_for_no_other_writer(tmp_path, capsys):
    """`data pack` or `data merge` beside a collection into one of their directories would pack (or read) parts the
    collection packs at its end: each takes the directory's writer lock, and is refused while another holds it."""
    from autoheur.cli import main
    from autoheur.collect.merge import merge
    from autoheur.collect.store import one_writer

    fill(tmp_path / "d")
    fill(tmp_path / "into", PROBLEMS[:1])
    with one_writer(tmp_path / "d"):  # a collection in flight (the lock is per open file: this counts as another)
        assert main(["data", "pack", str(tmp_path / "d")]) == 2
        assert "another `autoheur collect` or `autoheur data" in capsys.readouterr().err
        with pytest.raises(ValueError, match="is writing into .*d \\(one writer per directory\\)"):
            merge([tmp_path / "d"], tmp_path / "new")  # a source being written
    assert not (tmp_path / "new").exists()
    with one_writer(tmp_path / "into"):
        with pytest.raises(ValueError, match="is writing into .*into \\(one writer per directory\\)"):
            merge([tmp_path / "d"], tmp_path / "into")  # an existing destination being written
    assert main(["data", "pack", str(tmp_path / "d")]) == 0  # once let go
    stats = merge([tmp_path / "d", tmp_path / "d"], tmp_path / "into")  # a source named twice does not lock itself out
    assert stats["problems"] == len(PROBLEMS)


def test_a_directory_that_cannot_hold_the_lock_file_is_merged_from_and_packed(tmp_path, monkeypatch, capsys):
    """A dataset on a read-only mount (a shipped one) was merged from and packed again (a no-op) before the writer lock;
    the lock file it cannot hold made both an OSError traceback. Where the lock file is there but not writable
    (another user's), it is locked read-only, so a writer holding it still refuses the second; where the file system
    cannot lock (NFS without a lock manager), the command goes on with a warning."""
    import errno

    from autoheur.cli import main
    from autoheur.collect.merge import merge
    from autoheur.collect.store import WRITER_LOCK, one_writer

    fill(tmp_path / "ro").pack_parts()
    real = open

    def read_only(path, mode="r", *args, **kwargs):  # the mount refuses every write into ro/
        if Path(path).parent == tmp_path / "ro" and any(c in mode for c in "wax+"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(store_mod, "open", read_only, raising=False)
    assert merge([tmp_path / "ro"], tmp_path / "copy")["problems"] == len(PROBLEMS)
    assert main(["data", "pack", str(tmp_path / "ro")]) == 0
    assert json.loads(capsys.readouterr().out)["packed"]["part"]["moved"] == 0
    assert not (tmp_path / "ro" / WRITER_LOCK).exists()
    (tmp_path / "ro" / WRITER_LOCK).touch()  # there, but not this user's to write
    monkeypatch.undo()
    with one_writer(tmp_path / "ro"):  # its owner's collection
        monkeypatch.setattr(store_mod, "open", read_only, raising=False)
        with pytest.raises(ValueError, match="is writing into"):
            merge([tmp_path / "ro"], tmp_path / "copy2")
    monkeypatch.undo()
    import fcntl

    def no_locks(fd, op):  # NFS mounted without a lock manager
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(UserWarning, match="no writer lock .*No locks available"):
        assert merge([tmp_path / "ro"], tmp_path / "copy3")["problems"] == len(PROBLEMS)


def test_a_dataset_path_under_a_directory_this_user_cannot_search_is_refused_by_name(tmp_path, monkeypatch, capsys):
    """Under a directory without search permission, mkdir fails with EACCES and Path.exists raises PermissionError
    rather than answer: the refusal's own probe of what is in the way ended in that traceback. Simulated (the tests
    may run as root, whom permissions do not bind): the OS's answers for paths under `locked` are EACCES."""
    import errno

    locked = tmp_path / "locked"
    locked.mkdir()
    real_stat, real_mkdir = Path.stat, Path.mkdir

    def denied(path):
        return locked in Path(path).parents

    def fake_stat(self, *a, **k):
        if denied(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_stat(self, *a, **k)

    def fake_mkdir(self, *a, **k):
        if denied(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *a, **k)

    from autoheur.cli import main

    fill(tmp_path / "src", PROBLEMS[:1])
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    monkeypatch.setattr(Path, "stat", fake_stat)
    monkeypatch.setattr(Path, "mkdir", fake_mkdir)
    out = locked / "a" / "b"
    with pytest.raises(ValueError, match=r"cannot reach .*locked/a/b \(Permission denied\)"):
        DatasetStore.open(out, make_meta())
    with pytest.raises(ValueError, match=r"cannot make the directory .*locked/a/b \(Permission denied\)"):
        store_mod._make_dir(out)  # where mkdir is refused, its probe of what is in the way does not raise
    assert main(["collect", "--shapes", str(shapes), "--out", str(out)]) == 2
    assert "locked/a/b (Permission denied)" in capsys.readouterr().err
    assert main(["data", "merge", str(tmp_path / "src"), "--into", str(out)]) == 2
    assert "locked/a/b (Permission denied)" in capsys.readouterr().err
    # the output checks of train and eval, made before their minutes of work
    assert main(["train", "--data", str(tmp_path / "src"), "--out", str(out / "m.joblib")]) == 2
    assert "cannot reach it (Permission denied)" in capsys.readouterr().err
    assert main(["eval", "--data", str(tmp_path / "src"), "--report", str(out)]) == 2
    assert "cannot reach it (Permission denied)" in capsys.readouterr().err


def test_a_dataset_path_that_is_a_file_or_runs_through_one_is_refused_by_name(tmp_path, capsys):
    """`collect --out` naming a file, or a path through one, ended in a FileExistsError / NotADirectoryError
    traceback from mkdir (one_writer let a file pass "for DatasetStore.open to say what is wrong", and it did not);
    `data merge --into` a path through a file did the same. Each is now a refusal naming the file in the way."""
    from autoheur.cli import main

    fill(tmp_path / "src", PROBLEMS[:1])
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    afile = tmp_path / "afile"
    afile.write_text("not a dataset")
    for out in (afile, afile / "sub"):
        with pytest.raises(ValueError, match=f"cannot make the directory .*{afile} is a file"):
            DatasetStore.open(out, make_meta())
        assert main(["collect", "--shapes", str(shapes), "--out", str(out)]) == 2
        assert f"{afile} is a file" in capsys.readouterr().err
    assert main(["data", "merge", str(tmp_path / "src"), "--into", str(afile / "sub")]) == 2
    assert f"{afile} is a file" in capsys.readouterr().err
    assert afile.read_text() == "not a dataset" and sorted(p.name for p in tmp_path.iterdir()) == [
        "afile", "s.jsonl", "src"
    ]  # fmt: skip
