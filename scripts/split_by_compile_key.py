"""Split a shapes file into N shares for N GPUs of one host, each compiling as few kernel variants as it can.

`autoheur collect --shard i/N` takes every N-th problem, so each GPU's share holds every compile key of the list and
each GPU precompiles all of them (about 100-110 s per key on 16 cores of an H100 host) before it times anything. Here
the problems of one compile key stay together, and a key is split over GPUs only where its problems alone would take
the longest share. The work is modelled as `--compile-s` per key on a GPU plus `--problem-s` per problem; the shares
are filled longest chunk first, each to the least loaded GPU, and a key is cut into one more chunk while that makes
the longest share shorter.

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


def _assign(by_key: dict[str, list[int]], pieces: dict[str, int], parts: int, compile_s: float, problem_s: float):
    """Each key's lines in `pieces[key]` even chunks, longest first, each to the least loaded part: (parts, loads)."""
    chunks = []
    for key, lines in by_key.items():
        size = math.ceil(len(lines) / pieces[key])
        chunks += [(key, lines[j : j + size]) for j in range(0, len(lines), size)]
    chunks.sort(key=lambda c: len(c[1]), reverse=True)
    load = [0.0] * parts
    out: list[list[tuple[str, list[int]]]] = [[] for _ in range(parts)]
    for chunk in chunks:
        g = min(range(parts), key=lambda p: load[p])
        out[g].append(chunk)
        load[g] += compile_s + problem_s * len(chunk[1])
    return out, load


def split(keys: list[str], parts: int, compile_s: float, problem_s: float) -> list[list[int]]:
    """Line indices per part, given each line's compile key. Every key starts whole; while splitting one more key
    of the most loaded part (into one more chunk) lowers the most loaded part's work, the best such split is made."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        by_key[key].append(i)
    pieces = dict.fromkeys(by_key, 1)
    out, load = _assign(by_key, pieces, parts, compile_s, problem_s)
    while True:
        worst = max(range(parts), key=lambda p: load[p])
        tries = []
        for key in {k for k, _ in out[worst]}:
            if pieces[key] < min(parts, len(by_key[key])):
                trial = {**pieces, key: pieces[key] + 1}
                tries.append((max(_assign(by_key, trial, parts, compile_s, problem_s)[1]), key))
        if not tries or min(tries)[0] >= max(load):
            break
        pieces[min(tries)[1]] += 1
        out, load = _assign(by_key, pieces, parts, compile_s, problem_s)
    return [sorted(i for _, lines in part for i in lines) for part in out]


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
