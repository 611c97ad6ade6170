"""How good a config ranking is for a problem: relevance labels, per-problem metrics, and their summary.

A ranker scores every config of a problem; the kernel then runs either the top-1 config or a brief autotune of the
top k (best-of-k). The metrics here measure both against the problem's oracle, the fastest "ok" config.

Conventions, shared by `problem_metrics` (one problem, plain arrays, the readable reference) and `evaluate` (a whole
frame, vectorized; a test holds the two equal):

- Usable configs have status "ok" or "censored" (schema.TIMED_STATUSES) and a finite time; the rest (invalid,
  compile_error, out_of_resources, wrong, crashed) rank with time = inf: picking one scores efficiency 0, and a
  best-of-k autotune skips it, though it still takes one of the k slots.
- Efficiency = oracle_ms / time of the pick, in [0, 1]. A censored config's median_ms is a lower bound: its one
  round-1 run (the faster of two where the abort was confirmed) took more than the collection's abort factor times
  the best round-1 run of its problem (2x since timing protocol v4, collect/runner.py's CollectOptions; 3x under v3),
  and it was timed no further (collect/timing.py). Picking it scores an upper bound of its true efficiency. That
  bound is near 1/2, not below it: the best round-1 run is one run, often faster than the median the oracle is later
  taken from (and the retime, refine and polish passes move the oracle again), so a censored time can stand below 2x
  the oracle (1.82x in the test slice of the H100 set, tests/models/conftest.py).
- Scores: higher is better. Ties are broken by config order (a stable sort: the earlier array element or frame row
  ranks first), so the metrics are deterministic; a NaN score ranks as -inf.
- A problem with no "ok" config has no oracle: its efficiencies and NDCG are NaN, and `summarize` skips it.

No torch here (autoheur.collect.schema imports it, so its status names are mirrored below and a test keeps them equal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

# Mirrors autoheur.collect.schema.TIMED_STATUSES: the statuses that carry a time.
USABLE_STATUSES = ("ok", "censored")

# Relevance label = how many of these thresholds r = time / oracle is <= to: 6 for the oracle (r == 1, ties share it),
# 5 within 2%, 4 within 5%, 3 within 10%, 2 within 25%, 1 within 50%, 0 beyond 1.5x or failed or censored.
# Why: the oracle is what the ranker is after; 2% is about the run-to-run spread of a GPU timing, so it is "the oracle
# within noise"; 5% and 10% are what a picked config may lose and still be a good pick; 25% and 50% separate poor from
# hopeless so the ranker learns the shape of the tail. Censored configs were aborted at 2x the best round-1 run (see
# the module docstring; about 1.8x the oracle at the least), beyond the last threshold: label 0 like failures. Labels
# are <= 31, as xgboost's exponential-gain NDCG requires.
RELEVANCE_THRESHOLDS = (1.00, 1.02, 1.05, 1.10, 1.25, 1.50)

DEFAULT_KS = (1, 5, 10)
NDCG_K = 10  # ndcg10 cuts the ranking here
HIT_K = 10  # oracle_in_top10 looks this deep

# Geomean floor: an efficiency of 0 (a failed pick) counts as 0.01, a 100x slowdown. Without a floor a single failure
# makes the geomean 0 and hides everything else; with it, one failure in 100 problems costs 4.5% of the geomean
# (0.01 ** (1/100) = 0.955), a visible penalty. `summarize` reports the fraction of zeros beside it.
GEOMEAN_FLOOR = 0.01


def _relevance(times: np.ndarray, ok: np.ndarray, oracle: np.ndarray | float) -> np.ndarray:
    """Labels from times, an "ok" mask and the oracle (a scalar or one per element)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = times / oracle
    return graded_labels(r, ok)


def graded_labels(
    rel_time: np.ndarray, ok: np.ndarray, thresholds: Sequence[float] = RELEVANCE_THRESHOLDS
) -> np.ndarray:
    """Label = how many `thresholds` the relative time (time / oracle) is <= to; 0 where not `ok` or not finite."""
    th = np.asarray(thresholds, dtype=np.float64)
    r = np.asarray(rel_time, dtype=np.float64)
    labels = len(th) - np.searchsorted(th, np.where(np.asarray(ok) & np.isfinite(r), r, np.inf), side="left")
    return labels.astype(np.int64)


def relevance(times_ms: np.ndarray, statuses: Sequence[str]) -> np.ndarray:
    """Graded relevance labels (int, 0..len(RELEVANCE_THRESHOLDS)) of one problem's configs, for learning to rank.

    Relative to the problem's best "ok" time; failed and censored configs get 0; all 0 if no config is "ok".
    """
    times, ok, _ = _masks(times_ms, statuses)
    oracle = times[ok].min() if ok.any() else math.nan
    return _relevance(times, ok, oracle)


