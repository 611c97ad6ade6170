"""`autoheur data merge`: several dataset directories of one device (shards, or collections on several machines) into
one, each problem once, a problem measured twice with different rows refused (store.py: the layout)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from autoheur.collect.store import RETIME_KINDS, DatasetStore, _same_rows


def merge(sources: list[Path], dest: Path, finished: Sequence[str] = ()) -> dict:
    """Copy every part (and retime file, of every kind) of `sources` into `dest` (created with the first source's
    metadata, or resumed), then pack the copies.

    Refuses sources whose metadata is incompatible with dest's. A problem present twice is copied once if its rows
    are identical and refused if they differ (two measurements of one problem: keep one, delete the other part).

    `finished`: passes (e.g. ("refine", "polish")) a source's problem must have had to be copied; the others stay
    behind, counted under "left_unfinished", for a merge after those passes (copies already made are then skipped).
    """
    unknown = sorted(set(finished) - set(RETIME_KINDS))
    if unknown:
        raise ValueError(f"finished={unknown}: expected passes among {list(RETIME_KINDS)}")
    dest = Path(dest)
    if not sources:
        raise ValueError("merge needs at least one source dataset")
    stores = [DatasetStore.load(s) for s in sources]
    if any(s.root.resolve() == dest.resolve() for s in stores):
        raise ValueError(f"{dest} is both a source and the destination")
    for s in stores[1:]:
        diff = stores[0].meta.mismatches(s.meta)
        if diff:
            raise ValueError(f"cannot merge {s.root} with {stores[0].root}: {'; '.join(diff)}")
    out = DatasetStore.open(dest, stores[0].meta)
    copied = skipped = logs = unfinished = 0
    retimes = dict.fromkeys(RETIME_KINDS, 0)
    for s in stores:
        parts, passes = s.parts(), {kind: s.retimes(kind) for kind in RETIME_KINDS}
        keep = set(parts).intersection(*(passes[kind] for kind in finished))
        unfinished += len(parts) - len(keep)
        for pid, path in parts.items():
            if pid not in keep:
                continue
            table = s.read_part(pid, path)
            if pid in out.done_problems():
                if not _same_rows(table, out.read_part(pid)):
                    raise ValueError(
                        f"problem {pid} is in {s.root} and already in {dest} with different rows: "
                        f"delete one of the two part-{pid}.parquet files and merge again"
                    )
                skipped += 1
                continue
            out._write_part(pid, table)  # verbatim: the part keeps the metadata of the run that measured it
            copied += 1
        for kind in RETIME_KINDS:
            have = out.retimes(kind)
            for pid, path in passes[kind].items():
                if pid not in keep:
                    continue
                table = s._retime_rows(pid, kind, path)
                if pid in have:
                    if not _same_rows(table, out._retime_rows(pid, kind, have[pid])):
                        raise ValueError(
                            f"problem {pid} had a {kind} pass in {s.root} and in {dest} with different rows: "
                            f"keep one (delete its {kind} file, or run that pass again) and merge again"
                        )
                    continue
                out._write_part(pid, table, out.retime_path(pid, kind))
                retimes[kind] += 1
        logs += _copy_run_logs(s.root, out.root)
    if copied:
        out.pack_parts()
    for kind in RETIME_KINDS:
        if retimes[kind]:
            out.pack(kind)
    return {
        "dest": str(dest),
        "copied": copied,
        "retimes_copied": retimes["retime"],
        "refines_copied": retimes["refine"],
        "polishes_copied": retimes["polish"],
        "duplicates_skipped": skipped,
        "left_unfinished": unfinished,
        "run_logs_copied": logs,
        "problems": len(out.done_problems()),
    }


def _copy_run_logs(src: Path, dest: Path) -> int:
    """Copy the run logs (`runs/*.jsonl`, named by start time and host) that dest lacks; returns how many."""
    n = 0
    for log in sorted((src / "runs").glob("*.jsonl")):
        target = dest / "runs" / log.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(log.read_bytes())
            os.replace(tmp, target)
            n += 1
    return n
