"""The problems that design choices have seen: `models/design-seen.txt`, one problem id a line.

A held-out figure is on problems the fitted model never trained on, but the recipe itself (members, rows, trees,
borrowed data, list filling...) was chosen by comparing figures, on the development CV (`benchmarks/dev_cv.py`) and
at times on the reported splits. A problem whose figure informed such a choice has been seen by the design. This file
lists every such problem id, so that `autoheur eval` can report the problems no choice has seen (subset
`design_unseen`), the honest reading of a design as it stands.

It started at stop 78 with every problem of the shipped datasets then, both GPUs and both kernel families: 12,510
ids. A problem id names a shape, not a device, and an id seen on one GPU counts as seen: the H200's 519 sampled input
gradients of stop 76 arrived after the last choice, but as shapes of the H100's data, whose H100 figures informed
choices (BENCHMARKS.md, "Learned ranking", stop 78). So at stop 78 no shipped problem is unseen; the subset fills
with the problems collected from then on. `benchmarks/dev_cv.py` appends its development set when it runs; a
choice made on other figures appends their problems with `record_seen`.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from autoheur.collect.store import ID_RE, _atomic_write_bytes, read_problem_ids
from autoheur.models.artifact import MODELS_DIR

SEEN_FILE = MODELS_DIR / "design-seen.txt"
HEADER = (
    "# Problem ids that design choices have seen (autoheur/models/design_seen.py): one a line, sorted.\n"
    "# autoheur eval reports the problems not listed as subset design_unseen.\n"
)

_CACHE: dict[Path, tuple[tuple[int, int, int], frozenset[str]]] = {}


def _parse(path: Path) -> frozenset[str]:
    try:
        return frozenset(read_problem_ids(path))
    except ValueError as exc:
        raise ValueError(f"{exc}; restore it from git") from exc


def read_seen(path: Path | str | None = None) -> frozenset[str] | None:
    """The listed problem ids (`path`, default SEEN_FILE), or None where there is no list (then no problem is known
    to be unseen). Kept while the file's inode, size and mtime stay (a rewrite is a new inode)."""
    path = Path(path or SEEN_FILE)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    seen = _parse(path)
    _CACHE[path] = (stamp, seen)
    return seen


def record_seen(problem_ids: Iterable[str], path: Path | str | None = None) -> int:
    """Add `problem_ids` to the list (`path`, default SEEN_FILE); how many were new. Under a lock on its directory
    (two dev CVs at once lose neither's ids), read afresh, written whole to a temp file, synced, renamed into place
    (the dataset store's atomic write)."""
    path = Path(path or SEEN_FILE)
    new = {str(p) for p in problem_ids}
    bad = sorted(p for p in new if not ID_RE.fullmatch(p))
    if bad:
        raise ValueError(f"not problem ids (16 hex digits): {bad[:3]}")
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
        old = _parse(path) if path.exists() else frozenset()
        added = new - old
        if not added and path.exists():
            return 0
        _atomic_write_bytes(path, (HEADER + "".join(f"{p}\n" for p in sorted(old | new))).encode())
        os.chmod(path, 0o644)  # a text file in git, whatever the umask
        return len(added)
    finally:
        os.close(dir_fd)  # and with it the lock
