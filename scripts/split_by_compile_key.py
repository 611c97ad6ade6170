"""Split a shapes file into N shares for N GPUs of one host, each compiling as few kernel variants as it can.

`autoheur collect --shard i/N` takes every N-th problem, so each GPU's share holds every compile key of the list and
each GPU precompiles all of them (about 100-110 s per key on 16 cores of an H100 host) before it times anything. Here
the problems of one compile key stay together, and a key is split over GPUs only where its problems alone would take
more than a GPU's fair share of the work. The work is modelled as `--compile-s` per key on a GPU plus `--problem-s`
per problem; the shares are filled longest first, each chunk to the least loaded GPU.

    python scripts/split_by_compile_key.py benchmarks/retest2_h100_problems.jsonl --parts 4 --out .cache/parts
    # then, per GPU i: autoheur collect --shapes .cache/parts/part{i}.jsonl ...

The lines are copied as they are (JSON lines only). Keys are computed as `autoheur collect` does on this machine's
device (on a machine without a GPU, with TRITON_INTERPRET=1, under the H100 rules), so run it where you collect.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def split(keys: list[str], parts: int, compile_s: float, problem_s: float) -> list[list[int]]:
    """Line indices per part, given each line's compile key."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        by_key[key].append(i)
    total = compile_s * len(by_key) + problem_s * len(keys)
    fair = total / parts
    chunks = []
    for lines in by_key.values():
        n = max(1, min(parts, math.ceil((compile_s + problem_s * len(lines)) / fair)))
        size = math.ceil(len(lines) / n)
        chunks += [lines[j : j + size] for j in range(0, len(lines), size)]
    chunks.sort(key=len, reverse=True)
    load = [0.0] * parts
    out: list[list[int]] = [[] for _ in range(parts)]
    for chunk in chunks:
        g = min(range(parts), key=lambda p: load[p])
        out[g] += chunk
        load[g] += compile_s + problem_s * len(chunk)
    return [sorted(p) for p in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", help="a JSON-lines shapes file")
    ap.add_argument("--parts", type=int, required=True)
    ap.add_argument("--out", required=True, help="directory for part0.jsonl ... part{N-1}.jsonl")
    ap.add_argument("--compile-s", type=float, default=110.0, help="precompile seconds per key and GPU")
    ap.add_argument("--problem-s", type=float, default=5.0, help="collection seconds per problem")
    args = ap.parse_args(argv)
    if args.parts < 1:
        ap.error("--parts must be at least 1")

    from autoheur.collect.runner import compile_key, device_spec
    from autoheur.collect.shapes import load_shapes

    path = Path(args.shapes)
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    problems = load_shapes(path)
    if len(problems) != len(lines):
        raise SystemExit(f"{path}: {len(lines)} lines but {len(problems)} problems; expected one problem per line")
    spec = device_spec()
    keys = [compile_key(p, spec) for p in problems]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, idx in enumerate(split(keys, args.parts, args.compile_s, args.problem_s)):
        (out / f"part{i}.jsonl").write_text("".join(lines[j] + "\n" for j in idx))
        print(json.dumps({"part": i, "problems": len(idx), "keys": len({keys[j] for j in idx})}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
