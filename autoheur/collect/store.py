"""An append-only, resumable dataset directory, one per device (`data/<device-slug>/`).

Layout: `dataset.json` (the manifest: the metadata the dataset was started with) and one Parquet part per problem
while a run collects, `part-<problem_id>.parquet` (packed when it ends: below), carrying the metadata of the run that
wrote it. A part is written to a hidden temp file in the same directory, fsynced, then linked into place without
clobbering, so a kill at any moment loses at most the problem in flight and can never leave a half-written part or a
duplicate. The set of parts is the set of problems done.

Retimes: a problem may also have new measurements of some of its configs, in one file per kind of pass, written the same
way: `retime-<problem_id>.parquet` (`autoheur data retime`: the configs whose runs disagreed) and
`refine-<problem_id>.parquet` (`autoheur data refine`: the near-best configs, to a tighter precision) and
`polish-<problem_id>.parquet` (`autoheur data polish`: the near-tied front after the refine, to more rounds). Parts are
never rewritten: `read` overlays a problem's retimed rows on its part's rows, the kinds in the order of `RETIME_KINDS`
(same problem and config keys; a retime's metadata may differ from the manifest in its timing protocol version only), so
the first measurement stays on disk beside the new ones. At the end of a pass its per-problem files are moved into one
`<kind>-pack-<hash>.parquet` (`DatasetStore.pack`: the same rows and metadata, plus the list of the problems it holds,
empty ones included), which saves the ~6 KB of Parquet footer each small file carries.

Parts are packed the same way (`pack_parts`): at the end of every collection run, and by `autoheur data pack` for
what a killed run left. Finished problems' parts move into `part-pack-<hash>.parquet` files, one per run metadata,
with the list of the problems each holds. One file of many problems also compresses better (the shipped H100 data's
parts: 29.8 MB, packed 13.8 MB). A packed problem is done like one with a part of its own; during a run, collection
writes parts of their own (kill safety).

One writer per directory: several machines collect into separate directories and `merge` (merge.py) combines them;
`info` (info.py) summarizes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import secrets
import stat
import warnings
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autoheur.collect.schema import (
    COLUMNS,
    METADATA_KEY,
    NOT_NULL,
    PROBLEM_FIELDS,
    SCHEMA,
    SCHEMA_VERSION,
    Metadata,
    problem_from_row,
    problem_id,
    validate_rows,
    validate_schema,
    validate_table,
)
from autoheur.collect.schema import with_metadata as _with_metadata
from autoheur.problem import Problem

MANIFEST = "dataset.json"
PART_RE = re.compile(r"part-([0-9a-f]{16})\.parquet")
RETIME_KINDS = ("retime", "refine", "polish")  # the passes that measure some configs again, in the order of reads
PAST = {"retime": "retimed", "refine": "refined", "polish": "polished"}  # info's "<past>_rows" keys
# Passes whose figures are read on the scale of the problem's earlier figures (see `align_session`)
ALIGNED_KINDS = ("polish",)
RETIME_RES = {kind: re.compile(rf"{kind}-([0-9a-f]{{16}})\.parquet") for kind in RETIME_KINDS}
PACK_RES = {kind: re.compile(rf"{kind}-pack-([0-9a-f]{{16}})\.parquet") for kind in RETIME_KINDS}
PART_PACK_RE = re.compile(r"part-pack-([0-9a-f]{16})\.parquet")
DONE_KEY = b"autoheur-done"  # a pack's metadata: the problems whose pass it holds, rows or not (JSON list)
ID_RE = re.compile(r"[0-9a-f]{16}")  # schema.problem_id
TMP_RE = re.compile(r"\.tmp-(\d+)-[0-9a-f]+\.(parquet|json)")
WRITER_LOCK = ".collect.lock"  # `one_writer`: held by whatever writes into the directory (collect, a pass, pack, merge)
NEW_HINT = "pass new=True (--new-dataset) to start a new dataset there, or use another --out"
# Parquet page checksums (CRC32 of each page), written and verified where this pyarrow has them: bytes
# garbled in the middle of a file otherwise decode as other values (a time of -1e260), since Parquet checks nothing
# below its footer. Files written without them (the shipped data) still read.
_WRITE_CHECKSUMS = (
    {"write_page_checksum": True} if "write_page_checksum" in inspect.signature(pq.write_table).parameters else {}
)
_VERIFY_CHECKSUMS = (
    {"page_checksum_verification": True}
    if "page_checksum_verification" in inspect.signature(pq.read_table).parameters
    else {}
)


class DatasetStore:
    """One dataset directory. Use `DatasetStore.open` to write, `DatasetStore.load` to read."""

    def __init__(self, root: Path, meta: Metadata):
        self.root = Path(root)
        self.meta = meta  # this run's metadata, written into each new part
        self._cache: dict[tuple, pa.Table | dict[str, pa.Table]] = {}  # the packs read: (path, mtime[, columns])
        # Per pack file (path, mtime): the problems its metadata lists, and a retime pack's rows split by problem.
        # Packs are written once, so neither goes stale; a read of every problem asked for both once per problem
        # and pass (a schema read, a filter over the whole pack), a quarter of `data info`'s time at stop 58.
        self._done: dict[tuple[Path, int], tuple[str, ...]] = {}
        self._retime_split: dict[tuple[Path, int], dict[str, pa.Table]] = {}

    # -- opening --------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, meta: Metadata, new: bool = False, hint: str = NEW_HINT) -> DatasetStore:
        """Create `root`, or resume it when its metadata is compatible with `meta`.

        new=True never deletes: an existing non-empty directory is renamed to `<root>.old-<UTC timestamp>` and a
        fresh dataset is started in its place. `hint`: what a refusal tells the caller to do instead (merge has no
        --new-dataset).
        """
        root = Path(root)
        _check_reachable(root)
        if new and root.name in ("", ".."):  # ".", "..", "/": no name to set the old one aside under, beside itself
            raise ValueError(
                f"a new dataset at {str(root)!r} would move the directory it is in aside: give the path from outside "
                "it (e.g. ../NAME), or another --out"
            )
        if new and _has_content(root):
            aside = _aside_name(root)
            root.rename(aside)
        if root.exists() and (root / MANIFEST).exists():
            stored = read_manifest(root)
            diff = stored.mismatches(meta)
            if diff:
                raise ValueError(
                    f"{root} holds a dataset whose timings are not comparable with this run ({'; '.join(diff)}); {hint}"
                )
        elif _has_content(root):
            raise ValueError(f"{root} is not empty and has no {MANIFEST}: not an autoheur dataset; {hint}")
        else:
            _make_dir(root)
            _atomic_write_bytes(root / MANIFEST, json.dumps({"metadata": meta.to_dict()}, indent=2).encode())
        store = cls(root, meta)
        store._clean_stale_temps()
        return store

    @classmethod
    def load(cls, root: Path) -> DatasetStore:
        """Open an existing dataset read-only (its manifest's metadata); touches nothing on disk."""
        return cls(Path(root), read_manifest(Path(root)))

    def _clean_stale_temps(self) -> int:
        """Remove temp files left by killed runs (their process is gone); a live writer's temp is kept. Returns how
        many were removed."""
        removed = 0
        for path in self.root.iterdir():
            m = TMP_RE.fullmatch(path.name)
            if m and not _pid_alive(int(m.group(1))):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    # -- parts ----------------------------------------------------------------------------------------------------

    def part_path(self, pid: str) -> Path:
        return self.root / f"part-{pid}.parquet"

    def parts(self) -> dict[str, Path]:
        """problem_id -> the file holding its part (its own, or a part pack), sorted; temp files are not parts. A
        problem in a pack and in its own file (a pack cut short before it removed the file) maps to the pack."""
        return self._index(PART_RE, PART_PACK_RE)

    def _index(self, single: re.Pattern, pack: re.Pattern) -> dict[str, Path]:
        """problem_id -> its own file (matching `single`) or the pack (matching `pack`) that lists it; a pack wins.
        A problem listed by two packs is refused: no writer packs a problem twice, so one of them is a copy (e.g. of
        another collection), and which one a read took would depend on how their names sort."""
        out = self._files(single)
        lists = [(path, self._pack_done(path)) for path in self._files(pack).values()]
        packed = {pid: path for path, pids in lists for pid in pids}
        if len(packed) != sum(len(pids) for _, pids in lists):  # a problem listed twice: find where, say so
            first: dict[str, Path] = {}
            for path, pids in lists:
                for pid in pids:
                    if first.setdefault(pid, path) != path:
                        raise ValueError(
                            f"problem {pid} is in two packs of {self.root}: {first[pid].name} and {path.name}. One "
                            "problem is measured once: keep the pack that is right and move the other out of the "
                            "directory (restore the directory from git if it came from there)"
                        )
        out.update(packed)
        return dict(sorted(out.items()))

    def _files(self, pattern: re.Pattern) -> dict[str, Path]:
        return {m.group(1): p for p in sorted(self.root.iterdir()) if (m := pattern.fullmatch(p.name))}

    def done_problems(self) -> set[str]:
        """problem_ids whose part is complete: a part exists only once fully written."""
        return set(self.parts())

    def write_problem(self, problem: Problem, table: pa.Table) -> Path:
        """Write all rows of `problem` as its part; raises FileExistsError if it already has one."""
        pid = problem_id(problem)
        validate_table(table, require_metadata=False)
        ids = set(table.column("problem_id").unique().to_pylist())
        if ids != {pid}:
            raise ValueError(f"table holds problem_ids {sorted(ids)}, expected only {pid} ({problem.name or problem})")
        if pid in self.parts():  # packed (its own file is caught by the no-clobber link too)
            raise FileExistsError(f"problem {pid} was already collected in {self.root}; rows are never duplicated")
        return self._write_part(pid, _with_metadata(table, self.meta))

    def retime_path(self, pid: str, kind: str = "retime") -> Path:
        return self.root / f"{_kind(kind)}-{pid}.parquet"

    def retimes(self, kind: str = "retime") -> dict[str, Path]:
        """problem_id -> the file holding its pass of `kind` (its own file, or a pack), sorted: the problems that
        pass has finished (possibly with no rows). A problem in a pack and in its own file (a pack cut short before
        it removed the file) maps to the pack, whose rows were copied from that file."""
        return self._index(RETIME_RES[_kind(kind)], PACK_RES[kind])

    def _pack_done(self, path: Path) -> tuple[str, ...]:
        key = (path, path.stat().st_mtime_ns)
        if key not in self._done:
            with _reading(path):
                md = pq.read_schema(path).metadata or {}
            if DONE_KEY not in md:
                what = f"{path} has no {DONE_KEY.decode()} metadata"
                raise ValueError(f"{what}: not a pack; delete it, run its pass again")
            self._done[key] = tuple(json.loads(md[DONE_KEY]))
        return self._done[key]

    def write_retime(self, problem: Problem, table: pa.Table, meta: Metadata, kind: str = "retime") -> Path:
        """Write the retimed rows of `problem` (a subset of its part's configs, maybe none) with the retime run's
        metadata; raises FileExistsError if the problem already had this kind of pass."""
        pid = problem_id(problem)
        if pid not in self.parts():
            raise ValueError(f"problem {pid} ({problem.name or problem}) has no part in {self.root}: nothing to retime")
        if pid in self.retimes(kind):
            raise FileExistsError(f"problem {pid} already had a {kind} pass in {self.root}; rows are never duplicated")
        check_retime_metadata(self.meta, meta)
        validate_table(table, require_metadata=False)
        ids = set(table.column("problem_id").unique().to_pylist())
        if ids - {pid}:
            raise ValueError(f"table holds problem_ids {sorted(ids)}, expected only {pid} ({problem.name or problem})")
        unknown = set(table.column("config_id").to_pylist()) - set(self.read_part(pid).column("config_id").to_pylist())
        if unknown:
            raise ValueError(f"retimed configs {sorted(unknown)} are not in problem {pid}'s part")
        return self._write_part(pid, _with_metadata(table, meta), self.retime_path(pid, kind))

    def read_retime(self, pid: str, kind: str = "retime") -> pa.Table:
        """A problem's validated rows of one pass: schema, metadata differing only in protocol, only the problems the
        file says it holds. From the problem's own file, or its rows of a pack (with the pack's metadata)."""
        return self._retime_rows(pid, kind, self.retimes(kind).get(pid))

    def _retime_rows(self, pid: str, kind: str, path: Path | None) -> pa.Table:
        if path is None:
            raise FileNotFoundError(f"problem {pid} has no {kind} pass in {self.root}")
        if not PACK_RES[kind].fullmatch(path.name):
            return self._read_retime_file(path, {pid})
        key = (path, path.stat().st_mtime_ns)
        split = self._retime_split.get(key)
        if split is None:
            table = self._read_retime_file(path, set(self._pack_done(path)))
            md = {k: v for k, v in table.schema.metadata.items() if k != DONE_KEY}  # as if from the problem's own file
            split = {p: rows.replace_schema_metadata(md) for p, rows in _by_problem(table).items()}
            split[None] = table.slice(0, 0).replace_schema_metadata(md)  # a problem the pass gave no rows
            self._retime_split[key] = split
        return split.get(pid, split[None])

    def _read_retime_file(self, path: Path, pids: set[str]) -> pa.Table:
        key = (path, path.stat().st_mtime_ns)
        if key in self._cache:  # packs are written once: one read serves every problem in them
            return self._cache[key]
        table = _read_table(path)
        try:
            meta = validate_table(table)
            check_retime_metadata(self.meta, meta)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if set(table.column("problem_id").unique().to_pylist()) - pids:
            raise ValueError(f"{path} holds rows of another problem than {sorted(pids)[:3]}: delete it, run it again")
        if len(pids) > 1:
            self._cache[key] = table
        return table

    def pack(self, kind: str = "retime") -> dict[str, int]:
        """Move the problems' own files of one pass into one pack file; returns what it did (`_pack`).

        Each file carries ~6 KB of Parquet footer and schema for a few dozen rows: a pass over 500 problems is 5 MB of
        footers. The rows and metadata are copied unchanged (one pack per distinct metadata); the pack is written
        atomically like a part, then the files are removed. Killed in between, the next `pack` removes them (reads
        already prefer the pack). Parts are never touched.
        """
        singles = self._files(RETIME_RES[_kind(kind)])
        packed = {pid: path for pid, path in self.retimes(kind).items() if path not in singles.values()}
        return self._pack(
            kind, singles, packed, lambda pid: self._read_retime_file(singles[pid], {pid}),
            lambda pid: self.read_retime(pid, kind),
        )  # fmt: skip

    def pack_parts(self) -> dict[str, int]:
        """Move the parts of their own into part packs (see the module docstring); returns what it did (`_pack`).
        For a finished collection: one writer per directory, as always. Reads are unchanged."""
        singles = self._files(PART_RE)
        packed = {pid: path for pid, path in self.parts().items() if path not in singles.values()}
        return self._pack(
            "part", singles, packed, lambda pid: self._read_part_file(singles[pid], pid), self.read_part
        )  # fmt: skip

    def _pack(self, prefix: str, singles: dict, packed: dict, read_single, read_current) -> dict[str, int]:
        """Returns {"moved": problems moved into a new pack, "leftovers_removed": own files removed because a pack
        already held their rows (a pack cut short), "temps_removed": temp files of dead runs removed}. The temps:
        `autoheur data pack` is what a killed run's directory gets next, and it opens no store for writing."""
        temps = self._clean_stale_temps()
        leftovers = 0
        for pid in [pid for pid in singles if pid in packed]:  # a pack cut short: its rows are in the pack already
            if not _same_rows(read_single(pid), read_current(pid)):
                raise ValueError(f"{singles[pid]} differs from its rows in {packed[pid]}: delete the one that is wrong")
            singles.pop(pid).unlink()
            leftovers += 1
        groups: dict[bytes, list[tuple[str, pa.Table]]] = {}
        for pid in singles:
            table = read_single(pid)
            groups.setdefault(table.schema.metadata[METADATA_KEY], []).append((pid, table))
        for group in groups.values():
            pids = [pid for pid, _ in group]
            table = pa.concat_tables([t.replace_schema_metadata(None) for _, t in group])
            md = {**group[0][1].schema.metadata, DONE_KEY: json.dumps(pids).encode()}
            name = hashlib.sha256(" ".join(pids).encode()).hexdigest()[:16]
            self._write_part(pids[0], table.replace_schema_metadata(md), self.root / f"{prefix}-pack-{name}.parquet")
            for pid in pids:
                singles[pid].unlink()
        _fsync_dir(self.root)
        return {"moved": len(singles), "leftovers_removed": leftovers, "temps_removed": temps}

    def _write_part(self, pid: str, table: pa.Table, final: Path | None = None) -> Path:
        final = final or self.part_path(pid)
        if final.exists():
            what = next((f"given a {k} pass" for k in RETIME_KINDS if final.name.startswith(f"{k}-")), "collected")
            raise FileExistsError(f"{final} exists: problem {pid} was already {what}; rows are never duplicated")
        tmp = self.root / f".tmp-{os.getpid()}-{secrets.token_hex(4)}.parquet"
        try:
            pq.write_table(table, tmp, compression="zstd", **_WRITE_CHECKSUMS)
            _fsync_file(tmp)
            _link_no_clobber(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.root)
        return final

    def read_part(self, pid: str, path: Path | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """A validated part: schema, metadata compatible with the manifest, and the one problem its name (or its
        pack's list) says; from its own file or its pack (`path`: where `parts()` says it is, listed once).

        `columns`: a pack reads only these and `NOT_NULL`'s (the others come back too, not in a given order), a
        seventh of a full read's time for info's six; the file's footer answers for the schema and metadata, and
        the problem-id check runs when `PROBLEM_FIELDS` are among them (`sizes`, its costly column, is)."""
        path = path or self.parts().get(pid) or self.part_path(pid)
        if not PART_PACK_RE.fullmatch(path.name):
            return self._read_part_file(path, pid)
        need = None if columns is None else tuple(dict.fromkeys([*NOT_NULL, *columns]))
        key = (path, path.stat().st_mtime_ns, need)
        if key not in self._cache:  # packs are written once: one read serves every problem in them
            self._cache[key] = self._split_pack(path, need)
        if pid not in self._cache[key]:
            raise ValueError(f"{path} does not hold problem {pid}")
        return self._cache[key][pid]

    def _read_part_file(self, path: Path, pid: str) -> pa.Table:
        table = _read_table(path)
        self._check_part(path, table)
        ids = table.column("problem_id").unique().to_pylist()
        if ids != [pid] or problem_id(problem_from_row(table.slice(0, 1).to_pylist()[0])) != pid:
            raise ValueError(f"{path} does not hold exactly problem {pid}: delete it and re-collect that problem")
        return table

    def _check_part(self, path: Path, table: pa.Table, schema: pa.Schema | None = None) -> None:
        """`validate_table` of a part, or (`schema`: its file's) the schema's checks and `table`'s rows (some
        columns), and its metadata against the manifest's."""
        try:
            if schema is None:
                meta = validate_table(table)
            else:
                meta = validate_schema(schema)
                validate_rows(table)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        diff = self.meta.mismatches(meta)
        if diff:
            raise ValueError(
                f"{path} was collected under other conditions ({'; '.join(diff)}); move it out of {self.root}"
            )

    def _split_pack(self, path: Path, columns: Sequence[str] | None = None) -> dict[str, pa.Table]:
        """A part pack's problems, each as the part it was packed from (the pack's metadata, less its list); of
        `columns` only (see `read_part`), when given."""
        if columns is None:
            table = _read_table(path)
            self._check_part(path, table)
        else:
            with _reading(path):
                file = pq.ParquetFile(path, **_VERIFY_CHECKSUMS)
                table = file.read(columns=list(columns)).replace_schema_metadata(file.schema_arrow.metadata)
            self._check_part(path, table, file.schema_arrow)
        identity = set(PROBLEM_FIELDS) | {"problem_name"} <= set(table.column_names)
        pids = self._pack_done(path)
        md = {k: v for k, v in table.schema.metadata.items() if k != DONE_KEY}
        split = _by_problem(table)
        if sorted(split) != sorted(pids):
            raise ValueError(f"{path} holds other problems than its list names: delete it and re-collect them")
        out = {}
        for pid in pids:
            rows = split[pid].replace_schema_metadata(md)
            if identity and problem_id(problem_from_row(rows.slice(0, 1).to_pylist()[0])) != pid:
                raise ValueError(f"{path} holds rows under problem_id {pid} of another problem: delete it, re-collect")
            out[pid] = rows
        return out

    def read_problem(
        self,
        pid: str,
        retimed: bool | Sequence[str] = True,
        index: dict[str, dict[str, Path]] | None = None,
        part: Path | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """A problem's rows: its part, with the rows of its retime files in place of the part's, kind after kind.

        `retimed`: True applies every kind (`RETIME_KINDS`), False none, or a list names the kinds to apply. `index`:
        instead, per kind to apply (in `RETIME_KINDS` order), its `retimes(kind)`, listed once for many reads;
        `part`: the file `parts()` names for the problem, likewise. `columns`: only these, in this order (the
        overlay then moves only them and the three it reads, not the whole row).
        """
        if index is None:
            index = {kind: self.retimes(kind) for kind in _kinds(retimed)}
        need = None if columns is None else list(dict.fromkeys([*columns, "config_id", "status", "median_ms"]))
        table = self.read_part(pid, part, need).replace_schema_metadata(None)
        if need is not None:
            table = table.select(need)
        for kind, files in index.items():
            path = files.get(pid)
            if path is None:
                continue
            new = self._retime_rows(pid, kind, path).replace_schema_metadata(None)
            if need is not None:
                new = new.select(need)
            if new.num_rows:
                # per row of the part, the row of `new` with its config (-1: none); config ids are unique in each
                at = pc.fill_null(pc.index_in(table.column("config_id"), value_set=new.column("config_id")), -1)
                at = at.to_numpy()
                hit = at >= 0
                if int(hit.sum()) != new.num_rows:
                    unknown = set(new.column("config_id").to_pylist()) - set(table.column("config_id").to_pylist())
                    raise ValueError(f"{path} retimes configs problem {pid}'s part lacks: {sorted(unknown)[:3]}")
                if kind in ALIGNED_KINDS:
                    old_row = np.empty(new.num_rows, dtype=np.int64)
                    old_row[at[hit]] = np.flatnonzero(hit)
                    new = align_session(new, table, old_row)
                kept = table.filter(pa.array(~hit))
                table = pa.concat_tables([kept, new])
        return table if columns is None else table.select(list(columns))

    def _read_index(
        self, retimed: bool | Sequence[str], columns: Sequence[str] = ()
    ) -> tuple[dict[str, dict[str, Path]], dict[str, Path]]:
        """(the retime files to apply per kind, the parts) of a full read, checked: known columns, no orphans."""
        unknown = [c for c in columns if c not in COLUMNS]
        if unknown:
            raise ValueError(f"unknown columns {unknown}; the dataset has {list(COLUMNS)}")
        index = {kind: self.retimes(kind) for kind in RETIME_KINDS}
        parts = self.parts()
        for kind, files in index.items():
            orphans = sorted(set(files) - set(parts))
            if orphans:
                raise ValueError(f"{self.root} has {kind} files without a part ({orphans[:3]}): delete them")
        return {kind: index[kind] for kind in _kinds(retimed)}, parts

    def read_table(self, columns: list[str] | None = None, retimed: bool | Sequence[str] = True) -> pa.Table:
        index, parts = self._read_index(retimed, columns or ())
        tables = [self.read_problem(pid, index=index, part=path, columns=columns) for pid, path in parts.items()]
        table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
        return table.select(columns) if columns else table

    def read(self, columns: list[str] | None = None, retimed: bool | Sequence[str] = True) -> pd.DataFrame:
        """All parts as one DataFrame, each part validated first; retimed rows in place of the first measurement
        (see `read_problem` for `retimed`). The rows are those of `read_table`, in its order.

        Read for memory: a part pack at a time (its Arrow buffers let go once its problems are in pandas), and a
        problem's `sizes` as one array that all its rows share (they are equal: the problem id covers them) instead
        of one array per row. Converting the whole Arrow table at once took the H200 set's read to 10.5 GB for a
        2.7 GB frame; evaluations that load the H100 set beside it came to the 24 GB of the 2-core host. Treat
        `sizes` as read-only."""
        cols = list(columns or COLUMNS)
        index, parts = self._read_index(retimed, cols)
        frames = dict(self._problem_frames(cols, index, parts))
        if not frames:
            return SCHEMA.empty_table().select(cols).to_pandas()
        return pd.concat([frames[pid] for pid in parts], ignore_index=True)

    def read_batches(
        self, columns: list[str] | None = None, retimed: bool | Sequence[str] = True, min_rows: int = 1_000_000
    ) -> Iterator[pd.DataFrame]:
        """The rows of `read`, as DataFrames of whole problems of at least `min_rows` rows each (the last may be
        smaller), in file order rather than problem order: a part pack's problems come together, read once.

        For a consumer that reduces each batch (features, labels) and lets it go: the whole frame of the H100 set is
        never held, nor its copies. Together the batches hold each problem's rows once."""
        cols = list(columns or COLUMNS)
        index, parts = self._read_index(retimed, cols)
        batch: list[pd.DataFrame] = []
        rows = 0
        for _, frame in self._problem_frames(cols, index, parts):
            batch.append(frame)
            rows += len(frame)
            if rows >= min_rows:
                yield pd.concat(batch, ignore_index=True)
                batch, rows = [], 0
        if batch:
            yield pd.concat(batch, ignore_index=True)

    def _problem_frames(
        self, cols: list[str], index: dict[str, dict[str, Path]], parts: dict[str, Path]
    ) -> Iterator[tuple[str, pd.DataFrame]]:
        """(problem_id, its rows as a DataFrame), file by file: a pack is read once and let go after its problems."""
        for pids, tables in self._file_tables(cols, index, parts):
            yield from zip(pids, _to_pandas_each(tables), strict=True)

    def _file_tables(
        self, cols: list[str], index: dict[str, dict[str, Path]], parts: dict[str, Path]
    ) -> Iterator[tuple[list[str], list[pa.Table]]]:
        """(problem ids, their rows as `read_problem` gives them) per part file, each file read once and let go."""
        by_file: dict[Path, list[str]] = {}
        for pid, path in parts.items():
            by_file.setdefault(path, []).append(pid)
        for path, pids in by_file.items():
            yield pids, [self.read_problem(pid, index=index, part=path, columns=cols) for pid in pids]
            self._cache = {key: v for key, v in self._cache.items() if key[0] != path}


def _by_problem(table: pa.Table) -> dict[str, pa.Table]:
    """A table's rows per problem_id, each problem's in their stored order: a zero-copy slice where they are stored
    together (as packs write them), else a take."""
    encoded = table.column("problem_id").combine_chunks().dictionary_encode()  # ids as codes: no string sort
    codes = encoded.indices.to_numpy()
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(encoded.dictionary))).tolist()
    out = {}
    for pid, lo, hi in zip(encoded.dictionary.to_pylist(), [0, *ends[:-1]], ends, strict=True):
        first = int(order[lo])
        if order[hi - 1] - first == hi - 1 - lo:
            out[pid] = table.slice(first, hi - lo)
        else:
            out[pid] = table.take(pa.array(order[lo:hi]))
    return out


def _to_pandas_each(tables: list[pa.Table]) -> list[pd.DataFrame]:
    """`_to_pandas` of each table (one schema), converted together: one conversion costs ~2 ms however few its rows,
    and a dataset has thousands of problems. Each frame is a slice of the one conversion."""
    if len(tables) < 2:
        return [_to_pandas(t) for t in tables]
    whole = pa.concat_tables(tables)
    if "sizes" not in whole.column_names or whole.num_rows == 0:
        df = whole.to_pandas()
    else:
        i = whole.column_names.index("sizes")
        df = whole.remove_column(i).to_pandas()
        shared = []
        for t in tables:  # a problem's sizes: one array that all its rows share, as in `_to_pandas`
            if t.num_rows:
                first = t.column(i)[0].as_py()
                shared += [None if first is None else np.asarray(first, dtype=np.int32)] * t.num_rows
        df.insert(i, "sizes", pd.Series(shared, dtype=object))
    bounds = np.cumsum([0] + [t.num_rows for t in tables]).tolist()
    return [df.iloc[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """One problem's rows as a DataFrame, its `sizes` (when selected) one array shared by every row."""
    if "sizes" not in table.column_names or table.num_rows == 0:
        return table.to_pandas()
    i = table.column_names.index("sizes")
    df = table.remove_column(i).to_pandas()
    first = table.column(i)[0].as_py()
    sizes = None if first is None else np.asarray(first, dtype=np.int32)
    df.insert(i, "sizes", pd.Series([sizes] * len(df), dtype=object))
    return df


def session_scale(new_ms: dict[str, float], old_ms: dict[str, float]) -> float:
    """How much slower (> 1) a pass's session ran a problem's kernels than its earlier figures say: the median, over
    the configs ok in both, of new / old time; 1.0 when none is."""
    ratios = [new_ms[c] / old_ms[c] for c in new_ms.keys() & old_ms.keys() if old_ms[c] > 0]
    return float(np.median(ratios)) if ratios else 1.0


def align_session(new: pa.Table, old: pa.Table, old_row: np.ndarray | None = None) -> pa.Table:
    """A pass's rows of one problem with their times divided by its `session_scale` against `old` (the problem's rows
    before it), so that they compare with the configs it did not measure.

    Why: a pass re-measures a few configs of a problem in a session of its own, and a session can run them all a few
    percent faster or slower (the polish: per problem, 0.95-1.03x the refine's figures at p10-p90 on one H100 and one
    H200, up to 1.13x). Read raw, that offset would fall between the configs it measured and the rest, and decide the
    oracle among near-ties or move the relative time of every config outside its selection. What such a pass adds is
    the order of the configs it measured, to more rounds; their common scale is the earlier one's. The file keeps the
    raw figures. `old_row`: per row of `new`, the row of `old` with its config, where the caller has it."""

    scale = _table_session_scale(new, old, old_row)
    if scale == 1.0:
        return new
    i = new.schema.get_field_index("median_ms")
    return new.set_column(i, new.schema.field(i), pc.divide(new.column(i), scale))


def _table_session_scale(new: pa.Table, old: pa.Table, old_row: np.ndarray | None = None) -> float:
    """`session_scale` of two tables of one problem (config ids unique in each, as `validate_table` holds them), over
    their ok rows with a time: the same median of the same ratios, without a dict of each table's configs. `old_row`:
    per row of `new`, the row of `old` with its config (-1: none); looked up when not given."""

    def ok_ms(t: pa.Table) -> np.ndarray:
        ms = t.column("median_ms").to_numpy(zero_copy_only=False).astype(np.float64)
        ok = pc.equal(t.column("status"), "ok").to_numpy(zero_copy_only=False)
        return np.where(ok & (ms == ms), ms, np.nan)  # NaN: not ok, or not timed

    at = old_row
    if at is None:
        at = pc.fill_null(pc.index_in(new.column("config_id"), value_set=old.column("config_id")), -1).to_numpy()
    new_ms, old_ms = ok_ms(new), ok_ms(old)
    both = at >= 0
    num, den = new_ms[both], old_ms[at[both]]
    keep = (num == num) & (den > 0)  # NaN compares false: both ok and timed, the old time positive
    return float(np.median(num[keep] / den[keep])) if keep.any() else 1.0


def _kind(kind: str) -> str:
    if kind not in RETIME_KINDS:
        raise ValueError(f"unknown retime kind {kind!r}; the kinds are {RETIME_KINDS}")
    return kind


def _kinds(retimed: bool | Sequence[str]) -> tuple[str, ...]:
    """The retime kinds a read applies, in `RETIME_KINDS` order."""
    if isinstance(retimed, bool):
        return RETIME_KINDS if retimed else ()
    wanted = {_kind(k) for k in retimed}
    return tuple(k for k in RETIME_KINDS if k in wanted)


def check_retime_metadata(base: Metadata, meta: Metadata) -> None:
    """A retime must measure what the dataset measured: only the timing protocol version may differ (and not go
    back to an older one)."""
    diff = [d for d in base.mismatches(meta) if not d.startswith("timing_version")]
    if diff:
        raise ValueError(f"the retime was measured under other conditions than the dataset ({'; '.join(diff)})")
    if meta.timing_version < base.timing_version:
        raise ValueError(f"retime protocol v{meta.timing_version} is older than the dataset's v{base.timing_version}")


def read_manifest(root: Path) -> Metadata:
    path = Path(root) / MANIFEST
    try:
        if not path.exists():
            raise ValueError(f"{root} has no {MANIFEST}: not an autoheur dataset")
        text = path.read_bytes()
    except OSError as exc:  # a directory this user may not read, or a manifest that is not a file
        raise ValueError(f"{path} cannot be read ({exc.strerror or exc}): give a dataset this user can read") from None
    fix = (
        f"restore it from git (git checkout -- {path}) or from the dataset it was copied from (every Parquet file of "
        "the dataset carries the same metadata, under the key 'autoheur')"
    )
    try:
        record = json.loads(text.decode())
    except ValueError as exc:  # not JSON (cut short, garbled), or not text
        raise ValueError(f"{path} is corrupt ({type(exc).__name__}: {exc}); {fix}") from None
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        raise ValueError(f"{path} holds no 'metadata' record: it is corrupt or not a dataset manifest; {fix}")
    version = record["metadata"].get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:  # before its fields are read: another version may have other fields
        raise ValueError(
            f"{path} says schema version {version!r}, and this autoheur reads version {SCHEMA_VERSION}: "
            f"a dataset of another autoheur version (install it), or an edited manifest: {fix}"
        )
    try:
        return Metadata.from_dict(record["metadata"])
    except (ValueError, TypeError, AttributeError) as exc:  # fields missing, unknown or of the wrong type
        raise ValueError(f"{path}: {exc}. If it was edited or damaged, {fix}") from None


def read_problem_ids(path: Path | str) -> set[str]:
    """The problem ids at `path`: a dataset directory's finished problems, or a text file of ids, one per line ('#'
    starts a comment). What `autoheur collect --skip` leaves out and `autoheur data ids` prints."""
    path = Path(path)
    if path.is_dir():
        return DatasetStore.load(path).done_problems()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: give a dataset directory or a file of problem ids")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (a Windows editor) skipped
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file of problem ids (a Parquet file? give its dataset)") from None
    ids = set()
    for line_no, line in enumerate(text.splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if not ID_RE.fullmatch(text):
            raise ValueError(f"{path}:{line_no}: {text!r} is not a problem id (`autoheur data ids` prints them)")
        ids.add(text)
    return ids


# -- filesystem helpers --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Errors of a Parquet read, as a refusal that names the file and says what to do: pyarrow's name neither ("Parquet
    magic bytes not found in footer" for a file cut short, "CRC checksum verification failed" for a garbled page)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{path} is corrupt ({type(exc).__name__}: {exc}); {_restore_hint(path)}") from None


def _read_table(path: Path) -> pa.Table:
    with _reading(path):
        return pq.read_table(path, **_VERIFY_CHECKSUMS)


def _restore_hint(path: Path) -> str:
    """What to do about a damaged file of a dataset: restore it, or measure again what it held."""
    kind = next((k for k in RETIME_KINDS if path.name.startswith(f"{k}-")), None)
    again = (
        f"delete it and run `autoheur data {kind}` on the dataset again"
        if kind
        else "delete it (and the retime, refine and polish files of its problems) and collect its problems again"
    )
    return f"restore it from git (git checkout -- {path}) if it is tracked, or {again}"


def _same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Equal rows regardless of metadata and order; NaN equals NaN (untimed configs)."""

    def norm(t: pa.Table) -> pa.Table:
        t = t.replace_schema_metadata(None).sort_by("config_id")
        for name in ("median_ms", "spread"):
            col = t.column(name)
            t = t.set_column(t.schema.get_field_index(name), name, pc.if_else(pc.is_nan(col), None, col))
        return t

    return a.num_rows == b.num_rows and norm(a).equals(norm(b))


def _has_content(root: Path) -> bool:
    """Anything in `root` besides temp files of a killed run (e.g. one that died writing the manifest) and the writer
    lock (`one_writer`: made before the manifest)."""
    return root.is_dir() and any(not TMP_RE.fullmatch(p.name) and p.name != WRITER_LOCK for p in root.iterdir())


@contextlib.contextmanager
def one_writer(root: Path) -> Iterator[None]:
    """Hold `root`'s writer lock (an exclusive flock on `root/.collect.lock`, the directory made if missing) for a
    collection, a data pass (retime, refine, polish), a pack or a merge (its sources and an existing destination): a
    second writer into the directory is refused at once. Two runs at once measured every problem twice (the loser's
    rows dropped) and both packed the parts at their end, where one read a part the other had just packed and ended in
    a traceback; two packs of one problem would leave a dataset no read accepts. The lock goes with the process, a
    killed one's too. A directory that cannot hold the lock file (a read-only mount, e.g. a shipped dataset merged
    from, or a packed one packed again) is no writer's: the command goes on as before the lock, and a write it makes
    there fails on its own; one whose file system cannot lock (NFS without a lock manager) goes on with a warning."""
    import fcntl

    _check_reachable(root)
    if root.exists() and not root.is_dir():  # DatasetStore.open says what is wrong with it
        yield
        return
    _make_dir(root)
    lock = _open_lock(root / WRITER_LOCK)
    if lock is None:
        yield
        return
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"another `autoheur collect` or `autoheur data retime/refine/polish/pack/merge` is writing into "
                f"{root} (one writer per directory): let it finish, or give a collection another --out and "
                "`autoheur data merge` the two afterwards"
            ) from None
        except OSError as exc:  # ENOLCK: NFS without a lock manager; EBADF: an NFS lock on a read-only open
            warnings.warn(f"{root}: no writer lock ({exc}); run one writer into it at a time", stacklevel=3)
        yield


def _make_dir(path: Path) -> None:
    """Make the directory `path` (and its parents), or refuse naming what is in the way: a file of its name (an
    --out or --into naming a file) or on its way (a path through one), or the error (no permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        there = next((p for p in (path, *path.parents) if _stat_or_none(p) is not None), path)
        st = _stat_or_none(there)
        why = f"{there} is a file" if st is not None and not stat.S_ISDIR(st.st_mode) else exc.strerror
        raise ValueError(f"cannot make the directory {path} ({why}): give another path") from None


def _check_reachable(path: Path) -> None:
    """Refuse `path` where this user cannot look it up (a directory on its way without search permission): there
    Path.exists raises PermissionError rather than answer, and each probe of the path ended in that traceback. A
    missing path, or one through a file, passes: making it says what is wrong (`_make_dir`)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise ValueError(f"cannot reach {path} ({exc.strerror}): give another path") from None


def _stat_or_none(path: Path):
    """`path`'s stat, or None where it cannot be read: missing, or under a directory this user cannot search (where
    Path.exists raises PermissionError rather than answer)."""
    try:
        return path.stat()
    except OSError:
        return None


def _open_lock(path: Path):
    """`path` opened to flock: for appending (made if missing), else, where that is refused (a read-only mount, another
    user's directory or lock file), an existing one read-only (flock needs no write access); None: none there, and
    none can be made."""
    try:
        return open(path, "a")  # noqa: SIM115  (closed by one_writer)
    except OSError:
        try:
            return open(path, "rb")  # noqa: SIM115
        except OSError:
            return None


def _aside_name(root: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    aside, i = root.with_name(f"{root.name}.old-{stamp}"), 1
    while aside.exists():
        aside, i = root.with_name(f"{root.name}.old-{stamp}-{i}"), i + 1
    return aside


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make the rename itself durable; not every platform can open a directory."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _link_no_clobber(tmp: Path, final: Path) -> None:
    """Atomically publish `tmp` as `final`, failing if `final` exists (a hard link never overwrites)."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise FileExistsError(
            f"{final} exists: that problem was already collected; rows are never duplicated"
        ) from None
    except OSError:  # a filesystem without hard links: replace after the existence check
        if final.exists():
            raise FileExistsError(f"{final} exists: that problem was already collected") from None
        os.replace(tmp, final)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{os.getpid()}-{secrets.token_hex(4)}.json")
    try:
        tmp.write_bytes(data)
        _fsync_file(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


__all__ = ["DatasetStore", "read_manifest", "read_problem_ids"]
