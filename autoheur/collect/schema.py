"""The one definition of the collected dataset: columns, their Arrow types, the metadata record, and validation.

One row per (problem, config). A row carries the problem's key, its features and its exact sizes (so the `Problem`
can be rebuilt), the config's fields, the timing figures and a status. Failed and aborted configs are rows with a
status, not silence. The metadata (device fingerprint, versions, config-space hash, kernel hash, schema version)
travels with every Parquet file as key-value metadata under b"autoheur" and is checked on read: timings measured
under a different device, toolchain, space or kernel must never be mixed silently.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from autoheur.collect.timing import Timing
from autoheur.device import DeviceSpec
from autoheur.kernels.config import SPACE_HASH, KernelConfig
from autoheur.problem import Problem

# Bump whenever a column is added, removed, renamed, retyped or changes meaning.
SCHEMA_VERSION = 1
METADATA_KEY = b"autoheur"
HINT = "re-collect with this version of autoheur, or run with --new-dataset (or another --out) to start a new dataset"

# "censored": timed once and aborted as hopeless (median_ms is a lower bound). The rest come from precompile.
STATUSES = ("ok", "censored", "invalid", "compile_error", "out_of_resources", "wrong", "crashed")
TIMED_STATUSES = ("ok", "censored")

SCHEMA = pa.schema(
    [
        # problem key and features
        ("problem_id", pa.string()),
        ("problem_name", pa.string()),
        ("layout", pa.string()),
        ("dtype", pa.string()),
        ("a_major", pa.string()),
        ("b_major", pa.string()),
        ("groups", pa.int32()),
        ("total", pa.int64()),  # the ragged total, sum(sizes); 0 for the batched layout
        ("m", pa.int64()),
        ("n", pa.int64()),
        ("k", pa.int64()),
        ("size_mean", pa.float64()),
        ("size_max", pa.int64()),
        ("size_min", pa.int64()),
        ("size_std", pa.float64()),
        ("empty_groups", pa.int32()),
        ("sizes", pa.list_(pa.int32())),
        # config
        ("config_id", pa.string()),
        ("block_m", pa.int32()),
        ("block_n", pa.int32()),
        ("block_k", pa.int32()),
        ("num_stages", pa.int32()),
        ("num_warps", pa.int32()),
        ("group_m", pa.int32()),
        ("load", pa.string()),
        ("warp_specialize", pa.bool_()),
        # outcome
        ("median_ms", pa.float64()),  # NaN when not timed
        ("spread", pa.float64()),  # (p75 - p25) / median; NaN when not timed
        ("reps", pa.int32()),  # 0 when not timed
        ("censored", pa.bool_()),
        ("status", pa.string()),
        ("collected_at", pa.timestamp("us", tz="UTC")),
    ]
)
COLUMNS = tuple(SCHEMA.names)
PROBLEM_FIELDS = ("layout", "groups", "sizes", "m", "n", "k", "dtype", "b_major", "a_major")
CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(KernelConfig))
NOT_NULL = ("problem_id", "config_id", "status", "layout", "dtype")

# Device fingerprint: the DeviceSpec fields plus what was measured and the toolchain that measured it.
MEASURED_KEYS = ("copy_GBps", "matmul_TFLOPs", "clocks")  # noise: may differ between runs of one dataset
VERSION_KEYS = ("driver", "torch", "triton", "cuda")  # change timings: must match
DEVICE_KEYS = tuple(f.name for f in dataclasses.fields(DeviceSpec))  # decide feasibility: must match
FINGERPRINT_KEYS = DEVICE_KEYS + MEASURED_KEYS + VERSION_KEYS


def problem_id(problem: Problem) -> str:
    """Stable key of a problem: sha256 of its canonical fields (not `name`, a label), 16 hex digits."""
    canon = {f: getattr(problem, f) for f in PROBLEM_FIELDS}
    canon["sizes"] = [int(s) for s in problem.sizes]
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def problem_from_row(row: Mapping) -> Problem:
    """Rebuild the exact `Problem` of a row (a dict or a pandas row)."""
    return Problem(
        layout=str(row["layout"]),
        groups=int(row["groups"]),
        sizes=tuple(int(s) for s in row["sizes"]),
        m=int(row["m"]),
        n=int(row["n"]),
        k=int(row["k"]),
        dtype=str(row["dtype"]),
        b_major=str(row["b_major"]),
        a_major=str(row["a_major"]),
        name=str(row["problem_name"] or ""),
    )


def problem_columns(problem: Problem) -> dict:
    """The problem part of a row. Size statistics are over the per-group ragged extents (M for batched)."""
    if problem.sizes:
        sizes = problem.sizes
        stats = statistics.fmean(sizes), max(sizes), min(sizes), statistics.pstdev(sizes)
    else:  # batched: every batch is M, so the statistics are one batch's (a list of M per batch took 16 GiB at 2**31)
        stats = float(problem.m), problem.m, problem.m, 0.0
    size_mean, size_max, size_min, size_std = stats
    return dict(
        problem_id=problem_id(problem),
        problem_name=problem.name,
        layout=problem.layout,
        dtype=problem.dtype,
        a_major=problem.a_major,
        b_major=problem.b_major,
        groups=problem.groups,
        total=problem.total,
        m=problem.m,
        n=problem.n,
        k=problem.k,
        size_mean=size_mean,
        size_max=size_max,
        size_min=size_min,
        size_std=size_std,
        empty_groups=sum(1 for s in problem.sizes if s == 0),
        sizes=list(problem.sizes),
    )


def rows_for(
    problem: Problem,
    results: Sequence[tuple[KernelConfig, str, Timing | None]],
    collected_at: datetime | None = None,
) -> pa.Table:
    """One row per (config, status, timing) of `problem`; timed statuses need a Timing, the others must have none.

    A Timing with censored=True turns status "ok" into "censored", so callers may pass the compile status as is.
    """
    when = collected_at or datetime.now(timezone.utc)
    base = problem_columns(problem)
    rows, seen = [], set()
    for cfg, status, timing in results:
        if status not in STATUSES:
            raise ValueError(f"config {cfg.config_id}: status {status!r} is not one of {STATUSES}")
        if cfg.config_id in seen:
            raise ValueError(f"config {cfg.config_id} appears twice in the results of one problem")
        seen.add(cfg.config_id)
        if status in TIMED_STATUSES:
            if timing is None:
                raise ValueError(f"config {cfg.config_id}: status {status!r} needs a Timing")
            if status == "censored" and not timing.censored:
                raise ValueError(f"config {cfg.config_id}: status 'censored' with an uncensored Timing")
            status = "censored" if timing.censored else "ok"
            figures = dict(median_ms=timing.median_ms, spread=timing.spread, reps=timing.reps, censored=timing.censored)
        else:
            if timing is not None:
                raise ValueError(f"config {cfg.config_id}: status {status!r} was not timed, pass None for its Timing")
            figures = dict(median_ms=math.nan, spread=math.nan, reps=0, censored=False)
        rows.append(
            {**base, "config_id": cfg.config_id, **cfg.to_dict(), **figures, "status": status, "collected_at": when}
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()


def device_fingerprint(
    spec: DeviceSpec,
    copy_GBps: float | None = None,
    matmul_TFLOPs: float | None = None,
    clocks: dict | None = None,
    driver: str | None = None,
    versions: dict | None = None,
) -> dict:
    """The device record of a dataset; torch/triton/cuda versions default to the installed ones."""
    return {
        **spec.to_dict(),
        "copy_GBps": copy_GBps,
        "matmul_TFLOPs": matmul_TFLOPs,
        "clocks": clocks,
        "driver": driver,
        **(versions if versions is not None else toolchain_versions()),
    }


def toolchain_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import torch

    try:
        triton = version("triton")
    except PackageNotFoundError:
        triton = None
    return {"torch": torch.__version__, "triton": triton, "cuda": torch.version.cuda}


def kernel_source_hash(path: Path | None = None) -> str:
    """sha256 of the kernel's source: timings from an edited kernel are a different dataset. The installed kernel's
    is read once per process (compile keys, tuning-cache keys and the dataset and model checks all ask for it)."""
    if path is None:
        return _installed_kernel_hash()
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@functools.cache
def _installed_kernel_hash() -> str:
    return kernel_source_hash(Path(__file__).resolve().parents[1] / "kernels" / "grouped_gemm.py")


@dataclass(frozen=True)
class Metadata:
    """What a dataset's timings depend on; stored in dataset.json and in every Parquet part."""

    device: dict
    space_hash: str = SPACE_HASH
    kernel_hash: str = ""
    schema_version: int = SCHEMA_VERSION
    timing_version: int = 1  # collect.timing.TIMING_VERSION of the run; absent in the first datasets, which were v1
    family: str = "triton"  # the kernel family timed: "triton" (autoheur's kernel) or "inductor" (Inductor's template)
    # The configs each problem's rows cover: "all" (its whole feasible space), or a trial's subset, "sample:N:seedS"
    # (`collect --sample-configs N`) or "list:<hash>" (`--configs`). Absent in datasets before stop 80: all.
    configs: str = "all"
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def __post_init__(self) -> None:
        missing = [k for k in FINGERPRINT_KEYS if k not in self.device]
        if missing:
            raise ValueError(f"device fingerprint lacks {missing}; build it with schema.device_fingerprint()")

    @property
    def device_name(self) -> str:
        return str(self.device["name"])

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if d["configs"] == "all":  # written only for a trial: a full-space dataset reads in an autoheur before stop 80
            del d["configs"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> Metadata:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown metadata fields {sorted(unknown)}: written by another autoheur version? {HINT}")
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_parquet_metadata(self) -> dict[bytes, bytes]:
        return {METADATA_KEY: json.dumps(self.to_dict(), sort_keys=True).encode()}

    @classmethod
    def from_parquet_metadata(cls, md: Mapping[bytes, bytes] | None) -> Metadata:
        if not md or METADATA_KEY not in md:
            raise ValueError(f"no autoheur metadata (key {METADATA_KEY!r}): not written by autoheur's store. {HINT}")
        return cls.from_dict(json.loads(md[METADATA_KEY]))

    def mismatches(self, other: Metadata) -> list[str]:
        """The fields that make two datasets' timings incomparable, as 'field: mine != theirs' (empty: compatible).

        Measured bandwidth, FLOP rate and clocks are noise and not compared; the DeviceSpec fields all are, since
        feasibility of configs depends on them.
        """
        out = []
        for key in DEVICE_KEYS + VERSION_KEYS:
            a, b = self.device.get(key), other.device.get(key)
            if a != b:
                out.append(f"device.{key}: {a!r} != {b!r}")
        for name in ("family", "space_hash", "kernel_hash", "schema_version", "timing_version"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: {a!r} != {b!r}")
        if self.configs != other.configs:  # a problem's oracle is the best of what was timed: subsets do not mix
            out.append(f"configs: {self.configs!r} != {other.configs!r} (a config-subset trial and a full-space "
                       "collection, or two trials of other subsets, do not mix)")  # fmt: skip
        return out


def with_metadata(table: pa.Table, meta: Metadata) -> pa.Table:
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **meta.to_parquet_metadata()})


