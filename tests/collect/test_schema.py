"""The dataset schema: problem ids, rows, metadata and validation (CPU, no kernel: timings are made up)."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autoheur.collect.schema import (
    COLUMNS,
    METADATA_KEY,
    SCHEMA,
    SCHEMA_VERSION,
    Metadata,
    device_fingerprint,
    problem_columns,
    problem_from_row,
    problem_id,
    rows_for,
    validate_table,
    with_metadata,
)
from autoheur.collect.timing import Timing
from autoheur.device import H100_SXM, H200
from autoheur.kernels.config import SPACE_HASH, KernelConfig
from autoheur.problem import Problem

PROBLEM = Problem("2d3d", 4, (100, 0, 300, 28), 0, 512, 256, name="toy-moe")
CONFIGS = [
    KernelConfig(64, 128, 64, 3, 4),
    KernelConfig(128, 128, 64, 4, 8, 8, "tma", True),
    KernelConfig(16, 32, 32, 2, 2),
    KernelConfig(256, 256, 256, 5, 8),
]


def make_meta(**device_overrides) -> Metadata:
    fp = device_fingerprint(
        H100_SXM,
        copy_GBps=3000.0,
        matmul_TFLOPs=700.0,
        clocks={"sm_mhz": 1980, "mem_mhz": 2619},
        driver="570.86",
        versions={"torch": "2.13.0", "triton": "3.6.0", "cuda": "13.0"},
    )
    return Metadata(device={**fp, **device_overrides}, kernel_hash="k0")


def make_results():
    return [
        (CONFIGS[0], "ok", Timing(0.120, 0.02, 5, False)),
        (CONFIGS[1], "ok", Timing(0.900, 0.0, 1, True)),
        (CONFIGS[2], "wrong", None),
        (CONFIGS[3], "out_of_resources", None),
    ]


def test_problem_id_is_stable_and_ignores_name():
    assert problem_id(PROBLEM) == "9a40423b68634f08"  # a golden value: the id must not change between runs
    assert problem_id(dataclasses.replace(PROBLEM, name="other")) == problem_id(PROBLEM)
    assert problem_id(dataclasses.replace(PROBLEM, sizes=(100, 0, 299, 29))) != problem_id(PROBLEM)
    assert problem_id(dataclasses.replace(PROBLEM, b_major="n")) != problem_id(PROBLEM)
    assert len(problem_id(Problem("3d3d", 2, (), 64, 64, 64))) == 16


def test_rows_for_fills_every_column():
    table = rows_for(PROBLEM, make_results())
    assert table.schema.equals(SCHEMA) and table.num_rows == 4
    rows = table.to_pylist()
    assert [r["status"] for r in rows] == ["ok", "censored", "wrong", "out_of_resources"]
    r0 = rows[0]
    assert (r0["total"], r0["groups"], r0["empty_groups"], r0["size_max"], r0["size_min"]) == (428, 4, 1, 300, 0)
    assert r0["size_mean"] == pytest.approx(107.0) and r0["size_std"] > 0
    assert r0["sizes"] == [100, 0, 300, 28] and r0["problem_name"] == "toy-moe"
    assert KernelConfig.from_id(rows[1]["config_id"]) == CONFIGS[1] and rows[1]["warp_specialize"] is True
    assert rows[1]["censored"] and rows[1]["median_ms"] == 0.9
    assert math.isnan(rows[2]["median_ms"]) and rows[2]["reps"] == 0 and not rows[2]["censored"]
    rebuilt = problem_from_row(r0)
    assert rebuilt == PROBLEM and rebuilt.name == PROBLEM.name and problem_id(rebuilt) == r0["problem_id"]


def test_rows_for_batched_layout():
    p = Problem("3d3d", 3, (), 128, 64, 32)
    row = rows_for(p, [(CONFIGS[0], "ok", Timing(0.01, 0.0, 3, False))]).to_pylist()[0]
    assert row["sizes"] == [] and row["total"] == 0 and row["size_mean"] == 128.0 and row["empty_groups"] == 0
    assert problem_from_row(row) == p


def test_batched_size_statistics_are_every_batch_s_without_a_list_per_batch(small_memory):
    """Every batch of a 3d3d problem is M: its statistics are those of the list of M per batch that they were computed
    over, and a problem of 2**31 batches (a 16 GiB list: under a 1 GiB cap, MemoryError) needs none."""
    stats = ("size_mean", "size_max", "size_min", "size_std", "empty_groups", "sizes")
    for groups, m in ((1, 1), (3, 128), (1000, 4097)):
        per = [m] * groups
        old = (statistics.fmean(per), max(per), min(per), statistics.pstdev(per), 0, [])
        new = tuple(problem_columns(Problem("3d3d", groups, (), m, 64, 32))[c] for c in stats)
        assert new == old and [type(v) for v in new] == [type(v) for v in old]
    big = Problem("3d3d", 2**31 - 1, (), 4097, 8, 8)
    cols, peak = small_memory(lambda: problem_columns(big))
    assert tuple(cols[c] for c in stats) == (4097.0, 4097, 4097, 0.0, 0, []) and peak < 2**20


@pytest.mark.parametrize(
    "results, message",
    [
        ([(CONFIGS[0], "fast", None)], "is not one of"),
        ([(CONFIGS[0], "ok", None)], "needs a Timing"),
        ([(CONFIGS[0], "crashed", Timing(1.0, 0.0, 1, False))], "pass None"),
        ([(CONFIGS[0], "censored", Timing(1.0, 0.0, 5, False))], "uncensored"),
        ([(CONFIGS[0], "wrong", None), (CONFIGS[0], "invalid", None)], "appears twice"),
    ],
)
def test_rows_for_rejects_bad_results(results, message):
    with pytest.raises(ValueError, match=message):
        rows_for(PROBLEM, results)


def test_parquet_round_trip(tmp_path):
    meta = make_meta()
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    table = with_metadata(rows_for(PROBLEM, make_results(), collected_at=when), meta)
    pq.write_table(table, tmp_path / "t.parquet", compression="zstd")
    back = pq.read_table(tmp_path / "t.parquet")
    assert validate_table(back) == meta
    pd.testing.assert_frame_equal(back.to_pandas(), table.to_pandas(), check_exact=True)
    assert back.column("collected_at").to_pylist()[0] == when


def test_metadata_round_trip_and_compatibility():
    meta = make_meta()
    assert Metadata.from_parquet_metadata(meta.to_parquet_metadata()) == meta
    assert Metadata.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta
    assert meta.space_hash == SPACE_HASH and meta.schema_version == SCHEMA_VERSION
    noisy = make_meta(copy_GBps=2900.0, matmul_TFLOPs=650.0, clocks={"sm_mhz": 1755})
    assert meta.mismatches(noisy) == []  # measured values are noise
    other = make_meta(**{k: v for k, v in H200.to_dict().items()}, torch="2.12.0")
    diff = meta.mismatches(other)
    assert any(d.startswith("device.name") for d in diff) and any(d.startswith("device.torch") for d in diff)
    assert any("space_hash" in d for d in meta.mismatches(dataclasses.replace(meta, space_hash="0" * 16)))
    with pytest.raises(ValueError, match="lacks"):
        Metadata(device=H100_SXM.to_dict())


def test_metadata_records_the_config_subset_and_old_datasets_cover_the_space():
    """`configs`: a dataset's metadata says what of each problem's space its rows cover. The shipped datasets, written
    before the field, read as the whole space; a trial and a full collection (or two trials) are not comparable."""
    meta = make_meta()
    old = meta.to_dict()
    assert "configs" not in old  # written only for a trial: a full-space dataset reads in an autoheur before it
    assert meta.configs == "all" and Metadata.from_dict(old) == meta
    trial = dataclasses.replace(meta, configs="sample:3:seed5")
    assert trial.to_dict()["configs"] == "sample:3:seed5"
    assert Metadata.from_parquet_metadata(trial.to_parquet_metadata()) == trial
    (diff,) = meta.mismatches(trial)
    assert diff.startswith("configs: 'all' != 'sample:3:seed5'") and "do not mix" in diff
    assert trial.mismatches(dataclasses.replace(meta, configs="sample:3:seed5")) == []


def _corrupt(kind: str) -> pa.Table:
    meta = make_meta()
    t = with_metadata(rows_for(PROBLEM, make_results()), meta)
    if kind == "missing column":
        return t.drop_columns(["spread"])
    if kind == "extra column":
        return t.append_column("gpu_temp", pa.array([1.0] * t.num_rows))
    if kind == "order":
        return t.select(list(reversed(COLUMNS)))
    if kind == "type":
        i = t.schema.get_field_index("reps")
        return t.set_column(i, "reps", t.column("reps").cast(pa.int64()))
    if kind == "status":
        i = t.schema.get_field_index("status")
        return t.set_column(i, "status", pa.array(["ok", "ok", "broken", "wrong"]))
    if kind == "duplicate":
        return pa.concat_tables([t, t])
    if kind == "no metadata":
        return t.replace_schema_metadata(None)
    if kind == "version":
        return with_metadata(t, dataclasses.replace(meta, schema_version=SCHEMA_VERSION + 1))
    if kind in BAD_TIMES:  # an ok row (0) or a censored one (1) with a time no measurement gives: a garbled file
        row, ms = BAD_TIMES[kind]
        times = t.column("median_ms").to_pylist()
        times[row] = ms
        return t.set_column(t.schema.get_field_index("median_ms"), "median_ms", pa.array(times, pa.float64()))
    raise AssertionError(kind)


BAD_TIMES = {"negative time": (0, -1.1e260), "zero time": (0, 0.0), "NaN time": (0, math.nan),
             "infinite time": (1, math.inf), "null time": (1, None)}  # fmt: skip


@pytest.mark.parametrize(
    "kind, message",
    [
        ("missing column", r"missing \['spread'\].*--new-dataset"),
        ("extra column", r"extra \['gpu_temp'\]"),
        ("order", "out of order"),
        ("type", r"reps: int64 \(expected int32\)"),
        ("status", r"unknown status values \['broken'\]"),
        ("duplicate", "duplicate"),
        ("no metadata", "no autoheur metadata.*re-collect"),
        ("version", f"schema version {SCHEMA_VERSION + 1}, this autoheur reads {SCHEMA_VERSION}.*--new-dataset"),
    ],
)
def test_validate_table_rejects_corruption(kind, message):
    with pytest.raises(ValueError, match=message):
        validate_table(_corrupt(kind))


@pytest.mark.parametrize("kind", list(BAD_TIMES))
def test_validate_table_rejects_a_timed_row_without_a_positive_finite_time(kind):
    """Garbled bytes in a file without page checksums can decode as a time of -1e260, which read as the oracle; an
    untimed row's NaN (the other two rows here) is no such time."""
    with pytest.raises(ValueError, match=r"1 timed rows .* not a positive finite time .*corrupt; restore it from git"):
        validate_table(_corrupt(kind))
    assert validate_table(_corrupt("no metadata"), require_metadata=False) is None  # the rows as made: NaN untimed


def test_validate_table_without_metadata_when_allowed():
    table = rows_for(PROBLEM, make_results())
    assert METADATA_KEY not in (table.schema.metadata or {})
    assert validate_table(table, require_metadata=False) is None
