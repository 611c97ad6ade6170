"""`--shapes FILE`: the user's own problems, one per line, as JSON lines (.jsonl / .json) or CSV (.csv, with a header).

Fields (CSV columns or JSON keys):
  layout   2d3d (default) | 3d2d | 2d2d | 3d3d
  groups   number of groups (experts), >= 1; with sizes given, their count by default
  sizes    the per-group ragged extents: a JSON list, or in CSV a list separated by spaces, ';', '|' or (quoted) ','
    -- or, instead of sizes --
  total    rows (2d3d), columns (3d2d) or reduction length (2d2d) over all groups, and
  routing  uniform | balanced_jitter | zipf (how `total` splits over the groups), optional `seed`, `zipf_s` (zipf only)
  m, n, k  the fixed extents: 2d3d needs n, k; 3d2d m, k; 2d2d m, n; 3d3d m, n, k (per batch). The one a layout
           takes from the sizes (2d3d's m, 3d2d's n, 2d2d's k) may be absent, 0 or the sizes' sum, nothing else
  dtype    bfloat16 (default) | float16 | float32 (also bf16, fp16, fp32)
  b_major  k (default; B stored [.., N, K] as MoE weights are) | n
  a_major  k (default) | m. A weight gradient (2d2d) as the backward runs it is a_major m, b_major n: give them (the
           k/k default is no layout the backward makes, and no model trained on it; `predict --layout 2d2d` defaults
           to m/n, a shapes line keeps k/k so that the ids of existing lines stay)
  name     a label (optional; absent, null or "": the file and line, e.g. my_shapes.jsonl:3)

Every line is checked before anything is collected or tuned; all bad lines are reported together, each with its
line number.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import torch

from autoheur.collect.workloads import ROUTINGS, distribute_rows
from autoheur.problem import LAYOUTS, MAX_EXTENT, Problem

DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
FIELDS = ("layout", "groups", "sizes", "total", "routing", "zipf_s", "seed", "m", "n", "k", "dtype", "b_major",
          "a_major", "name")  # fmt: skip
NEEDS = {"2d3d": ("n", "k"), "3d2d": ("m", "k"), "2d2d": ("m", "n"), "3d3d": ("m", "n", "k")}


class ShapesError(ValueError):
    """Bad lines in a shapes file; `errors` holds (line number, message) for each."""

    def __init__(self, path: str, errors: list[tuple[int, str]]):
        self.errors = errors
        lines = "\n".join(f"  {path}:{ln}: {msg}" for ln, msg in errors)
        super().__init__(f"{len(errors)} bad line(s) in {path}; nothing was read:\n{lines}")


def load_shapes(path: str | Path) -> list[Problem]:
    """Parse a shapes file into problems; raises ShapesError listing every bad line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"shapes file {path} does not exist")
    if path.is_dir():  # a pipe or /dev/stdin reads as a file
        raise ValueError(f"shapes file {path} is a directory: give a .jsonl or .csv file")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's CSV export starts with a byte-order mark
    except UnicodeDecodeError:
        raise ValueError(f"shapes file {path} is not text (UTF-8): give a .jsonl or .csv file") from None
    if path.suffix:
        fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    else:  # a pipe (`--shapes <(...)`) has no suffix: JSON lines start with "{" (or a comment), a CSV with its header
        first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
        fmt = "jsonl" if first.startswith("{") else "csv"
    return parse_shapes(text, fmt=fmt, source=str(path))


def parse_shapes(text: str, fmt: str = "jsonl", source: str = "<shapes>") -> list[Problem]:
    if fmt not in ("jsonl", "csv"):
        raise ValueError(f"shapes format {fmt!r}: expected 'jsonl' or 'csv'")
    records = _jsonl_records(text) if fmt == "jsonl" else _csv_records(text)
    problems, errors = [], []
    for line_no, rec in records:
        if isinstance(rec, str):  # a parse error already
            errors.append((line_no, rec))
            continue
        try:
            problems.append(problem_from_record(rec, default_name=f"{Path(source).name}:{line_no}"))
        except (ValueError, TypeError) as exc:
            errors.append((line_no, str(exc)))
    if errors:
        raise ShapesError(source, errors)
    if not problems:
        raise ShapesError(source, [(0, "no problems in the file")])
    return problems