def _masks(times_ms, statuses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    times = np.asarray(times_ms, dtype=np.float64)
    st = np.asarray(statuses, dtype=object)
    if times.shape != st.shape or times.ndim != 1:
        raise ValueError(f"times_ms {times.shape} and statuses {st.shape} must be 1-D and of one length")
    finite = np.isfinite(times)
    return times, (st == "ok") & finite, np.isin(st, USABLE_STATUSES) & finite


def _dcg_discount(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(n) + 2.0)


def _gain(labels: np.ndarray) -> np.ndarray:
    return np.exp2(labels.astype(np.float64)) - 1.0


def _count_inversions(a: np.ndarray) -> int:
    """Pairs i < j with a[i] > a[j] (strict), for non-negative ints: a bottom-up merge sort, one numpy pass a level."""
    n = len(a)
    span = int(a.max()) + 1 if n else 1
    pos = np.arange(n)
    a = a.astype(np.int64)
    total, width = 0, 1
    while width < n:
        pair = pos // (2 * width)
        left = (pos % (2 * width)) < width
        key = pair * span + a  # sorted within each half (the previous level sorted them), pairs ascending
        kl, kr, pr = key[left], key[~left], pair[~left]
        # For each right element: left elements of its pair that are greater = end of its pair's left half - (<= it).
        total += int((np.searchsorted(kl, (pr + 1) * span, "left") - np.searchsorted(kl, kr, "right")).sum())
        a = np.sort(key) - pair * span  # merge the halves: each pair keeps its slots
        width *= 2
    return total


def _ranks(v: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ranks of v and the number of tied pairs in it."""
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    return inverse.ravel(), int((counts * (counts - 1) // 2).sum())


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of x and y, O(n log n), ties in either allowed (scipy.stats.kendalltau's default variant).

    NaN when there are fewer than two values or x or y is constant. Infinite values are fine (equal ones tie); NaNs are
    not (callers replace them).
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = len(x)
    if n < 2:
        return math.nan
    (xr, xtie), (yr, ytie) = _ranks(x), _ranks(y)
    tot = n * (n - 1) // 2
    if xtie == tot or ytie == tot:
        return math.nan
    _, both = _ranks(xr * (int(yr.max()) + 1) + yr)
    # Sorted by x then y, an inversion in y is a discordant pair (x-ties are sorted by y, so they add none).
    discordant = _count_inversions(yr[np.lexsort((yr, xr))])
    concordant_minus_discordant = tot - xtie - ytie + both - 2 * discordant
    return float(concordant_minus_discordant / math.sqrt(tot - xtie) / math.sqrt(tot - ytie))


def _tau_times(times: np.ndarray, usable: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Times for Kendall's tau over usable configs: censored ones tie with each other below every "ok" config.

    A censored time is only a lower bound, so ordering censored configs among themselves would be noise. Putting them
    all below the "ok" ones is an approximation: an "ok" config can be slower than a censored one's bound (censoring
    compares with the best time so far, not the final best), but both are hopeless picks either way.
    """
    return np.where(ok, times, np.inf)[usable]


def problem_metrics(
    times_ms: np.ndarray, statuses: Sequence[str], scores: np.ndarray, ks: Sequence[int] = DEFAULT_KS
) -> dict:
    """Metrics of one problem's ranking (see the module docstring for the conventions).

    Keys: n_configs, oracle_ms, eff_top1, eff_best{k} for each k > 1 in ks (k = 1 is eff_top1), oracle_in_top10 (a
    config with exactly the oracle time is among the top 10), ndcg10 (exponential gain 2**label - 1 over `relevance`
    labels, log2 discount), kendall_tau (tau-b between -score and time over usable configs; 1 = perfect order).
    """
    times, ok, usable = _masks(times_ms, statuses)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != times.shape:
        raise ValueError(f"scores {s.shape} and times_ms {times.shape} must be of one length")
    s = np.where(np.isnan(s), -np.inf, s)
    n = len(times)
    oracle = float(times[ok].min()) if ok.any() else math.nan
    order = np.argsort(-s, kind="stable")
    picks = np.where(usable, times, np.inf)[order]

    out: dict = {"n_configs": n, "oracle_ms": oracle}
    out["eff_top1"] = float(oracle / picks[0]) if n else math.nan
    for k in ks:
        if k > 1:
            out[f"eff_best{k}"] = float(oracle / picks[:k].min()) if n else math.nan
    out["oracle_in_top10"] = bool(np.any(ok[order][:HIT_K] & (times[order][:HIT_K] == oracle)))

    labels = _relevance(times, ok, oracle)
    discount = _dcg_discount(min(NDCG_K, n))
    ideal = float(np.sum(_gain(np.sort(labels)[::-1][:NDCG_K]) * discount))
    dcg = float(np.sum(_gain(labels[order][:NDCG_K]) * discount))
    out["ndcg10"] = dcg / ideal if ideal > 0 else math.nan
    out["kendall_tau"] = kendall_tau_b(-s[usable], _tau_times(times, usable, ok))
    return out


def evaluate(
    df: pd.DataFrame,
    score_col: str = "score",
    problem_col: str = "problem_id",
    ks: Sequence[int] = DEFAULT_KS,
    time_col: str = "median_ms",
    status_col: str = "status",
) -> pd.DataFrame:
    """`problem_metrics` of every problem in a frame of dataset rows carrying a score column, vectorized.

    One row per problem, indexed by problem id in order of first appearance; score ties break by row order.
    """
    codes, uniques = pd.factorize(df[problem_col], sort=False)
    times, ok, usable = _masks(df[time_col].to_numpy(), df[status_col].to_numpy())
    s = df[score_col].to_numpy(dtype=np.float64)
    s = np.where(np.isnan(s), -np.inf, s)
    n_problems, n = len(uniques), len(times)
    if (codes < 0).any():
        raise ValueError(f"column {problem_col!r} holds nulls")
    columns = ["n_configs", "oracle_ms", "eff_top1", *[f"eff_best{k}" for k in ks if k > 1]]
    columns += ["oracle_in_top10", "ndcg10", "kendall_tau"]
    if n == 0:
        return pd.DataFrame(columns=columns, index=pd.Index([], name=problem_col))

    # Rows by problem, then score descending, then row order: each problem's ranking, problems contiguous.
    by_score = np.argsort(-s, kind="stable")
    order = by_score[np.argsort(codes[by_score], kind="stable")]
    code = codes[order]
    starts = np.searchsorted(code, np.arange(n_problems))
    rank = np.arange(n) - starts[code]
    t, k_ok, k_usable = times[order], ok[order], usable[order]
    picks = np.where(k_usable, t, np.inf)

    oracle_of = np.minimum.reduceat(np.where(k_ok, t, np.inf), starts)
    oracle_of[np.isinf(oracle_of)] = np.nan
    oracle = oracle_of[code]
    out = {"n_configs": np.bincount(codes, minlength=n_problems), "oracle_ms": oracle_of}
    with np.errstate(invalid="ignore"):
        out["eff_top1"] = oracle_of / picks[starts]
        for k in ks:
            if k > 1:
                out[f"eff_best{k}"] = oracle_of / np.minimum.reduceat(np.where(rank < k, picks, np.inf), starts)
    hit = (rank < HIT_K) & k_ok & (t == oracle)
    out["oracle_in_top10"] = np.maximum.reduceat(hit, starts)

    labels = _relevance(t, k_ok, oracle)
    discount = np.zeros(n)
    top = rank < NDCG_K
    discount[top] = _dcg_discount(NDCG_K)[rank[top]]
    top_label = len(RELEVANCE_THRESHOLDS)
    ideal_key = np.sort(code * (top_label + 1) + (top_label - labels))  # same problem layout, labels descending
    ideal_labels = top_label - ideal_key % (top_label + 1)
    dcg = np.add.reduceat(_gain(labels) * discount, starts)
    ideal = np.add.reduceat(_gain(ideal_labels) * discount, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["ndcg10"] = np.where(ideal > 0, dcg / ideal, np.nan)

    # Tau over each problem's usable rows; as in `_tau_times`, censored configs tie below every "ok" one.
    neg_s, tau_t = -s[order][k_usable], np.where(k_ok, t, np.inf)[k_usable]
    bounds = np.append(0, np.cumsum(np.add.reduceat(k_usable.astype(np.int64), starts)))
    tau = np.array([kendall_tau_b(neg_s[a:b], tau_t[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    out["kendall_tau"] = tau
    return pd.DataFrame(out, index=pd.Index(uniques, name=problem_col))[columns]


def summarize(per_problem: pd.DataFrame) -> dict:
    """Figures over problems: for each eff_* column its geomean (floored at GEOMEAN_FLOOR), P10, min and fraction of
    zeros (failed picks); the mean of oracle_in_top10, ndcg10 and kendall_tau (NaN taus skipped).

    Problems without an oracle (no "ok" config) are skipped and counted in n_no_oracle. P10 is numpy's linearly
    interpolated 10th percentile.
    """
    has_oracle = per_problem["oracle_ms"].notna()
    pp = per_problem[has_oracle]
    out: dict = {"n_problems": int(len(pp)), "n_no_oracle": int((~has_oracle).sum())}
    for col in [c for c in pp.columns if c.startswith("eff_")]:
        v = pp[col].to_numpy(dtype=np.float64)
        if len(v):
            out[f"{col}_geomean"] = float(np.exp(np.mean(np.log(np.maximum(v, GEOMEAN_FLOOR)))))
            out[f"{col}_p10"] = float(np.percentile(v, 10))
            out[f"{col}_min"] = float(v.min())
            out[f"{col}_zero_frac"] = float(np.mean(v == 0))
        else:
            out.update({f"{col}_{s}": math.nan for s in ("geomean", "p10", "min", "zero_frac")})
    for col in ("oracle_in_top10", "ndcg10", "kendall_tau"):
        v = pp[col].to_numpy(dtype=np.float64)
        v = v[~np.isnan(v)]
        out[col] = float(v.mean()) if len(v) else math.nan
    return out
