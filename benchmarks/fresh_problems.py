"""A fresh problem list, for a reading of the shipped design that no choice has seen: new draws of the collection's
own generators (another seed), less every problem `models/design-seen.txt` lists (all shipped ids, whatever choices
have seen since), as a shapes file for `autoheur collect --shapes`.

Four streams of the same kinds the datasets hold, taken in turn, so that any prefix of the file (a device call that
stops early) is an even mix:
  1. public-model forwards (`model_problems`: the models' grid, the routing drawn again),
  2. their gradients (`backward_problems`: grad_a, grad_b in turn),
  3. sampled problems beyond the models: 2D x 3D bf16, 2D x 3D fp16, 2D x 2D bf16 (weight-gradient majors) in turn,
  4. sampled input gradients (`sampled_grad_a_problems`, another seed than stream 3's, so other shapes).
Each line carries the exact sizes, and the script checks that it parses back to its problem id.
`--only 2d2d-zipf` draws the sampled 2D x 2D bf16 generator alone (its own sequence, not stream 3's), Zipf routing
only: the kind that sets the GroupKFolds' best-of-10 min (tiny, skewed weight gradients), for a reading of that tail
on problems no choice has seen.

  python benchmarks/fresh_problems.py --seed 79 --count 1200 --out benchmarks/fresh_s79_problems.jsonl
  python benchmarks/fresh_problems.py --seed 80 --count 600 --only 2d2d-zipf --out benchmarks/fresh_s80_problems.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.collect import workloads as wl  # noqa: E402
from autoheur.collect.schema import PROBLEM_FIELDS, problem_id  # noqa: E402
from autoheur.collect.shapes import load_shapes  # noqa: E402
from autoheur.models.design_seen import SEEN_FILE, read_seen  # noqa: E402
from benchmarks.by_kind import kind  # noqa: E402

ONLY = ("all", "2d2d-zipf")


def streams(seed: int, only: str = "all"):
    """The four streams, drawn as they are taken: the models' end with their grid (about 900 forwards, 1,800
    gradients), the sampled ones have no end, so `fresh` always finds the problems it is asked for. `only="2d2d-zipf"`:
    one stream, the sampled 2D x 2D bf16 problems whose routing is Zipf (about a quarter of that generator's)."""
    if only == "2d2d-zipf":
        sampled = wl._sampled_stream(seed, (("2d2d", "bfloat16"),))
        return [(p for p in sampled if p.name.endswith("/zipf"))]  # one stream, without end
    if only != "all":
        raise ValueError(f"only={only!r}: expected one of {ONLY}")
    combos = (("2d3d", "bfloat16"), ("2d3d", "float16"), ("2d2d", "bfloat16"))  # three shapes from one generator
    return [wl._model_problem_stream(seed), wl._backward_stream(seed), wl._sampled_stream(seed, combos),
            wl._sampled_grad_a_stream(seed + 1)]  # fmt: skip


def fresh(seed: int, count: int, seen: set[str], only: str = "all") -> list:
    """`count` problems of the streams in turn, none in `seen`, no id twice. The turns stay even while every stream
    lasts: for lists up to about 3,600 (the models' grid ends there)."""
    out, ids = [], set(seen)
    for group in itertools.zip_longest(*streams(seed, only)):
        for p in group:
            if p is None:  # a stream that ended
                continue
            pid = problem_id(p)
            if pid in ids:
                continue
            ids.add(pid)
            out.append(p)
            if len(out) == count:
                return out
    raise AssertionError("the sampled stream has no end")  # pragma: no cover


def record(p) -> dict:
    rec = {f: getattr(p, f) for f in PROBLEM_FIELDS if f != "sizes"}
    return {**rec, "name": p.name, "sizes": [int(s) for s in p.sizes]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True, help="the generators' seed (the datasets' own: 0)")
    ap.add_argument("--count", type=int, default=1200)
    ap.add_argument("--seen", default=str(SEEN_FILE), help="the ids to leave out (default: %(default)s)")
    ap.add_argument("--only", choices=ONLY, default="all", help="the streams to draw from (default: %(default)s)")
    ap.add_argument("--out", required=True, help="the shapes file (.jsonl) to write")
    args = ap.parse_args(argv)
    if args.seed < 1:  # 0: the datasets' own lists; -1: stream 4's seed + 1 would be theirs
        ap.error(f"--seed {args.seed}: take a seed of 1 or more (0 draws the datasets' own lists)")
    seen = read_seen(Path(args.seen))
    if seen is None:
        ap.error(f"{args.seen} does not exist: without it no problem is known to be unseen")
    problems = fresh(args.seed, args.count, seen, args.only)
    Path(args.out).write_text("".join(json.dumps(record(p)) + "\n" for p in problems))
    back = load_shapes(args.out)
    assert [problem_id(p) for p in back] == [problem_id(p) for p in problems], "a line does not parse back"
    print(f"{len(problems)} problems to {args.out} (left out: {len(seen)} seen ids)")
    kinds = Counter(f"{kind(p.name)} {p.dtype}" for p in problems)
    for k, v in sorted(kinds.items()):
        print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