def _jsonl_records(text: str):
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            rec = json.loads(s, object_pairs_hook=_once_each)
        except json.JSONDecodeError as exc:
            yield i, f"not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        except _Twice as exc:
            yield i, str(exc)
            continue
        yield i, rec if isinstance(rec, dict) else f"expected a JSON object, got {type(rec).__name__}"


class _Twice(ValueError):
    pass


def _twice(names) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def _once_each(pairs: list[tuple]) -> dict:
    """A JSON object whose keys are all different: json.loads keeps the last of a repeated key, silently."""
    if twice := _twice([k for k, _ in pairs]):
        raise _Twice(f"field(s) {twice} given twice")
    return dict(pairs)


def _csv_records(text: str):
    lines = text.splitlines()
    body = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        return
    header_no, header = body[0]
    cols = [c.strip() for c in next(csv.reader([header]))]
    unknown = [c for c in cols if c not in FIELDS]
    if unknown:
        yield header_no, f"unknown column(s) {unknown} in the header; known: {list(FIELDS)}"
        return
    if twice := _twice(cols):  # a row's dict would keep the last column of the name, silently
        yield header_no, f"column(s) {twice} given twice in the header"
        return
    for i, ln in body[1:]:
        row = next(csv.reader(io.StringIO(ln)))
        if len(row) != len(cols):
            yield i, f"{len(row)} values for {len(cols)} columns"
            continue
        yield i, {c: v.strip() for c, v in zip(cols, row, strict=True) if v.strip() != ""}


def _int(rec: dict, key: str, low: int = 0, high: int = MAX_EXTENT) -> int:
    v = rec[key]
    if isinstance(v, bool):
        raise ValueError(f"{key}={v!r} is not an integer")
    if isinstance(v, int) or (isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v)):
        n = int(v)  # exactly: through a float, a seed past 2**53 became another, and 2**64 - 1 was "past" 2**64 - 1
    else:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{key}={v!r} is not an integer") from None
        if not f.is_integer():
            raise ValueError(f"{key}={v!r} is not an integer")
        n = int(f)
    if n < low:
        raise ValueError(f"{key}={n} must be >= {low}")
    if n > high:  # a group count past int32, a seed past torch's 64 bits: refused here, not deep in torch
        raise ValueError(f"{key}={v!r} is past {high}")
    return n


def _sizes(v) -> tuple[int, ...]:
    if isinstance(v, str):  # separated by spaces, ',', ';' or '|': an empty entry between two separators is refused
        text = v.strip().strip("[]").strip()
        v = re.split(r"\s*[,;|]\s*|\s+", text) if text else []
        if "" in v:  # else dropped: "16;;32" read as two groups where three were meant
            raise ValueError(f"sizes={text!r} has an empty entry: one size per group, e.g. 3,0,5")
    if not isinstance(v, list | tuple):
        raise ValueError(f"sizes={v!r} must be a list of integers")
    out = []
    for s in v:
        if isinstance(s, bool):  # a JSON true or false: float() read it as 1 or 0 (the other fields' _int refuses it)
            raise ValueError(f"sizes holds {s!r}, not an integer")
        try:
            f = float(s)
        except (TypeError, ValueError):
            raise ValueError(f"sizes holds {s!r}, not an integer") from None
        if not f.is_integer() or f < 0:
            raise ValueError(f"sizes holds {s!r}: sizes are integers >= 0")
        out.append(int(f))
    return tuple(out)