def validate_table(table: pa.Table, require_metadata: bool = True) -> Metadata | None:
    """Check columns, types, statuses, keys and metadata; raise ValueError saying what is wrong and what to do."""
    meta = validate_schema(table.schema, require_metadata)
    validate_rows(table)
    return meta


def validate_schema(schema: pa.Schema, require_metadata: bool = True) -> Metadata | None:
    """The part of `validate_table` a file's footer answers without reading its rows: metadata, columns (all of
    them, in order) and their types."""
    md = schema.metadata
    meta = None
    if md and METADATA_KEY in md:
        meta = Metadata.from_parquet_metadata(md)
        if meta.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"dataset has schema version {meta.schema_version}, this autoheur reads {SCHEMA_VERSION}: {HINT}"
            )
    elif require_metadata:
        Metadata.from_parquet_metadata(md)  # raises, saying what is missing
    names = list(schema.names)
    missing = [c for c in COLUMNS if c not in names]
    extra = [c for c in names if c not in COLUMNS]
    if missing or extra:
        raise ValueError(
            f"dataset columns differ from schema v{SCHEMA_VERSION}: missing {missing}, extra {extra}. {HINT}"
        )
    if names != list(COLUMNS):
        raise ValueError(f"dataset columns are out of order: {names}; expected {list(COLUMNS)}. {HINT}")
    wrong = [
        f"{f.name}: {schema.field(f.name).type} (expected {f.type})"
        for f in SCHEMA
        if not schema.field(f.name).type.equals(f.type)
    ]
    if wrong:
        raise ValueError(f"dataset columns have wrong types: {'; '.join(wrong)}. {HINT}")
    return meta


