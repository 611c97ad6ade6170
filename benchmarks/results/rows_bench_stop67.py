"""Stop 67: the shipped H100 fit's row choice, stop 66's code against stop 67's, on one loaded training set (the H100
data and the H200's problems it lacks, as `autoheur train --aux-new-only` builds it); each step timed 3 times, the best
kept, the outputs compared. Run from the repository root: `python3 benchmarks/results/rows_bench_stop67.py`."""

import time

import numpy as np

import autoheur.models.data as D
from autoheur.models import rankers as R
from autoheur.models.data import AUX_ROWS, load_auxiliary, load_ranking_set, new_problems_only, sample_rows

new_problem_rows = D.problem_rows


def old_problem_rows(rs, within):  # stop 66's, verbatim
    groups = rs.frame.groupby("problem_id", sort=False).indices.items()
    return [(pid, idx) for pid, idx in groups if within is None or within[idx[0]]]


def old_sample_rows(*a):
    D.problem_rows = old_problem_rows
    try:
        return sample_rows(*a)
    finally:
        D.problem_rows = new_problem_rows


def best(f, n=3):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return min(ts), out


H100 = "data/nvidia-h100-80gb-hbm3"
rs = load_ranking_set(H100)
train = rs.with_auxiliary(new_problems_only(load_auxiliary(["data/nvidia-h200"], H100, False, AUX_ROWS), rs))
print("rows", len(train.frame), "problems", len(train.problems), flush=True)
m = R.XGBRankerModel(aux_share=0.5)
route = m._route(train.X)

for e in np.unique(route).tolist():
    within = route == e
    print(f"expert {e}: {within.sum()} rows", flush=True)
    t_old, a = best(lambda within=within: old_problem_rows(train, within))
    t_new, b = best(lambda within=within: new_problem_rows(train, within))
    assert [p for p, _ in a] == [p for p, _ in b] and all(
        np.array_equal(x, y) for (_, x), (_, y) in zip(a, b, strict=True)
    )
    print(f"  problem_rows        old {t_old:6.2f} s  new {t_new:6.2f} s  ({len(a)} problems, same)", flush=True)
    t_old, a = best(lambda within=within: old_sample_rows(train, m.per_problem, m.top, 0, within, 0.5))
    t_new, b = best(lambda within=within: sample_rows(train, m.per_problem, m.top, 0, within, 0.5))
    assert np.array_equal(a.X, b.X) and a.frame.equals(b.frame)
    print(f"  sample_rows         old {t_old:6.2f} s  new {t_new:6.2f} s  (same rows)", flush=True)

    def old_near(within=within):  # the config keys computed twice, as stop 66's fit did
        o = R.XGBRankerModel(aux_share=0.5)
        o.seen_keys_, o.near_keys_, o.near_rel_ = R.near_best_configs(train, within)
        return o._near_rows(train.X, o.train_near_pct, within)

    def new_near(within=within):
        n = R.XGBRankerModel(aux_share=0.5)
        n.seen_keys_, n.near_keys_, n.near_rel_, keys = R._near_best(train, within)
        return n._near_rows(train.X, n.train_near_pct, within, keys)

    t_old, a = best(old_near)
    t_new, b = best(new_near)
    assert np.array_equal(a, b)
    print(f"  near-best + rows    old {t_old:6.2f} s  new {t_new:6.2f} s  (same mask)", flush=True)
