"""`autoheur data merge`: several dataset directories of one device (shards, or collections on several machines) into
one, each problem once, a problem measured twice with different rows refused (store.py: the layout)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from autoheur.collect.store import (
    RETIME_KINDS,
    DatasetStore,
    _check_reachable,
    _has_content,
    _pid_alive,
    _same_rows,
    one_writer,
)

_KEEP_ONE = (
    "Keep one of the two: move the file that holds the measurement you drop out of its dataset (a pack also holds "
    "other problems: measure those again, with `autoheur collect` or the pass), then merge again"
)


def merge(sources: list[Path], dest: Path, finished: Sequence[str] = ()) -> dict:
    """Copy every part (and retime file, of every kind) of `sources` into `dest` (created with the first source's
    metadata, or resumed), then pack the copies.

    Refuses sources whose metadata is incompatible with dest's. A problem present twice is copied once if its rows
    are identical and refused if they differ (two measurements of one problem: the refusal names the two files).
    A run log whose name dest already has with other content (logs are named by start second, host and rank, so
    two calls can collide) is copied under a numbered name, counted in "run_logs_renamed".

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
    _check_reachable(dest)
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"--into {dest} exists and is not a directory")
    with contextlib.ExitStack() as held:  # no collection or pass writes into a source or dest meanwhile (one_writer)
        for root in dict.fromkeys(s.root.resolve() for s in stores):  # once each: a second flock would refuse itself
            held.enter_context(one_writer(root))
        locked = dest.is_dir()
        if locked:  # an existing destination, empty too: no collection starts into it meanwhile
            held.enter_context(one_writer(dest))
        if _has_content(dest):  # (a lock or a killed run's temp files alone make a new one, built beside)
            hint = f"merge into another directory (another --into than {dest})"
            return _merge_into(stores, DatasetStore.open(dest, stores[0].meta, hint=hint), finished)
        return _merge_new(stores, dest, finished, None if locked else held)


def _merge_new(
    stores: list[DatasetStore], dest: Path, finished: Sequence[str], lock: contextlib.ExitStack | None
) -> dict:
    """`lock`: where the destination was missing at the start, the stack its writer lock is taken into when whole
    (the directory made then): a collection may have made it meanwhile, and is not written beside."""
    # A new destination is built beside it and moved into place when whole: a source found corrupt half-way
    # left a destination of some problems that later commands took for the merge (stop 80's audit). Beside the
    # resolved path: "." has no name to build beside, and a link to an empty directory stands for that directory.
    target = dest.resolve()
    build = target.with_name(f".{target.name}.merging-{os.getpid()}")
    for left in target.parent.glob(f".{target.name}.merging-*"):  # this one (a reused pid), or a killed merge's
        pid = left.name.rsplit("-", 1)[1]
        if left == build or (pid.isdigit() and not _pid_alive(int(pid))):  # a live merge's is its own
            shutil.rmtree(left)
    try:
        stats = _merge_into(stores, DatasetStore.open(build, stores[0].meta), finished)
        if lock is not None:  # missing at the start: made now, under its lock, or refused if another run holds it
            lock.enter_context(one_writer(target))
            if _has_content(target) or not target.is_dir():
                raise ValueError(f"another run wrote into {dest} during the merge: merge again, into it or elsewhere")
        # empty, under its lock (perhaps the working directory): filled, not replaced
        manifest = build / "dataset.json"
        for entry in [e for e in build.iterdir() if e != manifest] + [manifest]:  # a dataset when whole
            entry.rename(target / entry.name)
        build.rmdir()
    finally:
        if build.exists():
            shutil.rmtree(build)
    return {**stats, "dest": str(dest)}


def _merge_into(stores: list[DatasetStore], out: DatasetStore, finished: Sequence[str]) -> dict:
    dest = out.root
    copied = skipped = logs = renamed = unfinished = 0
    retimes = dict.fromkeys(RETIME_KINDS, 0)
    # (kind, problem) -> the source file a copy of this call came from: a conflict names it, not the copy (in a new
    # destination, a file of the directory built beside it and removed when the merge is refused)
    origin: dict[tuple[str, str], Path] = {}
    for s in stores:
        parts, passes = s.parts(), {kind: s.retimes(kind) for kind in RETIME_KINDS}
        keep = set(parts).intersection(*(passes[kind] for kind in finished))
        unfinished += len(parts) - len(keep)
        for pid, path in parts.items():
            if pid not in keep:
                continue
            table = s.read_part(pid, path)
            have = out.parts().get(pid)
            if have is not None:
                if not _same_rows(table, out.read_part(pid, have)):
                    have = origin.get(("part", pid), have)
                    raise ValueError(
                        f"problem {pid} was measured twice, with different rows: in {path} and in {have}. {_KEEP_ONE}"
                    )
                skipped += 1
                continue
            out._write_part(pid, table)  # verbatim: the part keeps the metadata of the run that measured it
            origin["part", pid] = path
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
                            f"problem {pid} had a {kind} pass twice, with different rows: in {path} and in "
                            f"{origin.get((kind, pid), have[pid])}. {_KEEP_ONE}"
                        )
                    continue
                out._write_part(pid, table, out.retime_path(pid, kind))
                origin[kind, pid] = path
                retimes[kind] += 1
        n, r = _copy_run_logs(s.root, out.root)
        logs, renamed = logs + n, renamed + r
    # Packed whether or not this run copied: a merge killed before its pack left its copies in files of their own,
    # which its rerun (copying nothing) packs here. A destination with none is left as it is.
    out.pack_parts()
    for kind in RETIME_KINDS:
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
        "run_logs_renamed": renamed,
        "problems": len(out.done_problems()),
    }


def _copy_run_logs(src: Path, dest: Path) -> tuple[int, int]:
    """Copy the run logs (`runs/*.jsonl`, named by start time, host and rank) that dest lacks; returns (how many were
    copied, how many of those under a numbered name, `<name>.<i>.jsonl`, because dest has another log of that name).
    A log whose content dest already holds under its name or a numbered one is skipped: merging again copies
    nothing."""
    copied = renamed = 0
    for log in sorted((src / "runs").glob("*.jsonl")):
        data = log.read_bytes()
        target, i = dest / "runs" / log.name, 0
        while target.exists() and target.read_bytes() != data:
            i += 1
            target = dest / "runs" / f"{log.stem}.{i}.jsonl"
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        copied, renamed = copied + 1, renamed + (i > 0)
    return copied, renamed