def validate_rows(table: pa.Table) -> None:
    """The part of `validate_table` that reads rows: no nulls where the schema forbids them, known statuses, a
    positive finite time on every timed row, one row per (problem_id, config_id). `table` may hold a subset of the
    columns if it has `NOT_NULL`'s (the keys and status among them): a read of a few columns is checked as far as it
    goes."""
    missing = [c for c in NOT_NULL if c not in table.column_names]
    if missing:
        raise ValueError(f"cannot check rows without columns {missing}")
    nulls = [c for c in NOT_NULL if table.column(c).null_count]
    if nulls:
        raise ValueError(f"columns {nulls} hold nulls: the dataset is corrupt; delete the bad part and re-collect it")
    bad = sorted(set(table.column("status").unique().to_pylist()) - set(STATUSES))
    if bad:
        raise ValueError(f"unknown status values {bad}; allowed: {STATUSES}. {HINT}")
    _check_times(table)
    keys = table.group_by(["problem_id", "config_id"]).aggregate([([], "count_all")])
    if keys.num_rows != table.num_rows:
        raise ValueError(
            f"{table.num_rows - keys.num_rows} duplicate (problem_id, config_id) rows: the dataset is "
            "corrupt; delete the duplicated parts and re-collect them"
        )


def _check_times(table: pa.Table) -> None:
    """Refuse timed rows (ok, censored) whose median_ms is not a positive finite time. Why: bytes garbled in the
    middle of a Parquet file without page checksums can still decode, and a time of -1e260 then reads as the oracle.
    Untimed rows hold NaN, which is not checked. A read without `median_ms` is checked as far as it goes."""
    if "median_ms" not in table.column_names:
        return
    ms = table.column("median_ms")
    timed = pc.is_in(table.column("status"), value_set=pa.array(TIMED_STATUSES))
    good = pc.fill_null(pc.and_(pc.is_finite(ms), pc.greater(ms, 0.0)), False)
    bad = pc.and_(timed, pc.invert(good))
    count = pc.sum(bad).as_py() or 0
    if count:
        rows = table.filter(bad).slice(0, 3).select(["problem_id", "config_id", "median_ms"]).to_pylist()
        examples = ", ".join(f"{r['problem_id']}/{r['config_id']}: {r['median_ms']!r}" for r in rows)
        raise ValueError(
            f"{count} timed rows (status ok or censored) have a median_ms that is not a positive finite time (e.g. "
            f"{examples}): the file holding them is corrupt; restore it from git, or delete it and measure its "
            "problems again"
        )
