"""Ranking metrics on hand-computed cases, and the vectorized `evaluate` against the per-problem reference."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from autoheur.models.metrics import (
    RELEVANCE_THRESHOLDS,
    USABLE_STATUSES,
    _count_inversions,
    evaluate,
    kendall_tau_b,
    problem_metrics,
    relevance,
    summarize,
)

NAN = math.nan


def test_usable_statuses_mirror_the_schema():
    from autoheur.collect.schema import TIMED_STATUSES

    assert USABLE_STATUSES == TIMED_STATUSES


def test_relevance_levels():
    assert RELEVANCE_THRESHOLDS == (1.00, 1.02, 1.05, 1.10, 1.25, 1.50)
    times = [1.0, 1.0, 1.02, 1.0201, 1.05, 1.1, 1.25, 1.5, 1.51, 0.5, 0.9]
    statuses = ["ok"] * 9 + ["censored", "wrong"]  # neither of the last two is the oracle, both get 0
    assert relevance(np.array(times), statuses).tolist() == [6, 6, 5, 4, 4, 3, 2, 1, 0, 0, 0]


def test_relevance_without_an_ok_config_is_all_zero():
    assert relevance(np.array([3.0, NAN]), ["censored", "crashed"]).tolist() == [0, 0]


def test_two_oracle_configs_tie():
    # times 2, 1, 1, 3; ranked in array order. Oracle 1 is shared by configs 1 and 2.
    m = problem_metrics(np.array([2.0, 1.0, 1.0, 3.0]), ["ok"] * 4, np.array([4.0, 3.0, 2.0, 1.0]))
    assert m["oracle_ms"] == 1.0 and m["n_configs"] == 4
    assert m["eff_top1"] == 0.5
    assert m["eff_best5"] == 1.0 and m["eff_best10"] == 1.0
    assert m["oracle_in_top10"] is True
    assert relevance(np.array([2.0, 1.0, 1.0, 3.0]), ["ok"] * 4).tolist() == [0, 6, 6, 0]


def test_score_ties_break_by_config_order():
    times = np.array([3.0, 1.0, 2.0])
    m = problem_metrics(times, ["ok"] * 3, np.array([1.0, 1.0, 0.0]), ks=(1, 2))
    assert m["eff_top1"] == pytest.approx(1 / 3)  # config 0 comes first among the tied scores
    assert m["eff_best2"] == 1.0
    assert "eff_best1" not in m  # k = 1 is eff_top1
    m = problem_metrics(times[[1, 0, 2]], ["ok"] * 3, np.array([1.0, 1.0, 0.0]))
    assert m["eff_top1"] == 1.0


def test_nan_scores_rank_last():
    m = problem_metrics(np.array([1.0, 2.0]), ["ok", "ok"], np.array([NAN, 0.0]))
    assert m["eff_top1"] == 0.5


def test_censored_pick_scores_an_upper_bound():
    # The censored config's 4.0 ms is a lower bound: 1/4 bounds its true efficiency from above (and it is <= 1/3).
    times = np.array([4.0, 1.0, 1.5])
    m = problem_metrics(times, ["censored", "ok", "ok"], np.array([3.0, 2.0, 1.0]))
    assert m["eff_top1"] == 0.25
    assert m["eff_best5"] == 1.0
    assert relevance(times, ["censored", "ok", "ok"]).tolist() == [0, 6, 1]


def test_failed_pick_scores_zero_and_autotune_skips_it():
    # A failed config keeps its slot in the top k but is skipped; a failed row's time (even a small one) is ignored.
    times = np.array([NAN, 0.5, 2.0, 1.0])
    statuses = ["compile_error", "invalid", "ok", "ok"]
    m = problem_metrics(times, statuses, np.array([4.0, 3.0, 2.0, 1.0]), ks=(1, 2, 3, 5))
    assert m["oracle_ms"] == 1.0
    assert m["eff_top1"] == 0.0
    assert m["eff_best2"] == 0.0  # both slots failed
    assert m["eff_best3"] == 0.5
    assert m["eff_best5"] == 1.0


def test_all_top_k_unusable():
    m = problem_metrics(np.array([NAN, NAN, 1.0]), ["wrong", "crashed", "ok"], np.array([3.0, 2.0, 1.0]), ks=(2, 5))
    assert m["eff_top1"] == 0.0 and m["eff_best2"] == 0.0 and m["eff_best5"] == 1.0


def test_no_ok_config_has_no_oracle():
    m = problem_metrics(np.array([5.0, NAN]), ["censored", "out_of_resources"], np.array([1.0, 0.0]))
    assert math.isnan(m["oracle_ms"]) and math.isnan(m["eff_top1"]) and math.isnan(m["ndcg10"])
    assert m["oracle_in_top10"] is False


def test_oracle_in_top10_needs_the_exact_oracle_time():
    times = np.array([1.0001] * 10 + [1.0])
    scores = -np.arange(11.0)  # the oracle is ranked 11th
    assert problem_metrics(times, ["ok"] * 11, scores)["oracle_in_top10"] is False
    assert problem_metrics(times, ["ok"] * 11, -scores)["oracle_in_top10"] is True


def test_ndcg_perfect_and_reversed():
    times = np.array([1.0, 1.01, 1.04, 1.2, 2.0])  # labels 6, 5, 4, 2, 0: gains 63, 31, 15, 3, 0
    ok = ["ok"] * 5
    assert problem_metrics(times, ok, -times)["ndcg10"] == pytest.approx(1.0)
    ideal = 63 / math.log2(2) + 31 / math.log2(3) + 15 / math.log2(4) + 3 / math.log2(5)  # 91.35084
    reversed_ = 0 + 3 / math.log2(3) + 15 / math.log2(4) + 31 / math.log2(5) + 63 / math.log2(6)  # 47.11548
    ndcg = problem_metrics(times, ok, times)["ndcg10"]
    assert ndcg == pytest.approx(reversed_ / ideal)
    assert ndcg == pytest.approx(0.515764, abs=1e-6)  # 47.11548 / 91.35084


def test_ndcg_cuts_at_10():
    times = np.array([1.0] + [1.3] * 10)  # the oracle ranked 11th leaves 10 configs of label 1 in the top 10
    ndcg = problem_metrics(times, ["ok"] * 11, np.arange(11.0))["ndcg10"]
    discount = 1 / np.log2(np.arange(10) + 2)
    assert ndcg == pytest.approx(discount.sum() / (63 + discount[1:].sum()))


def test_kendall_tau_perfect_reversed_and_censored_ties():
    times = np.array([1.0, 2.0, 3.0, 4.0])
    ok = ["ok"] * 4
    assert problem_metrics(times, ok, -times)["kendall_tau"] == pytest.approx(1.0)
    assert problem_metrics(times, ok, times)["kendall_tau"] == pytest.approx(-1.0)
    # Two censored configs (lower bounds 4.0 and 3.5) tie at the bottom: 5 concordant pairs, 1 pair tied in time,
    # tau-b = 5 / sqrt(6 * 5). Ordered by their bounds, the pair would count as discordant: (5 - 1) / 6.
    m = problem_metrics(
        np.array([1.0, 2.0, 4.0, 3.5, NAN]), ["ok", "ok", "censored", "censored", "wrong"], -np.arange(5)
    )
    assert m["kendall_tau"] == pytest.approx(5 / math.sqrt(30))


def test_kendall_tau_b_with_ties_by_hand():
    # x = 1 1 2, y = 1 2 2: pairs (0,1) tied in x, (1,2) tied in y, (0,2) concordant: 1 / sqrt(2 * 2).
    assert kendall_tau_b(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 2.0])) == pytest.approx(0.5)
    assert math.isnan(kendall_tau_b(np.array([1.0, 2.0]), np.array([3.0, 3.0])))
    assert math.isnan(kendall_tau_b(np.array([1.0]), np.array([3.0])))


def test_kendall_tau_b_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 64, 300):
        x = rng.integers(0, 5, n).astype(float)
        y = rng.integers(0, 9, n).astype(float)
        y[rng.random(n) < 0.2] = np.inf
        expected = stats.kendalltau(x, y).statistic
        assert kendall_tau_b(x, y) == pytest.approx(expected, nan_ok=True)


def test_count_inversions_brute_force():
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 5, 16, 33, 100):
        a = rng.integers(0, 6, n)
        brute = sum(1 for i, j in combinations(range(n), 2) if a[i] > a[j])
        assert _count_inversions(a) == brute


def test_summarize_by_hand():
    per = pd.DataFrame(
        {
            "n_configs": [3, 3, 3, 3, 2],
            "oracle_ms": [1.0, 1.0, 1.0, 1.0, NAN],
            "eff_top1": [1.0, 0.5, 0.0, 0.8, NAN],
            "oracle_in_top10": [True, False, True, True, False],
            "ndcg10": [1.0, 0.5, 0.25, 0.25, NAN],
            "kendall_tau": [1.0, NAN, -0.5, 0.0, NAN],
        }
    )
    s = summarize(per)
    assert s["n_problems"] == 4 and s["n_no_oracle"] == 1
    assert s["eff_top1_geomean"] == pytest.approx((1.0 * 0.5 * 0.01 * 0.8) ** 0.25)  # 0 floored to 0.01: 0.25149
    assert s["eff_top1_geomean"] == pytest.approx(0.251487, abs=1e-6)
    assert s["eff_top1_p10"] == pytest.approx(0.15)  # sorted 0, .5, .8, 1: 0.3 of the way from 0 to .5
    assert s["eff_top1_min"] == 0.0
    assert s["eff_top1_zero_frac"] == 0.25
    assert s["oracle_in_top10"] == 0.75
    assert s["ndcg10"] == 0.5
    assert s["kendall_tau"] == pytest.approx(1 / 6)  # NaN skipped: (1 - 0.5 + 0) / 3


def random_frame(seed: int, n_problems: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    statuses = ["ok", "ok", "ok", "censored", "invalid", "compile_error", "out_of_resources", "wrong", "crashed"]
    for p in range(n_problems):
        n = int(rng.integers(1, 40))
        st = rng.choice(statuses, n)
        if p == 3:
            st[:] = "censored"  # no oracle
        times = np.round(rng.uniform(1.0, 3.0, n), 1)  # ties in time
        times[~np.isin(st, USABLE_STATUSES)] = np.where(rng.random(n) < 0.5, NAN, 0.5)[~np.isin(st, USABLE_STATUSES)]
        scores = np.round(rng.normal(size=n), 1)  # ties in score
        scores[rng.random(n) < 0.1] = NAN
        for c in range(n):
            rows.append(dict(problem_id=f"p{p}", config_id=f"c{c}", median_ms=times[c], status=st[c], score=scores[c]))
    df = pd.DataFrame(rows)
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # problems interleaved


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evaluate_equals_problem_metrics(seed):
    df = random_frame(seed)
    ks = (1, 3, 5, 10)
    per = evaluate(df, ks=ks)
    assert list(per.index) == list(pd.unique(df["problem_id"]))
    assert list(per.columns) == [
        "n_configs",
        "oracle_ms",
        "eff_top1",
        "eff_best3",
        "eff_best5",
        "eff_best10",
        "oracle_in_top10",
        "ndcg10",
        "kendall_tau",
    ]
    for pid, g in df.groupby("problem_id", sort=False):
        ref = problem_metrics(g["median_ms"].to_numpy(), g["status"].to_numpy(), g["score"].to_numpy(), ks=ks)
        got = per.loc[pid]
        for key, value in ref.items():
            if isinstance(value, bool):
                assert bool(got[key]) is value, (pid, key)
            else:
                assert got[key] == pytest.approx(value, nan_ok=True), (pid, key)


def test_evaluate_other_columns_and_empty():
    df = random_frame(5, 4).rename(columns={"score": "s", "problem_id": "q"})
    per = evaluate(df, score_col="s", problem_col="q")
    assert per.index.name == "q" and len(per) == 4
    assert len(evaluate(df.iloc[:0], score_col="s", problem_col="q")) == 0
