"""The problems that design choices have seen: `models/design-seen.txt`, one problem id a line.

A held-out figure is on problems the fitted model never trained on, but the recipe itself (members, rows, trees,
borrowed data, list filling...) was chosen by comparing figures, on the development CV (`benchmarks/dev_cv.py`) and
at times on the reported splits. A problem whose figure informed such a choice has been seen by the design. This file
lists every such problem id, so that `autoheur eval` can report the problems no choice has seen (subset
`design_unseen`), the honest reading of a design as it stands.

It started at stop 78 with every problem of the shipped datasets then, both GPUs and both kernel families: 12,510
ids. A problem id names a shape, not a device, and an id seen on one GPU counts as seen: the H200's 519 sampled input
gradients of stop 76 arrived after the last choice, but as shapes of the H100's data, which the development CVs used
(BENCHMARKS.md, "Learned ranking", stop 78). So at stop 78 no shipped problem is unseen; the subset fills with the
problems collected from then on. `benchmarks/dev_cv.py` appends its development set when it runs; a choice made on
other figures appends their problems with `record_seen`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from autoheur.models.artifact import MODELS_DIR

SEEN_FILE = MODELS_DIR / "design-seen.txt"
HEADER = (
    "# Problem ids that design choices have seen (autoheur/models/design_seen.py): one a line, sorted.\n"
    "# autoheur eval reports the problems not listed as subset design_unseen.\n"
)

_CACHE: dict[Path, tuple[float, frozenset[str]]] = {}


def read_seen(path: Path | str | None = None) -> frozenset[str] | None:
    """The listed problem ids (`path`, default SEEN_FILE), or None where there is no list (then no problem is known
    to be unseen)."""
    path = Path(path or SEEN_FILE)
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    ids = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) != 16 or any(c not in "0123456789abcdef" for c in line):
            raise ValueError(f"{path}:{n}: {line[:40]!r} is not a problem id (16 hex digits); restore it from git")
        ids.append(line)
    seen = frozenset(ids)
    _CACHE[path] = (mtime, seen)
    return seen


def record_seen(problem_ids: Iterable[str], path: Path | str | None = None) -> int:
    """Add `problem_ids` to the list (`path`, default SEEN_FILE; written whole to a temp file, then renamed into
    place); how many were new."""
    path = Path(path or SEEN_FILE)
    old = read_seen(path) or frozenset()
    new = {str(p) for p in problem_ids}
    bad = sorted(p for p in new if len(p) != 16 or any(c not in "0123456789abcdef" for c in p))
    if bad:
        raise ValueError(f"not problem ids (16 hex digits): {bad[:3]}")
    added = new - old
    if not added and path.exists():
        return 0
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".txt", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(HEADER + "".join(f"{p}\n" for p in sorted(old | new)))
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return len(added)
