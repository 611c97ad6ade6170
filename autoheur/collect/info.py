"""`autoheur data info`: rows, problems, devices, statuses and the timing spread of one dataset or of every one under
a directory, read file by file in Arrow."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autoheur.collect.schema import STATUSES
from autoheur.collect.store import MANIFEST, PAST, RETIME_KINDS, DatasetStore, _reading


def info(root: Path) -> dict:
    """Summary of a dataset directory, or of every dataset directly under `root` (e.g. `data/`)."""
    root = Path(root)
    try:
        one = (root / MANIFEST).exists()
    except OSError as exc:  # a directory this user may not read
        raise ValueError(f"{root} cannot be read ({exc.strerror or exc}): give a dataset this user can read") from None
    roots = (
        [root]
        if one
        else sorted(
            p.parent
            for p in root.glob(f"*/{MANIFEST}")
            if not p.parent.name.startswith(".")  # a merge's half-built one
        )
    )
    if not roots:
        raise ValueError(f"no dataset at {root} (no {MANIFEST} there or in its subdirectories)")
    cols = ["problem_id", "layout", "dtype", "config_id", "status", "median_ms"]
    # Each dataset is summarized file by file in Arrow, from those six columns only: one pandas frame of every shipped
    # dataset took `data info data` 345.8 s on a 2-core host at stop 52, one frame per dataset 213.0 s; at stop 73 the
    # 38 M shipped rows took 92 s that way (most of the README test), of which reading every column was a third.
    datasets: list[dict] = []
    status: Counter = Counter()
    layouts: Counter = Counter()
    dtypes: Counter = Counter()
    configs: set[tuple[str, str]] = set()  # (family, config id): two families' spaces are distinct
    spreads: list[tuple[float, float, float]] = []  # per (dataset, problem) with an ok time
    for r in roots:
        store = DatasetStore.load(r)
        rows = problems = 0
        index, parts = store._read_index(True, cols)
        for pids, tables in store._file_tables(cols, index, parts):
            table = pa.concat_tables(tables)
            rows += table.num_rows
            problems += len(pids)
            status.update(dict(zip(*_counts(table.column("status")), strict=True)))
            configs.update((store.meta.family, c) for c in pc.unique(table.column("config_id")).to_pylist())
            for t in tables:
                if t.num_rows:
                    layouts[t.column("layout")[0].as_py()] += 1
                    dtypes[t.column("dtype")[0].as_py()] += 1
                spread = _problem_spread(t)
                if spread is not None:
                    spreads.append(spread)
        datasets.append(
            {
                "path": str(r),
                "device": store.meta.device_name,
                "family": store.meta.family,
                "config_subset": None if store.meta.configs == "all" else store.meta.configs,
                "rows": rows,
                "problems": problems,
                **{f"{PAST[kind]}_rows": _rows(store.retimes(kind).values()) for kind in RETIME_KINDS},
            }
        )
    names = ("best_ms", "median_over_best", "worst_over_best")
    spread = np.array(spreads, dtype=np.float64).reshape(-1, len(names))
    return {
        "datasets": datasets,
        "devices": sorted({d["device"] for d in datasets}),
        "rows": sum(d["rows"] for d in datasets),
        "problems": sum(d["problems"] for d in datasets),
        "configs": len(configs),
        "status": {s: int(status[s]) for s in STATUSES if status[s]},
        "layouts": {str(k): int(v) for k, v in sorted(layouts.items())},
        "dtypes": {str(k): int(v) for k, v in sorted(dtypes.items())},
        "timing": {} if not len(spread) else {n: _quantiles(spread[:, i]) for i, n in enumerate(names)},
    }


def _counts(column: pa.ChunkedArray) -> tuple[list, list]:
    """(values, counts) of a column."""
    vc = pc.value_counts(column)
    return vc.field("values").to_pylist(), vc.field("counts").to_pylist()


def _problem_spread(table: pa.Table) -> tuple[float, float, float] | None:
    """One problem's best ok time, and median / worst over its timed configs (censored ones are lower bounds) vs
    best; None without an ok time. NaN times are left out, as pandas' reductions leave them."""
    status = table.column("status").to_numpy(zero_copy_only=False)
    ms = table.column("median_ms").to_numpy(zero_copy_only=False).astype(np.float64)
    ok = ms[(status == "ok") & ~np.isnan(ms)]
    timed = ms[np.isin(status, ("ok", "censored")) & ~np.isnan(ms)]
    if not len(ok):
        return None
    best = float(ok.min())
    return best, float(np.median(timed)) / best, float(timed.max()) / best


def _quantiles(values: np.ndarray) -> dict:
    """min / p10 / p50 / p90 / max of the values that are not NaN (linearly interpolated, as pandas' quantile)."""
    v = values[~np.isnan(values)]
    if not len(v):
        return dict.fromkeys(("min", "p10", "p50", "p90", "max"), float("nan"))
    q = np.quantile(v, [0.0, 0.1, 0.5, 0.9, 1.0])
    return dict(zip(("min", "p10", "p50", "p90", "max"), map(float, q), strict=True))


def format_info(d: dict) -> str:
    """`info` as text for the terminal."""
    lines = [f"{d['rows']} rows, {d['problems']} problems, {d['configs']} configs, devices: {', '.join(d['devices'])}"]
    for ds in d["datasets"]:
        family = "" if ds.get("family", "triton") == "triton" else f" ({ds['family']} family)"
        again = [f"{ds[f'{PAST[k]}_rows']} {PAST[k]}" for k in RETIME_KINDS if ds.get(f"{PAST[k]}_rows")]
        retimed = f" ({', '.join(again)})" if again else ""
        subset = f", a trial over a config subset ({ds['config_subset']})" if ds.get("config_subset") else ""
        lines.append(
            f"  {ds['path']}: {ds['device']}{family}, {ds['problems']} problems, {ds['rows']} rows{retimed}{subset}"
        )
    total = max(d["rows"], 1)
    lines.append("status:  " + "  ".join(f"{k} {v} ({100 * v / total:.1f}%)" for k, v in d["status"].items()))
    lines.append("layouts: " + "  ".join(f"{k} {v}" for k, v in d["layouts"].items()))
    lines.append("dtypes:  " + "  ".join(f"{k} {v}" for k, v in d["dtypes"].items()))
    if d["timing"]:
        lines.append("per problem (min / p10 / p50 / p90 / max over problems):")
        for name, q in d["timing"].items():
            lines.append(f"  {name:16s} " + " / ".join(f"{v:.4g}" for v in q.values()))
    return "\n".join(lines)


def _rows(paths) -> int:
    """Rows in a set of Parquet files (a pack listed once however many problems it holds)."""
    total = 0
    for p in set(paths):
        with _reading(p):  # a damaged file: named, with what to do
            total += pq.ParquetFile(p).metadata.num_rows
    return total
