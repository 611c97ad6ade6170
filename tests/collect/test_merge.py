"""`autoheur data merge` (collect/merge.py): shards into one dataset, each problem once, conflicts and other devices
refused, the passes' files and run logs along."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoheur.collect.info import info
from autoheur.collect.merge import merge
from autoheur.collect.schema import problem_id
from autoheur.collect.store import DatasetStore
from autoheur.device import H200

from .test_store import PROBLEMS, fill, make_meta, retimed_table


def test_merge_dedupes_and_refuses(tmp_path):
    fill(tmp_path / "s1", PROBLEMS[:2])
    fill(tmp_path / "s2", PROBLEMS[1:])  # PROBLEMS[1] in both shards, with identical rows
    stats = merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert stats["copied"] == 3 and stats["duplicates_skipped"] == 1 and stats["problems"] == 3
    df = DatasetStore.load(tmp_path / "all").read()
    assert len(df) == 9 and not df.duplicated(["problem_id", "config_id"]).any()
    assert merge([tmp_path / "s1"], tmp_path / "all")["copied"] == 0  # re-running a merge is a no-op

    (tmp_path / "s2" / "runs").mkdir(exist_ok=True)  # the run logs come along, once each
    (tmp_path / "s2" / "runs" / "20261122T000000-host-0.jsonl").write_text('{"problem_id": "x"}\n')
    assert merge([tmp_path / "s2"], tmp_path / "all")["run_logs_copied"] == 1
    assert (tmp_path / "all" / "runs" / "20261122T000000-host-0.jsonl").read_text() == '{"problem_id": "x"}\n'
    assert merge([tmp_path / "s2"], tmp_path / "all")["run_logs_copied"] == 0

    s3 = fill(tmp_path / "s3", PROBLEMS[:1], scale=2.0)  # the same problem measured again: a conflict
    pid = problem_id(PROBLEMS[0])
    theirs, ours = s3.parts()[pid], DatasetStore.load(tmp_path / "all").parts()[pid]  # a part, and a pack
    assert ours.name.startswith("part-pack-")
    with pytest.raises(ValueError, match=rf"measured twice, with different rows: in {theirs} and in {ours}\. Keep one"):
        merge([tmp_path / "s3"], tmp_path / "all")
    fill(tmp_path / "h200", PROBLEMS[:1], meta=make_meta(spec=H200))
    with pytest.raises(ValueError, match="cannot merge.*device.name"):
        merge([tmp_path / "s1", tmp_path / "h200"], tmp_path / "other")
    with pytest.raises(ValueError, match="device.name.*merge into another directory \\(another --into") as refused:
        merge([tmp_path / "h200"], tmp_path / "all")
    assert "--new-dataset" not in str(refused.value) and "--out" not in str(refused.value)  # collect's options
    with pytest.raises(ValueError, match="both a source and the destination"):
        merge([tmp_path / "s1"], tmp_path / "s1")


def test_merge_conflict_into_a_new_destination_names_both_sources(tmp_path):
    # The copy of the first source's measurement sits in a directory built beside the destination, removed when the
    # merge is refused: the refusal names the source file it came from, which the user can act on
    s1 = fill(tmp_path / "s1", PROBLEMS[:1])
    s2 = fill(tmp_path / "s2", PROBLEMS[:1], scale=2.0)
    pid = problem_id(PROBLEMS[0])
    with pytest.raises(ValueError, match="measured twice") as refused:
        merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert f"in {s2.parts()[pid]} and in {s1.parts()[pid]}." in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1", "s2"]  # nothing left behind


def test_merge_refuses_to_mix_a_config_subset_trial_with_a_full_dataset(tmp_path):
    fill(tmp_path / "full", PROBLEMS[:1])
    fill(tmp_path / "trial", PROBLEMS[1:2], meta=make_meta(configs="sample:3:seed0"))
    with pytest.raises(ValueError, match="configs: 'all' != 'sample:3:seed0'.*do not mix"):
        merge([tmp_path / "trial"], tmp_path / "full")
    with pytest.raises(ValueError, match="cannot merge.*configs"):
        merge([tmp_path / "full", tmp_path / "trial"], tmp_path / "both")
    assert DatasetStore.load(tmp_path / "full").done_problems() == {problem_id(PROBLEMS[0])}  # nothing written
    assert info(tmp_path / "trial")["datasets"][0]["config_subset"] == "sample:3:seed0"
    assert info(tmp_path / "full")["datasets"][0]["config_subset"] is None


def test_merge_copies_retimes(tmp_path):
    a = fill(tmp_path / "a", PROBLEMS[:2])
    a.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3))
    a.write_retime(PROBLEMS[1], retimed_table(PROBLEMS[1]), make_meta(timing_version=3), kind="refine")
    a.write_retime(PROBLEMS[1], retimed_table(PROBLEMS[1]), make_meta(timing_version=3), kind="polish")
    fill(tmp_path / "b", PROBLEMS[1:])
    out = merge([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    assert out["retimes_copied"] == out["refines_copied"] == out["polishes_copied"] == 1 and out["problems"] == 3
    key = ["problem_id", "config_id"]
    merged = DatasetStore.load(tmp_path / "m").read().sort_values(key).reset_index(drop=True)
    mine = a.read().sort_values(key).reset_index(drop=True)
    assert merged[merged.problem_id.isin(mine.problem_id)].reset_index(drop=True).equals(mine)  # a's retime applies
    again = merge([tmp_path / "a"], tmp_path / "m")
    assert again["retimes_copied"] == again["refines_copied"] == 0  # identical: skipped
    assert {p.name.split("-")[1] for p in (tmp_path / "m").glob("[rp][eo]*-*.parquet")} == {"pack"}  # copies packed
    a.pack()  # a packed source merges the same
    assert merge([tmp_path / "a"], tmp_path / "m2")["retimes_copied"] == 1
    assert DatasetStore.load(tmp_path / "m2").read().sort_values(key).reset_index(drop=True).equals(mine)


def test_merge_finished_copies_only_the_problems_whose_passes_are_done(tmp_path):
    a = fill(tmp_path / "a", PROBLEMS)
    for kind in ("refine", "polish"):  # problem 0 has both passes, problem 1 only the refine, problem 2 neither
        a.write_retime(PROBLEMS[0], retimed_table(PROBLEMS[0]), make_meta(timing_version=3), kind=kind)
    a.write_retime(PROBLEMS[1], retimed_table(PROBLEMS[1]), make_meta(timing_version=3), kind="refine")
    out = merge([tmp_path / "a"], tmp_path / "m", finished=("refine", "polish"))
    assert (out["copied"], out["refines_copied"], out["polishes_copied"], out["left_unfinished"]) == (1, 1, 1, 2)
    m = DatasetStore.load(tmp_path / "m")
    assert m.done_problems() == {problem_id(PROBLEMS[0])} and set(m.retimes("refine")) == m.done_problems()
    a.write_retime(PROBLEMS[1], retimed_table(PROBLEMS[1]), make_meta(timing_version=3), kind="polish")
    again = merge([tmp_path / "a"], tmp_path / "m", finished=("refine", "polish"))  # after the pass: the rest
    assert (again["copied"], again["duplicates_skipped"], again["left_unfinished"]) == (1, 1, 1)
    assert merge([tmp_path / "a"], tmp_path / "m")["copied"] == 1  # without the filter: all of them
    with pytest.raises(ValueError, match="expected passes among"):
        merge([tmp_path / "a"], tmp_path / "m3", finished=("refined",))


def test_merge_reads_a_packed_source(tmp_path):
    fill(tmp_path / "a").pack_parts()
    out = merge([tmp_path / "a"], tmp_path / "m")
    assert out["copied"] == 3 and len(DatasetStore.load(tmp_path / "m").read()) == 9
    assert [p.name[:10] for p in (tmp_path / "m").glob("part-*.parquet")] == ["part-pack-"]  # the copies packed
    assert info(tmp_path / "a")["problems"] == 3


def test_the_rerun_of_a_merge_killed_before_its_pack_packs_the_copies(tmp_path, monkeypatch):
    """Into an existing destination (a new one is built aside and appears whole, or not at all)."""
    merge([fill(tmp_path / "b", PROBLEMS[:1]).root], tmp_path / "m")
    fill(tmp_path / "a")
    monkeypatch.setattr(DatasetStore, "pack_parts", lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):  # killed after the copies, before the pack
        merge([tmp_path / "a"], tmp_path / "m")
    monkeypatch.undo()
    assert len(list((tmp_path / "m").glob("part-[0-9a-f]*.parquet"))) == 2  # the copies, each in its own file
    assert merge([tmp_path / "a"], tmp_path / "m")["copied"] == 0  # nothing to copy again: its rerun
    assert not list((tmp_path / "m").glob("part-[0-9a-f]*.parquet"))  # and packed
    assert len(DatasetStore.load(tmp_path / "m").read()) == 9


def test_merge_keeps_both_run_logs_of_one_name(tmp_path):
    """Run logs are named by start second, host and rank: two calls can write logs of one name. Both are kept (the
    second under a numbered name) and counted; a log dest already holds is not copied again."""
    name = "20261122T000000-host-0.jsonl"
    for src, line in (("s1", '{"problem_id": "a"}\n'), ("s2", '{"problem_id": "b"}\n')):
        fill(tmp_path / src, PROBLEMS[:1])
        (tmp_path / src / "runs").mkdir()
        (tmp_path / src / "runs" / name).write_text(line)
    out = merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert (out["run_logs_copied"], out["run_logs_renamed"]) == (2, 1)
    logs = {p.name: p.read_text() for p in (tmp_path / "all" / "runs").glob("*.jsonl")}
    assert logs == {name: '{"problem_id": "a"}\n', "20261122T000000-host-0.1.jsonl": '{"problem_id": "b"}\n'}
    again = merge([tmp_path / "s2", tmp_path / "s1"], tmp_path / "all")
    assert (again["run_logs_copied"], again["run_logs_renamed"]) == (0, 0)


def test_a_pass_measured_twice_with_different_rows_is_refused(tmp_path):
    """Two sources whose same problem had the same pass with other figures: two measurements of one thing, refused
    naming both files, as for parts; identical ones are one measurement copied once."""
    from autoheur.collect.schema import rows_for
    from autoheur.collect.timing import Timing

    from .test_store import CONFIGS, WHEN

    for name, ms in (("a", 0.08), ("b", 0.09)):
        fill(tmp_path / name, PROBLEMS[:1]).write_retime(
            PROBLEMS[0], rows_for(PROBLEMS[0], [(CONFIGS[0], "ok", Timing(ms, 0.02, 5, False))], collected_at=WHEN),
            make_meta(timing_version=3), kind="refine",
        )  # fmt: skip
    assert merge([tmp_path / "a"], tmp_path / "m")["refines_copied"] == 1
    with pytest.raises(ValueError, match="had a refine pass twice, with different rows"):
        merge([tmp_path / "b"], tmp_path / "m")


def test_a_merge_into_a_new_destination_removes_what_a_killed_one_left_beside_it(tmp_path):
    """A new destination is built in `.<name>.merging-<pid>` beside it; a merge killed there (no `finally` runs on a
    SIGKILL) left that copy for good. The next merge into that destination removes a dead process's; a live one's
    stays."""
    fill(tmp_path / "a", PROBLEMS[:1])
    dead = tmp_path / ".new.merging-999999999"  # no such process
    live = tmp_path / f".new.merging-{os.getppid()}"  # a live process (this one's parent)
    for d in (dead, live):
        d.mkdir()
        (d / "part-0000000000000000.parquet").write_bytes(b"half a copy")
    assert merge([tmp_path / "a"], tmp_path / "new")["problems"] == 1
    assert not dead.exists() and live.exists()


def test_a_merge_that_fails_leaves_no_new_destination(tmp_path):
    """A source found corrupt half-way (its parts are read as they are copied): a new destination is built beside and
    renamed into place only when whole, so nothing is left that a later `train --data` would take for the merge."""
    fill(tmp_path / "good", PROBLEMS[:2])
    bad = fill(tmp_path / "bad", PROBLEMS[2:])
    part = next(iter(bad.parts().values()))
    part.write_bytes(part.read_bytes()[:100])  # cut short
    with pytest.raises(ValueError):
        merge([tmp_path / "good", tmp_path / "bad"], tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "good"]  # no "new", no half-built one beside it
    (tmp_path / "empty").mkdir()  # an empty directory is a new destination too
    assert merge([tmp_path / "good"], tmp_path / "empty")["problems"] == 2
    assert DatasetStore.load(tmp_path / "empty").done_problems() == {problem_id(p) for p in PROBLEMS[:2]}
    # a directory holding only a writer lock (left by a collection or pass refused before it wrote) is as empty
    from autoheur.collect.store import WRITER_LOCK, one_writer

    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / WRITER_LOCK).touch()
    with pytest.raises(ValueError):
        merge([tmp_path / "good", tmp_path / "bad"], tmp_path / "locked")
    assert [p.name for p in (tmp_path / "locked").iterdir()] == [WRITER_LOCK]  # not half a merge
    with one_writer(tmp_path / "locked"):  # a collection started into it: an empty destination is locked too
        with pytest.raises(ValueError, match="is writing into"):
            merge([tmp_path / "good"], tmp_path / "locked")
    assert merge([tmp_path / "good"], tmp_path / "locked")["problems"] == 2


def test_a_manifest_of_another_schema_version_is_refused_by_name(tmp_path):
    import json

    fill(tmp_path / "ds", PROBLEMS[:1])
    manifest = tmp_path / "ds" / "dataset.json"
    record = json.loads(manifest.read_text())
    record["metadata"]["schema_version"] = 99
    record["metadata"]["a_field_of_version_99"] = 1  # read by version first: not "unknown metadata fields"
    manifest.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"dataset.json says schema version 99, and this autoheur reads version 1"):
        DatasetStore.load(tmp_path / "ds")
    with pytest.raises(ValueError, match="says schema version 99"):
        merge([tmp_path / "ds"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_merge_into_the_working_directory_or_a_link_to_an_empty_one(tmp_path, monkeypatch):
    fill(tmp_path / "src", PROBLEMS[:1])
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert merge([tmp_path / "src"], Path("."))["problems"] == 1
    assert DatasetStore.load(tmp_path / "here").done_problems() == {problem_id(PROBLEMS[0])}
    assert DatasetStore.load(Path(".")).done_problems()  # filled in place: the working directory is still the one
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    assert merge([tmp_path / "src"], tmp_path / "link")["problems"] == 1
    assert (tmp_path / "link").is_symlink() and DatasetStore.load(tmp_path / "empty").done_problems()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing half-built left


def test_a_destination_holding_only_a_killed_runs_temp_file_is_a_new_one(tmp_path):
    """A collection killed writing the manifest leaves its lock and a temp file, and nothing a dataset holds: the
    merge into it is built beside and moved in when whole, as into an empty directory, not half-filled when refused."""
    from autoheur.collect.store import WRITER_LOCK

    fill(tmp_path / "good", PROBLEMS[:2])
    bad = fill(tmp_path / "bad", PROBLEMS[2:])
    part = next(iter(bad.parts().values()))
    part.write_bytes(part.read_bytes()[:100])  # cut short
    dest = tmp_path / "killed"
    dest.mkdir()
    (dest / WRITER_LOCK).touch()
    (dest / ".tmp-999999999-0123abcd.json").write_text("{")  # no such pid: a killed run's
    with pytest.raises(ValueError):
        merge([tmp_path / "good", tmp_path / "bad"], dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted([".tmp-999999999-0123abcd.json", WRITER_LOCK])
    assert merge([tmp_path / "good"], dest)["problems"] == 2


@pytest.mark.parametrize("still_writing", [True, False])
def test_a_new_destination_made_by_another_run_during_the_merge_is_not_filled(tmp_path, monkeypatch, still_writing):
    """A destination missing when the merge starts is built beside: one a collection made meanwhile (still writing,
    or done) was filled with the merge's files beside the collection's, not refused."""
    from autoheur.collect import merge as merge_mod
    from autoheur.collect.store import one_writer

    fill(tmp_path / "good", PROBLEMS[:2])
    dest = tmp_path / "new"
    real, held = merge_mod._copy_run_logs, []

    def meanwhile(src, out):  # a collection starts into the destination while the merge builds it
        if not held:
            lock = one_writer(dest)
            lock.__enter__()
            held.append(lock)
            fill(dest, PROBLEMS[2:3])
            if not still_writing:
                lock.__exit__(None, None, None)
        return real(src, out)

    monkeypatch.setattr(merge_mod, "_copy_run_logs", meanwhile)
    with pytest.raises(ValueError, match="is writing into" if still_writing else "another run wrote into"):
        merge([tmp_path / "good"], dest)
    if still_writing:
        held[0].__exit__(None, None, None)
    assert DatasetStore.load(dest).done_problems() == {problem_id(PROBLEMS[2])}  # the collection's alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good", "new"]  # nothing half-built left beside