def problem_from_record(rec: dict, default_name: str = "") -> Problem:
    """One problem from a parsed line (JSON object or CSV row as strings)."""
    unknown = sorted(set(rec) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; known: {list(FIELDS)}")
    layout = str(rec.get("layout", "2d3d"))
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}; expected one of {sorted(LAYOUTS)}")
    if "groups" not in rec and "sizes" in rec and layout != "3d3d":  # the count of the sizes given
        rec = {**rec, "groups": len(_sizes(rec["sizes"]))}
    if "groups" not in rec:
        raise ValueError("groups is required")
    groups = _int(rec, "groups", 1)
    dtype = str(rec.get("dtype", "bfloat16"))
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    missing = [d for d in NEEDS[layout] if d not in rec]
    if missing:
        raise ValueError(f"layout {layout} needs {', '.join(NEEDS[layout])}; missing {', '.join(missing)}")
    given = {d: _int(rec, d, 0) for d in "mnk" if d not in NEEDS[layout] and rec.get(d) not in (None, "")}
    dims = {d: (_int(rec, d, 1) if d in NEEDS[layout] else 0) for d in "mnk"}
    drawn = [f for f in ("routing", "zipf_s", "seed") if f in rec]  # what draws the sizes from a total: else unused
    if layout == "3d3d":
        if "sizes" in rec or "total" in rec or drawn:
            raise ValueError("layout 3d3d is batched: it takes m, n, k and no sizes, total, routing, zipf_s or seed")
        sizes: tuple[int, ...] = ()
    elif "sizes" in rec:
        if "total" in rec or drawn:
            also = ", ".join(f for f in ("total", *drawn) if f in rec)
            raise ValueError(f"give either sizes or total + routing, not both (sizes beside {also})")
        sizes = _sizes(rec["sizes"])
        if len(sizes) != groups:
            raise ValueError(f"{len(sizes)} sizes for groups={groups}")
    elif "total" in rec:
        total = _int(rec, "total", 0)
        routing = str(rec.get("routing", "uniform"))
        if routing not in ROUTINGS:
            raise ValueError(f"routing={routing!r}; expected one of {ROUTINGS}")
        zipf_s = None
        if "zipf_s" in rec:
            if routing != "zipf":  # else unused: a line meant Zipf-skewed was drawn uniform
                raise ValueError(f"zipf_s shapes the zipf routing only (routing={routing!r}): give routing zipf")
            try:
                if isinstance(rec["zipf_s"], bool):  # a JSON true / false: float() reads it as 1 / 0
                    raise ValueError
                zipf_s = float(rec["zipf_s"])
            except (TypeError, ValueError):
                raise ValueError(f"zipf_s={rec['zipf_s']!r} is not a number") from None
            if not 0 < zipf_s <= 4:
                raise ValueError(f"zipf_s={zipf_s} must be in (0, 4]")
        seed = _int(rec, "seed", 0, 2**64 - 1) if "seed" in rec else 0
        sizes = distribute_rows(total, groups, routing, torch.Generator().manual_seed(seed), zipf_s)
    else:
        raise ValueError("give the per-group sizes, or total and routing")
    unused = [d for d, v in given.items() if v not in (0, sum(sizes))]
    if unused:  # a dimension the layout takes from the groups' sizes: another value would be silently dropped
        raise ValueError(f"layout {layout} takes {', '.join(NEEDS[layout])}; {', '.join(unused)} is the sum of the "
                         f"groups' sizes there ({sum(sizes)}: leave it out, or give 0 or that)")  # fmt: skip
    # name alone is only a label (not in the problem's id): a JSON null or "" is no label, as a blank CSV cell is (and
    # as a null m, n or k that the layout takes from the sizes is absent), so the line's own name, not "None". The
    # fields that choose the problem refuse null instead: a default there would collect another problem than meant.
    name = rec.get("name")
    return Problem(
        layout=layout,
        groups=groups,
        sizes=sizes,
        dtype=dtype,
        b_major=str(rec.get("b_major", "k")),
        a_major=str(rec.get("a_major", "k")),
        name=default_name if name in (None, "") else str(name),
        **dims,
    )
