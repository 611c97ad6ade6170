"""How the top 10 is filled: the ranker's best 10, its best 10 - h and h "hedge" configs, a capped tile count, or
a tail without twins.

Hedge (`--hedges`): the hedge configs are the first h of the fixed list (the greedy cover of the training problems,
the `fixed_list` baseline) that the ranker's part leaves out. Tile cap (`--tile-caps`): the ranker's order, skipping
a config while c of the list already share its output tile (block_m, block_n), so that the 10 span more tiles.
Distinct tail (`--distinct-after`): the ranker's best j, then its next configs less any that differs from one already
listed only in group_m or warp specialization (its "twin"), so that the last 10 - j slots go to other configs.

On the dev set only: the held-out scores that `benchmarks/dev_cv.py --scores DIR` writes, each inner fold's list
fitted on that fold's training problems (the dev set's other inner folds), so nothing here reads a problem that
`autoheur eval` reports on, and nothing is fitted again.

    python benchmarks/dev_cv.py --data data/nvidia-h100-80gb-hbm3 --variants base --seeds 0,1 --jobs 2 --scores DIR
    python benchmarks/list_fill.py DIR/base_seed0.parquet DIR/base_seed1.parquet [--hedges 0,1,2,3] [--tile-caps 3,4] \
        [--distinct-after 6,8]
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from autoheur.models.baselines import FixedList
from autoheur.models.metrics import evaluate, summarize


def fixed_list(frame: pd.DataFrame, k: int) -> list[str]:
    """The `fixed_list` baseline's list fitted on the problems of `frame`: `baselines.FixedList` itself, which reads
    only the frame's rows (their `rel_time`, as `RankingSet` computed it)."""
    return FixedList(k).fit(SimpleNamespace(frame=frame)).list_


def _ranked(out: np.ndarray, order: np.ndarray, front: list[int]) -> np.ndarray:
    """`out` rewritten so that the rows `front` come first, in that order, then the rest of `order` (one problem)."""
    taken = set(front)
    for pos, i in enumerate(front + [i for i in order if i not in taken]):
        out[i] = -float(pos)
    return out


def hedged(frame: pd.DataFrame, lists: dict[int, list[str]], h: int, k: int = 10) -> np.ndarray:
    """Scores whose top k is the ranker's best k - h, then the first h configs of the problem's inner-fold list
    not among them (the ranker's next where the list runs out); below those, the ranker's order."""
    out = frame["score"].to_numpy(dtype=float).copy()
    if h == 0:
        return out
    cids = frame["config_id"].to_numpy()
    folds = frame["inner_fold"].to_numpy()
    for idx in frame.groupby("problem_id", sort=False).indices.values():
        order = idx[np.argsort(-out[idx], kind="stable")]
        lead = list(order[: k - h])
        taken = set(cids[lead])
        hedge = [i for c in lists[int(folds[idx[0]])] if c not in taken for i in idx[cids[idx] == c]][:h]
        _ranked(out, order, lead + hedge)
    return out


def tile_capped(frame: pd.DataFrame, cap: int, k: int = 10) -> np.ndarray:
    """Scores whose top k is the ranker's order with at most `cap` configs per output tile; the rest below it."""
    out = frame["score"].to_numpy(dtype=float).copy()
    tiles = frame["config_id"].str.extract(r"^m(\d+)n(\d+)").agg("x".join, axis=1).to_numpy()
    for idx in frame.groupby("problem_id", sort=False).indices.values():
        order = idx[np.argsort(-out[idx], kind="stable")]
        lead, count = [], {}
        for i in order:
            if count.get(tiles[i], 0) < cap:
                lead.append(i)
                count[tiles[i]] = count.get(tiles[i], 0) + 1
                if len(lead) == k:
                    break
        _ranked(out, order, lead)
    return out


def twin_key(config_ids: pd.Series) -> pd.Series:
    """A config id less its group_m and warp-specialization parts: configs with one key differ in those alone."""
    return config_ids.str.replace(r"g\d+", "", regex=True).str.replace("-ws", "", regex=False)


def distinct_tail(frame: pd.DataFrame, keep: int, k: int = 10) -> np.ndarray:
    """Scores whose top k is the ranker's best `keep`, then its next configs less any that differs from one already
    listed only in group_m or warp specialization (`twin_key`); the rest below them, in the ranker's order."""
    out = frame["score"].to_numpy(dtype=float).copy()
    keys = twin_key(frame["config_id"]).to_numpy()
    for idx in frame.groupby("problem_id", sort=False).indices.values():
        order = idx[np.argsort(-out[idx], kind="stable")]
        lead = list(order[:keep])
        seen = {keys[i] for i in lead}
        for i in order[keep:]:
            if len(lead) >= k:
                break
            if keys[i] not in seen:
                lead.append(i)
                seen.add(keys[i])
        _ranked(out, order, lead)
    return out


def list_row(pp: pd.DataFrame) -> dict:
    """The figures of one way of filling the top 10, from `metrics.evaluate`'s per-problem frame."""
    s = summarize(pp)
    return {
        "best10": [round(s[f"eff_best10_{q}"], 4) for q in ("geomean", "p10", "min")],
        "hit": round(s["oracle_in_top10"], 4),
        "under_0.95": int((pp["eff_best10"] < 0.95).sum()),
        "under_0.97": int((pp["eff_best10"] < 0.97).sum()),
    }


def record(rows: list[dict], row: dict) -> None:
    """Keep one way's figures and print them as a JSON line."""
    rows.append(row)
    print(json.dumps(row), flush=True)


def write_rows(rows: list[dict], out: str | None) -> int:
    """All ways' figures to `out` (a JSON list), when given; the script's exit status."""
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scores", nargs="+", help="parquet files of dev_cv.py --scores")
    ap.add_argument("--hedges", default="0,1,2,3")
    ap.add_argument("--tile-caps", default="", help="e.g. 3,4,5 (empty: none)")
    ap.add_argument("--distinct-after", default="", help="e.g. 6,8 (empty: none): distinct_tail after that many")
    ap.add_argument("--list-len", type=int, default=10, help="length of each fold's fixed list")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = []
    for path in args.scores:
        frame = pd.read_parquet(path)
        folds = sorted(frame["inner_fold"].unique())
        lists = {int(f): fixed_list(frame[frame["inner_fold"] != f], args.list_len) for f in folds}
        kind = frame.groupby("problem_id", sort=False)["problem_name"].first().str.split("/").str[:2].str.join("/")
        ways = [("hedge", int(x)) for x in args.hedges.split(",") if x]
        ways += [("tile_cap", int(x)) for x in args.tile_caps.split(",") if x]
        ways += [("distinct_after", int(x)) for x in args.distinct_after.split(",") if x]
        for way, h in ways:
            if way == "hedge":
                score = hedged(frame, lists, h)
            elif way == "tile_cap":
                score = tile_capped(frame, h)
            else:
                score = distinct_tail(frame, h)
            pp = evaluate(frame.assign(score=score))
            small = pp["oracle_ms"] < 0.025
            row = {
                "scores": path, way: h, **list_row(pp),
                "min_from_0.025ms": round(float(pp.loc[~small, "eff_best10"].min()), 4),
                "hit_2d2d": round(float(pp["oracle_in_top10"][kind.reindex(pp.index) == "sampled/2d2d"].mean()), 4),
            }  # fmt: skip
            record(rows, row)
    return write_rows(rows, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
