"""The development CV: where model designs are chosen, away from every reported figure.

An inner GroupKFold over the training problems of one outer fold (the same outer folds as `autoheur eval`'s
group_kfold: since stop 78 a problem's fold is a hash of its id, so the outer fold's test problems stay out of every
dev CV as the data grow). The outer fold's test problems are never read; the dev set's problems are added to
`models/design-seen.txt` (`--no-record-seen`: not), so that `autoheur eval` can tell the problems no choice saw.
Each variant is fit and scored on the same inner folds; the summary is the one `autoheur eval` prints (best-of-10
and top-1 geomean / P10 / min, oracle in the top 10), plus where the oracle ranked when it missed the top 10.

    python benchmarks/dev_cv.py --data data/nvidia-h100-80gb-hbm3 --variants base,rerank
    python benchmarks/dev_cv.py --data data/nvidia-h200 --variants base,rerank --out /tmp/dev.json
    python benchmarks/dev_cv.py --data data/nvidia-h200 --aux data/nvidia-h100-80gb-hbm3 --variants base
    # stop 48: can another device's rows of problems the fold lacks stand in for its own? half the training problems,
    # then the same half plus the H200's rows of (only) the other half
    python benchmarks/dev_cv.py --data data/nvidia-h100-80gb-hbm3 --train-share 0.5 --aux data/nvidia-h200 \
        --aux-new-only

Variants are named in VARIANTS below; each is a factory of a fresh ranker. Run on the CPU (xgboost).
`--scores DIR` also writes each run's held-out scores (`DIR/<variant>_seed<seed>.parquet`: per row its problem,
config, inner fold, time, status, time over the oracle and score), so that what is built from a ranking (e.g. how
the top 10 is filled) can be compared on the dev set without fitting again.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.features import FEATURE_NAMES  # noqa: E402
from autoheur.features.derived import CRIT_FEATURES  # noqa: E402
from autoheur.models.data import (  # noqa: E402
    AUX_PREFIX,
    AUX_ROWS,
    RankingSet,
    TrainingPool,
    fit_rows,
    load_auxiliary,
    load_ranking_set,
)
from autoheur.models.design_seen import SEEN_FILE, record_seen  # noqa: E402
from autoheur.models.evaluate import group_kfold  # noqa: E402
from autoheur.models.metrics import evaluate, summarize  # noqa: E402
from autoheur.models.rankers import ENSEMBLE_MEMBERS, XGBRankerModel, family_params, set_prediction  # noqa: E402
from benchmarks.by_kind import kind as problem_kind  # noqa: E402

FINE_RERANK = (1.0, 1.001, 1.002, 1.003, 1.004, 1.005, 1.0065, 1.008, 1.01, 1.0125, 1.015, 1.0175, 1.02, 1.025,
               1.03, 1.04, 1.05, 1.065, 1.08, 1.1, 1.12)  # fmt: skip


def _variants() -> dict:
    R = XGBRankerModel
    return {
        # stop 20's sweep (the shipped model is "base": the ensemble and its re-ranker over the best 48)
        "ens_only": lambda seed: R(random_state=seed, rerank_top=0),
        "rr_rows96_top64": lambda seed: R(random_state=seed, rerank_rows=96, rerank_top=64),
        "rr_600": lambda seed: R(random_state=seed, rerank_estimators=600, rerank_learning_rate=0.05),
        "rr_reg": lambda seed: R(random_state=seed, rerank_objective="reg:squarederror"),
        "rr_fine": lambda seed: R(random_state=seed, rerank_relevance=FINE_RERANK),
        "rr_d6": lambda seed: R(random_state=seed, rerank_depth=6),
        "rr_w2": lambda seed: R(random_state=seed, rerank_weight=2.0),
        "rows768": lambda seed: R(random_state=seed, per_problem=768, top=192),
        "trees600": lambda seed: R(random_state=seed, n_estimators=600, learning_rate=0.05),
        "pairs32": lambda seed: R(random_state=seed, pairs=32),
        "sub08": lambda seed: R(random_state=seed, subsample=0.8, colsample_bytree=0.8),
        "bag3": lambda seed: R(
            random_state=seed,
            members=("rank:pairwise", "rank:ndcg", "rank:pairwise"),
            subsample=0.8,
            colsample_bytree=0.8,
        ),  # fmt: skip
        # stop 25: smaller row samples per problem, for the fit time as the data grows; stop 26 adopted 256 / 64
        "rows384": lambda seed: R(random_state=seed, per_problem=384, top=96),
        "rows256": lambda seed: R(random_state=seed, per_problem=256, top=64),
        "rows320": lambda seed: R(random_state=seed, per_problem=320, top=80),
        # the shipped defaults: 128 / 32 rows per problem since stop 42 ("rows128"; "rows256" before)
        "base": lambda seed: XGBRankerModel(random_state=seed),
        # stop 30: the version-2 features without the busiest-program ones (= version 1); "base" has them
        "base_nocrit": lambda seed: XGBRankerModel(random_state=seed, ignore_features=CRIT_FEATURES),
        # stop 31: the Inductor family's parameters (rankers.FAMILY_PARAMS), and with the estimate over the roofline
        # ignored too (run on data/inductor-nvidia-h100-80gb-hbm3)
        "inductor": lambda seed: R(random_state=seed, **family_params("inductor")["xgb_ranker"]),
        # stop 45: the family on 145 problems, with the triton family's ensemble (its other parameters kept), and
        # with the near-best re-ranker too
        "inductor_ens": lambda seed: R(
            random_state=seed, **{**family_params("inductor")["xgb_ranker"], "objective": "ensemble"}
        ),
        "inductor_ens_rr": lambda seed: R(
            random_state=seed, **{**family_params("inductor")["xgb_ranker"], "objective": "ensemble", "rerank_top": 48}
        ),
        # stop 85: the grid's backward layouts in its data (dx: b N-major; dW: 2D x 2D); an expert each, the forward
        # (b K-major) its own, as the triton family's `experts3`
        "inductor_experts3": lambda seed: R(
            random_state=seed, **{**family_params("inductor")["xgb_ranker"], "experts": ("layout_2d2d", "b_k_major")}
        ),
        "inductor_experts_fwd": lambda seed: R(
            random_state=seed, **{**family_params("inductor")["xgb_ranker"], "experts": ("b_k_major",)}
        ),
        "inductor_experts_2d2d": lambda seed: R(
            random_state=seed, **{**family_params("inductor")["xgb_ranker"], "experts": ("layout_2d2d",)}
        ),
        # stop 86: the hedge fixed for every expert, not the weight gradient's alone (each expert's inner CV picks 0
        # or 4 under "auto"; the shipped 62-problem weight-gradient expert picked 0, where the best fixed config leads
        # its small kernels)
        "inductor_hedge4": lambda seed: R(random_state=seed, **{**family_params("inductor")["xgb_ranker"], "hedge": 4}),
        "inductor_noest": lambda seed: R(
            random_state=seed,
            **{
                **family_params("inductor")["xgb_ranker"],
                "ignore_features": (*CRIT_FEATURES, "log10_est_over_roofline"),
            },
        ),
        # stop 32: the weight-gradient layout (2D x 2D) holds 7 of the 10 problems under 0.95 best-of-10 on the H100
        # GroupKFold with 13% of the problems; its queries weighted up in every LambdaMART fit
        "w2d2d_3": lambda seed: R(random_state=seed, query_weights=(("layout_2d2d", 3.0),)),
        # stop 32: fewer trees at a larger step, for predict latency (most of a call is XGBoost's per-tree cost on
        # the small shortlist passes) and for the H100 fit's margin under 2 minutes
        "trees200": lambda seed: R(random_state=seed, n_estimators=200, learning_rate=0.15),
        "rerank": lambda seed: XGBRankerModel(random_state=seed, rerank_top=32),
        "rerank24": lambda seed: XGBRankerModel(random_state=seed, rerank_top=24),
        "rerank48": lambda seed: XGBRankerModel(random_state=seed, rerank_top=48),
        "rerank_ndcg": lambda seed: XGBRankerModel(random_state=seed, rerank_top=32, rerank_objective="rank:ndcg"),
        "rerank_add": lambda seed: XGBRankerModel(random_state=seed, rerank_top=32, rerank_mode="add"),
        "add_w2": lambda seed: XGBRankerModel(random_state=seed, rerank_top=32, rerank_mode="add", rerank_weight=2.0),
        "add48": lambda seed: XGBRankerModel(random_state=seed, rerank_top=48, rerank_mode="add"),
        "add_rows128": lambda seed: XGBRankerModel(
            random_state=seed, rerank_top=32, rerank_mode="add", rerank_rows=128
        ),
        "add_ndcg": lambda seed: XGBRankerModel(
            random_state=seed, rerank_top=32, rerank_mode="add", rerank_objective="rank:ndcg"
        ),
    }


VARIANTS = _variants()
# stop 40: separate rankers for the ragged-K layout (2D x 2D) and the rest, measured with a wrapper here that fitted
# one XGBRankerModel per kind apart; adopted as XGBRankerModel's `experts` (so "base" since), whose scores
# tests/models/test_rankers.py checks equal to such models fitted apart. "one_model" is the shipped model before it.
VARIANTS["experts_2d2d"] = lambda seed: XGBRankerModel(random_state=seed, experts=("layout_2d2d",))
VARIANTS["one_model"] = lambda seed: XGBRankerModel(random_state=seed, experts=())
# stop 40: the forward (and grad_a) queries weighed 2x against the 2D x 2D ones (stop 39's suggestion for the fall of
# the held-out families' forward problems after backward data was added)
VARIANTS["w2d3d_2"] = lambda seed: XGBRankerModel(random_state=seed, query_weights=(("layout_2d3d", 2.0),))
# stop 42: for the H100 fit under 2 minutes (150 s on 3,996 problems). Of a LambdaMART member's single-thread fit,
# the pair gradients take about a fifth (pairs per sample 8 -> 4: 20.0 -> 15.7 s on the 2D x 2D expert's rows), the
# tree building the rest, in proportion to the rows; so half the pairs, or three quarters of the rows per problem.
VARIANTS["pairs4"] = lambda seed: XGBRankerModel(random_state=seed, pairs=4)
VARIANTS["rows192"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=192, top=48)
VARIANTS["rows160"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=160, top=40)
VARIANTS["rows128"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=128, top=32)  # adopted: = "base"
# stop 42: a third expert for the input gradients (2D x 3D with W N-contiguous, the weakest kind after 2D x 2D): the
# forward (B K-contiguous) routes to the second, the rest to the third
VARIANTS["experts3"] = lambda seed: XGBRankerModel(random_state=seed, experts=("layout_2d2d", "b_k_major"))
# stop 44: the H100 model with the H200's problems as auxiliary data (run with --aux), as the H200 model has the
# H100's ("base" with --aux, and "aux_half": an auxiliary problem keeps half the rows of an own problem); and 96 / 24
# rows, for the fit time's margin as the data grows
VARIANTS["aux_half"] = lambda seed: XGBRankerModel(random_state=seed, aux_share=0.5)
VARIANTS["rows96"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=96, top=24)
# stop 44: the same 128 rows per problem (the same fit time), more or fewer of them the problem's fastest
# stop 45: half the rows per problem, against half the problems at 128 rows (--train-share 0.5): the same fit cost,
# to weigh more problems at fewer rows each before collecting them
VARIANTS["rows64"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=64, top=16)
VARIANTS["top64"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=128, top=64)
VARIANTS["top16"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=128, top=16)
# stop 47: a cheaper fit at the same rows (64 / 16, "base" from stop 47 to 50): fewer histogram bins per feature than
# XGBoost's 256; and 80 / 20 rows (stop 46's default) at 128 bins, if that buys the rows back for the same fit time
VARIANTS["bins128"] = lambda seed: XGBRankerModel(random_state=seed, max_bin=128)
VARIANTS["bins64"] = lambda seed: XGBRankerModel(random_state=seed, max_bin=64)
VARIANTS["rows80"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=80, top=20)
VARIANTS["rows80_bins128"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=80, top=20, max_bin=128)
# stop 51: "base" is 48 / 12 rows and 48 re-ranker rows (the fit under 2 minutes at 7,999 problems); stop 47-50's
# 64 / 16 with 64, and each half of the cut alone: which rows the 0.7 points the cut cost on the held-out split are in
VARIANTS["rows64_rr64"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=64, top=16, rerank_rows=64)
VARIANTS["rows48_rr64"] = lambda seed: XGBRankerModel(random_state=seed, rerank_rows=64)
VARIANTS["rows64_rr48"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=64, top=16)
# stop 52: the re-ranker fits as many rows as a member (48 a problem), a third of the fit; rows moved from it to the
# members at about the same fit cost (64 + 64 + 24 member and re-ranker rows against 48 x 3), and a re-ranker of half
# the trees at twice the step
VARIANTS["rows64_rr24"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=64, top=16, rerank_rows=24)
VARIANTS["rr_t150"] = lambda seed: XGBRankerModel(random_state=seed, rerank_estimators=150, rerank_learning_rate=0.2)
# stop 53: both of stop 52's variants read under "base" (rr_t150 -0.55 points, rows64_rr24 -1.2), so the re-ranker's
# rows are worth more than a member's: rows moved the other way, from the members to the re-ranker, at the same fit
# cost (40 + 40 + 64 against 48 x 3) and at less (32 + 32 + 64)
VARIANTS["rows40_rr64"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=40, top=10, rerank_rows=64)
VARIANTS["rows32_rr64"] = lambda seed: XGBRankerModel(random_state=seed, per_problem=32, top=8, rerank_rows=64)
# stop 54: the fit's time without moving rows (no row variant read level and faster at stop 53): stop 47's 64 bins,
# never run on the dev CV (2-10% faster then), and trees a level shallower (depth 7; the members' and the re-ranker's).
# Measured: bins64 level at 9-10% less time (two seeds), depth7 -0.71 points (BENCHMARKS.md, "Learned ranking", stop 54)
VARIANTS["depth7"] = lambda seed: XGBRankerModel(random_state=seed, max_depth=7)
# stop 55: "base" is 64 bins (stop 54's bins64, adopted). For the fit under 2 minutes: fewer trees (stop 32's trees200)
# and fewer pairs (stop 42's pairs4) each cost 0.3-0.75 points, so one member fewer: the ensemble of two LambdaMARTs
# was chosen (stop 20) before the near-best re-ranker existed, which now orders the top 48 the members shortlist. One
# member and the re-ranker are two fits where three share the 2 cores: about a third less work.
VARIANTS["pairwise_rr"] = lambda seed: XGBRankerModel(random_state=seed, members=("rank:pairwise",))
VARIANTS["ndcg_rr"] = lambda seed: XGBRankerModel(random_state=seed, members=("rank:ndcg",))
# Measured: pairwise_rr 88.19% / 87.99% against base's 88.02% / 88.00% (seeds 0 / 1) at 19% less run time, ndcg_rr
# 85.43%; pairwise_rr adopted (the lead alone: "base" since), and "ensemble2" is the two members of stops 20-54
VARIANTS["ensemble2"] = lambda seed: XGBRankerModel(random_state=seed, members=ENSEMBLE_MEMBERS)
# stop 56: the re-ranker re-orders more of the lead's order (its best 64, 96; 48 since stop 20, chosen against 24 and
# 32 with two members and no experts). Only the prediction changes, so the fit's time does not. Of the lead alone's
# 831 misses of the oracle on this dev set (seed 0), 267 ranked it 33rd or lower, some of them outside the 48.
VARIANTS["rr_top64"] = lambda seed: XGBRankerModel(random_state=seed, rerank_top=64)
VARIANTS["rr_top96"] = lambda seed: XGBRankerModel(random_state=seed, rerank_top=96)
# stop 59: the lead's sampled rows (all but each problem's 12 fastest) drawn from the configs near-best at 2 or 5% in
# the fold's training data, where the prediction's cut (near_best_pct = 2) leaves its candidates. 2 adopted (= "base"
# since); "train_all" is the fit before it, its sampled rows drawn from every config
VARIANTS["train_near2"] = lambda seed: XGBRankerModel(random_state=seed, train_near_pct=2)
VARIANTS["train_near5"] = lambda seed: XGBRankerModel(random_state=seed, train_near_pct=5)
VARIANTS["train_all"] = lambda seed: XGBRankerModel(random_state=seed, train_near_pct=0)
# stop 60: more capacity, now that the fit (49.6 s at stop 59, on a host twice as fast as stops 52-58's) has room
# under 2 minutes: each of these was cut, or never raised, for the fit time, and the cuts cost (depth 7: -0.71 points
# at stop 54; 200 trees and 4 pairs: -0.3 to -0.75 at stop 55). Deeper trees, more trees, more pairs a row; members
# and re-ranker alike
VARIANTS["depth10"] = lambda seed: XGBRankerModel(random_state=seed, max_depth=10)
VARIANTS["trees450"] = lambda seed: XGBRankerModel(random_state=seed, n_estimators=450)
VARIANTS["pairs16"] = lambda seed: XGBRankerModel(random_state=seed, pairs=16)
VARIANTS["depth10_trees450"] = lambda seed: XGBRankerModel(random_state=seed, max_depth=10, n_estimators=450)
# Measured (seed 0; base = stop 59's train_near2 run, the same code and folds): depth10 88.64%, trees450 88.70%,
# pairs16 88.47% against 88.26%; depth10_trees450 89.16% (seed 0) and 89.37% (seed 1, against 88.26%), adopted
# (= "base" since)
# stop 60: the re-ranker at its old budget (300 trees of depth 8) beside the deeper members, for predict latency: its
# pass (48 rows x 450 depth-10 trees) is 1.87 of the H100 model's 4.7 ms a call
VARIANTS["rr300_d8"] = lambda seed: XGBRankerModel(random_state=seed, rerank_estimators=300, rerank_depth=8)
# Measured: 89.13% / 89.07% against 89.16% / 89.37% (seeds 0 / 1), top-1 the same: not adopted
# stop 66: for the H100 fit under 2 minutes (124.4-124.9 s on stop 66's host). A trace of the fit there: the rest
# expert's lead 84 s and re-ranker 77 s side by side, then the 2D x 2D expert's two 35 s fits; one pool for all four
# (the next expert's rows chosen while the first one's fits run) gave the same boosters in 124.4 s, so the time is
# the fits' own. Would each tree on four fifths of the features cut them? (the shipped recipe, the H200's new
# problems at half the rows; run with --aux data/nvidia-h200 --aux-new-only)
VARIANTS["aux_half_col08"] = lambda seed: XGBRankerModel(random_state=seed, aux_share=0.5, colsample_bytree=0.8)
# Measured (seed 0): oracle in the top 10 89.71% against aux_half's 89.55% (stop 65), the public problems 94.08% against
# 94.79%; but no faster (519.8 s a run here, aux_half 491.3 s on stop 65's host, 3% faster at fits): XGBoost's hist
# builds every feature's histogram whatever the trees sample (one thread, 40 trees of depth 10 on 300,000 random rows:
# 10.5 s at 1.0, 10.4 s at 0.8, 10.0 s at 0.5). Not adopted
# stop 67: XGBoost's monitor put the pair gradients at half of every fit (two sorts of each query a round, 8 pairs a
# row), so the fit-time lever left is fewer pairs a row (stop 42's 4 cost 0.7 points on shallower trees); 6 here
VARIANTS["aux_half_pairs6"] = lambda seed: XGBRankerModel(random_state=seed, aux_share=0.5, pairs=6)
# Measured (seed 0, the H200's 2,028 new problems): oracle in the top 10 89.53% against aux_half's 89.44%, best-of-10
# and top-1 level, in 478 s against 537 s (-11%). Seed 1 (stop 68, the same data): 89.37% against 89.82%, best-of-10
# 0.9990 against 0.9992, in 465 s against 515 s. Two seeds: 89.45% against 89.63% (-0.18 points, both arms' seed
# spread 0.2-0.4), the 3D x 2D (23 problems) and the public higher both times, the backward grad_a lower. Not
# adopted: the 10% of fit time is not worth a reading on the wrong side of level


# stop 70: the H100's tail under 0.95 grew with each borrowed batch at half the rows (stop 67 12, stop 68 15, stop 69 21
# on the outer split) while the hit rate stayed level; a quarter of the rows a borrowed problem, also 7% fewer rows a
# fit (the 2-minute target). Run with --aux data/nvidia-h200 --aux-new-only
VARIANTS["aux_quarter"] = lambda seed: XGBRankerModel(random_state=seed, aux_share=0.25)
# Measured (seed 0, the H200's 2,742 new problems): oracle in the top 10 89.48% against aux_half's 89.62% (740 misses
# against 730), the sampled 2D x 2D 88.99% against 89.64%, best-of-10 and top-1 level, in 516 s against 567 s (-9%).
# Not adopted: the kind the borrowed problems resemble did worse with fewer of their rows, not better
# stop 71: for the H100 fit under 2 minutes (142.5 s on stop 70's AMD EPYC host), the lever not measured yet: fewer
# boosting rounds with larger steps (members and re-ranker alike: the re-ranker takes the members' budget), since the
# fit's time goes with the rounds; 450 x 0.1 as 300 x 0.15 and as 350 x 0.13. Run with --aux data/nvidia-h200
# --aux-new-only
VARIANTS["aux_half_t300_lr15"] = lambda seed: XGBRankerModel(
    random_state=seed, aux_share=0.5, n_estimators=300, learning_rate=0.15
)
VARIANTS["aux_half_t350_lr13"] = lambda seed: XGBRankerModel(
    random_state=seed, aux_share=0.5, n_estimators=350, learning_rate=0.13
)
# Measured (the H200's 2,742 new problems): 300 x 0.15 (seed 0) 88.97% against aux_half's 89.62% (stop 70), in 426 s
# against 567 s; 350 x 0.13 89.70% / 89.31% against 89.62% / 89.91% (seeds 0 / 1; seed 1's aux_half run here: 538 s
# against 414 s), best-of-10 and top-1 level. Two seeds: -0.26 points for 23% less fit time. Adopted for the H100
# model (`autoheur train --rounds 350x0.13`): it brings the H100 fit under 2 minutes on the slower lent host while the
# H100's held-out splits stay over 90% (the H200's leave-one-family-out did not: 89.88%). It was the ranker's default
# at stop 71 only, so "aux_half" is 450 x 0.1 again, the default since stop 72


# stop 72: the sampled 2D x 2D lost most at 350 x 0.13 (-0.58 points over two seeds); its expert alone back at 450 x
# 0.1, the rest at 350 x 0.13 (that expert fits a third of the rows, so about +10 s on the H100). Run with --aux
# data/nvidia-h200 --aux-new-only
VARIANTS["aux_half_t350_lr13_x2d2d450"] = lambda seed: XGBRankerModel(
    random_state=seed, aux_share=0.5, n_estimators=350, learning_rate=0.13, expert_rounds=(("layout_2d2d", 450, 0.1),)
)
# Measured (seed 0, the H200's 3,033 new problems): oracle in the top 10 89.78% against aux_half_t350_lr13's 89.70%
# (719 misses against 725: 6 grad_b, 2 sampled 2D x 2D more found, every other kind the same), best-of-10 and top-1
# level, in 835.5 s against 719.0 s (+16%; both runs shared the 2 cores with other work for a minute or two, so rough).
# Not adopted: a gain of 6 problems in 7,036 is within a seed's spread, for most of the H100 fit's margin under 2
# minutes (97.8 s at stop 71; +16% would be about 113 s on that host)


# stop 89: the pairwise fits (lead and re-ranker) with XGBoost's "topk" pairs instead of "mean": each of a query's k
# best configs by the current model paired with every other, where "mean" draws 8 partners for every config. The
# oracle in the top 10 is a figure of the head of the order, which "topk" spends the gradient on; and on synthetic
# rows (300,000, 48 a query, depth 10, one thread) topk 10 fitted 12% faster than mean 8. Run with --aux
# data/nvidia-h200 --aux-new-only, beside aux_half_t350_lr13 (the shipped H100 recipe)
for _k in (10, 16):
    VARIANTS[f"aux_half_t350_lr13_topk{_k}"] = lambda seed, k=_k: XGBRankerModel(
        random_state=seed, aux_share=0.5, n_estimators=350, learning_rate=0.13, pair_method="topk", pairs=k
    )
# Measured (the H200's new problems; 7,035 dev problems): topk 16 90.02% / 90.25% against mean 8's 89.45% / 89.78%
# (seeds 0 / 1; 702 / 686 misses against 742 / 719), best-of-10 and top-1 level, 560.7 s against 566.1 s (seed 1, this
# host alone); topk 10 (seed 0) 88.59%. Adopted for the H100 model (`autoheur train --pairs topk:16`; BENCHMARKS.md,
# "Learned ranking", stop 89)


# Scoring variants: name -> (the variant whose fits they share, the prediction settings they set on the fitted model
# and each of its experts). Only how a fitted model scores changes, so they are scored on the same fits as that
# variant (asked for alone, it is fitted and reported too). Stop 57, for predict latency on the 2-core hosts: fewer
# coarse trees (pass 0 scores every config, ~2,200 a problem, with the lead's first 50), a shorter shortlist (pass 1,
# the lead's other trees over 128) and a shorter re-ranked head (pass 2, the re-ranker over 48).
SCORING: dict[str, tuple[str, dict]] = {
    "coarse25": ("base", {"coarse_trees": 25}),
    "coarse35": ("base", {"coarse_trees": 35}),
    "short96": ("base", {"shortlist": 96}),
    "rr_top32": ("base", {"rerank_top": 32}),
    "coarse25_short96": ("base", {"coarse_trees": 25, "shortlist": 96}),
    # stop 58: the candidates cut, before the passes, to the configs that came within 1, 2 or 5% of some training
    # problem's oracle (near_best.near_best_configs, computed by every fit; a 5-fold check on the H100 data: the union
    # within 2% holds ~1,350 of the 2,182 configs and missed 5 of 8,795 held-out oracles)
    "near1": ("base", {"near_best_pct": 1}),
    "near2": ("base", {"near_best_pct": 2}),
    "near5": ("base", {"near_best_pct": 5}),
    # stop 63: the list's last slots without group_m / warp-specialization twins (XGBRankerModel.distinct_after; off
    # by default: on the H100 GroupKFold at 8 it cost the oracle in the top 10 0.17 points), after the ranker's best
    # 8 or 9
    "tail8": ("base", {"distinct_after": 8}),
    "tail9": ("base", {"distinct_after": 9}),
}


def _absolute_estimate(X: np.ndarray, frame: pd.DataFrame) -> np.ndarray:
    """The version-2 estimate (absolute log10 us) back from version 3's ratio to the roofline."""
    X = X.copy()
    X[:, FEATURE_NAMES.index("log10_est_over_roofline")] += X[:, FEATURE_NAMES.index("log10_roofline_us")]
    return X


def _free_column(X: np.ndarray, slot: str) -> int:
    """The index of feature `slot`, a column constant on this data (the SM count or the ridge point on one device's
    data), which a stop-45 transform may overwrite with a trial feature; ValueError where it is not constant."""
    j = FEATURE_NAMES.index(slot)
    if np.ptp(X[:, j]) != 0:
        raise ValueError(f"{slot} is not constant on this data: no free column for a trial feature")
    return j


def _relative_to_problem_min(X: np.ndarray, frame: pd.DataFrame) -> np.ndarray:
    """Stop 45: both time estimates also over the problem's best estimate of any config, in the two columns that are
    constant on one device's data (the SM count and the ridge point), which this is only valid for."""
    X = X.copy()
    codes = pd.factorize(frame["problem_id"], sort=False)[0]
    for slot, name in (("log2_sm_count", "log10_est_over_roofline"), ("log2_ridge", "log10_crit_over_roofline")):
        v = X[:, FEATURE_NAMES.index(name)].astype(np.float64)
        X[:, _free_column(X, slot)] = v - pd.Series(v).groupby(codes).transform("min").to_numpy()
    return X


def _inner_bytes(X: np.ndarray, frame: pd.DataFrame) -> np.ndarray:
    """Stop 45: log2 of the bytes along each operand tile's contiguous dimension (A: block_k if K-contiguous, else
    block_m; B: block_k if K-contiguous, else block_n), which set the TMA box's swizzle and a pointer load's
    coalescing, in the two columns that are constant on one device's data (see _relative_to_problem_min)."""
    X = X.copy()
    col = lambda name: X[:, FEATURE_NAMES.index(name)].astype(np.float64)  # noqa: E731
    log2_elem = np.log2(col("elem_bytes"))
    for slot, major, other in (
        ("log2_sm_count", "a_k_major", "log2_block_m"),
        ("log2_ridge", "b_k_major", "log2_block_n"),
    ):
        X[:, _free_column(X, slot)] = np.where(col(major) != 0, col("log2_block_k"), col(other)) + log2_elem
    return X


# Variants that see transformed features: name -> (the model's variant, a function (X, frame) -> X applied to the
# dev set and any auxiliary set). Stop 31 also tried the two time estimates over the problem's roofline ("rel_roof")
# and over the problem's best estimate ("rel_min") here (commit b61ffeb; benchmarks/results/
# dev_cv_stop31_relative_estimates.json); features version 3 gives them over the roofline, so those are gone.
TRANSFORMS: dict = {
    "inductor_abs": ("inductor", _absolute_estimate),  # stop 31: the Inductor family on version 2
    "relmin": ("base", _relative_to_problem_min),  # stop 45
    "inner": ("base", _inner_bytes),  # stop 45
}


def oracle_rank(frame: pd.DataFrame) -> pd.Series:
    """Per problem, the 0-based rank of the oracle (fastest ok config) under `score`, ties by row order."""
    out = {}
    for pid, g in frame.groupby("problem_id", sort=False):
        ok = g["status"].to_numpy() == "ok"
        t = np.where(ok, g["median_ms"].to_numpy(), np.inf)
        if not np.isfinite(t).any():
            continue
        order = np.argsort(-g["score"].to_numpy(), kind="stable")
        out[pid] = int(np.flatnonzero(t[order] == t.min())[0])
    return pd.Series(out)


_DEV = None


def _transformed(pool: TrainingPool, transform) -> TrainingPool:
    """The pool with `transform` applied to its own rows and to each auxiliary device's rows apart (the stop-45
    transforms reuse columns constant on one device's data), as it was applied to the dev set and each auxiliary set
    before the pool."""
    frame, X = pool.set.frame, np.empty_like(pool.set.X)
    ids = frame["problem_id"].astype(str)
    sizes = [pool.n_own] + [int(ids.str.startswith(f"{AUX_PREFIX}{device}:").sum()) for device, _ in pool.aux]
    at = np.cumsum([0, *sizes])
    for a, b in zip(at[:-1], at[1:], strict=True):
        X[a:b] = transform(pool.set.X[a:b], frame.iloc[a:b])
    return TrainingPool(RankingSet(frame, X, pool.set.device), pool.n_own, pool.raw_ids, pool.aux)


SCORE_COLUMNS = ["problem_id", "problem_name", "config_id", "median_ms", "status", "rel_time", "score", "inner_fold"]


def _run(name: str, seed: int, threads: int | None, scores_dir: str | None = None, scoring=()) -> list[dict]:
    """One variant on the inner folds of the dev set (module state `_DEV`), and each of the SCORING variants
    `scoring` on its fits: their summary rows, this variant's first."""
    dev, n_inner, pool, outer_test, train_share, aux_new_only = _DEV
    model_name = name
    if name in TRANSFORMS:
        model_name, transform = TRANSFORMS[name]
        pool = _transformed(pool, transform)
        dev = RankingSet(dev.frame, pool.set.X[: pool.n_own], dev.device)
    pids = dev.problems
    inner = list(GroupKFold(n_inner, shuffle=True, random_state=seed).split(pids, groups=pids))
    t0 = time.perf_counter()
    names = [name, *scoring]
    frames: dict[str, list] = {n: [] for n in names}
    for fold, (tr, te) in enumerate(inner):
        model = VARIANTS[model_name](seed)
        if train_share < 1:  # a learning-curve point: the same held-out fold, a seeded share of its training problems
            keep = np.random.default_rng([seed, fold]).permutation(len(tr))[: max(1, round(train_share * len(tr)))]
            tr = tr[np.sort(keep)]
        if threads is not None:
            model.n_jobs = threads
        # with auxiliary data: never the outer fold's test problems, nor this inner fold's, on any device; the
        # fold's training set is a row mask over the pool (fit in place, or copied for a model that cannot)
        # --aux-new-only: nor the problems this fold trains on, so an auxiliary problem is one the fold lacks
        leave_out = set(pids[te]) | set(outer_test) | (set(pids[tr]) if aux_new_only else set())
        fit_rows(model, pool.set, pool.rows(pids[tr], leave_out=leave_out))
        test = dev.subset(pids[te])
        defaults = {key: getattr(model, key) for n in scoring for key in SCORING[n][1]}
        for n in names:
            set_prediction(model, **(defaults if n == name else {**defaults, **SCORING[n][1]}))
            frames[n].append(test.frame.assign(score=model.predict(test), inner_fold=fold))
    seconds = round(time.perf_counter() - t0, 1)
    return [_summary(n, seed, pd.concat(frames[n], ignore_index=True), scores_dir, seconds) for n in names]


def _summary(name: str, seed: int, frame: pd.DataFrame, scores_dir: str | None, seconds: float) -> dict:
    """The summary row of one variant's held-out scores on every inner fold."""
    _, _, _, _, train_share, aux_new_only = _DEV
    if scores_dir:
        os.makedirs(scores_dir, exist_ok=True)
        frame[SCORE_COLUMNS].to_parquet(os.path.join(scores_dir, f"{name}_seed{seed}.parquet"), index=False)
    per_problem = evaluate(frame)
    s = summarize(per_problem)
    ranks = oracle_rank(frame)
    missed = ranks[ranks >= 10]
    kind = frame.groupby("problem_id", sort=False)["problem_name"].first().map(problem_kind)
    by_kind = {k: round(float((ranks.reindex(ids) < 10).mean()), 4) for k, ids in kind.groupby(kind).groups.items()}
    best10_by_kind = {k: round(summarize(per_problem.reindex(ids))["eff_best10_geomean"], 4)
                      for k, ids in kind.groupby(kind).groups.items()}  # fmt: skip
    return {
        "variant": name,
        "seed": seed,
        "train_share": train_share,
        "aux_new_only": aux_new_only,
        "problems": s["n_problems"],
        "best10": [round(s[f"eff_best10_{k}"], 4) for k in ("geomean", "p10", "min")],
        "top1": [round(s[f"eff_top1_{k}"], 4) for k in ("geomean", "p10", "min")],
        "hit": round(s["oracle_in_top10"], 4),
        "missed_rank_median": float(missed.median()) if len(missed) else None,
        "missed_within_32": int((missed < 32).sum()),
        "missed": len(missed),
        "hit_by_kind": by_kind,
        "best10_by_kind": best10_by_kind,
        "seconds": seconds,  # the whole run's (a SCORING variant: the fits it shares)
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--variants", default="base")
    ap.add_argument(
        "--outer-fold", type=int, default=0, help="the outer fold (group_kfold) whose training problems are used"
    )
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--no-record-seen", action="store_true",
                    help="leave models/design-seen.txt as it is (a run no choice is made on)")  # fmt: skip
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default=None, help="write the summaries here as JSON")
    ap.add_argument("--aux", action="append", help="another device's dataset to train on too (autoheur train --aux)")
    ap.add_argument(
        "--aux-rows",
        type=int,
        default=AUX_ROWS,
        help=f"rows an auxiliary problem keeps as it loads (autoheur train --aux-rows; default {AUX_ROWS}, 0: every "
        "row, as every --aux run before stop 56)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="variant runs in parallel processes (the cores split evenly)")
    ap.add_argument("--scores", default=None, help="also write each run's held-out scores to this directory")
    ap.add_argument(
        "--train-share",
        type=float,
        default=1.0,
        help="fit each inner fold on this seeded share of its training problems (a learning curve); test folds whole",
    )
    ap.add_argument(
        "--aux-new-only",
        action="store_true",
        help="keep only the auxiliary rows of the problems a fold does not train on (with --train-share: the rest)",
    )
    args = ap.parse_args(argv)
    # bad arguments before the minutes of loading
    if not 0 < args.train_share <= 1:
        ap.error(f"--train-share {args.train_share}: expected a share in (0, 1]")
    if args.aux_new_only and not args.aux:
        ap.error("--aux-new-only needs --aux")
    if 0 < args.aux_rows < 4 or args.aux_rows < 0:
        ap.error(f"--aux-rows {args.aux_rows}: expected at least 4, or 0 for every row")

    asked = args.variants.split(",")
    unknown = sorted(set(asked) - set(VARIANTS) - set(TRANSFORMS) - set(SCORING))
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted({*VARIANTS, *TRANSFORMS, *SCORING})}")

    rs = load_ranking_set(args.data)
    # by fold id: group_kfold skips an empty fold (a tiny set), so a list index need not be the fold
    found = [(train, test) for fold, train, test in group_kfold(rs) if fold == args.outer_fold]
    if not found:
        ap.error(f"--outer-fold {args.outer_fold}: no such fold holds a problem of {args.data}")
    train_ids, test_ids = found[0]
    dev = rs.subset(train_ids)
    pids = dev.problems
    print(f"dev set: {len(pids)} training problems of outer fold {args.outer_fold} ({len(rs.problems)} in all)")
    if not args.no_record_seen:  # a choice made on these figures has seen these problems (design_seen.py)
        print(f"recorded as seen by design choices: {record_seen(pids)} new of them ({SEEN_FILE})")
    # the whole set goes before the auxiliary data loads: the H100 set, its dev subset and the H200 set being read
    # took the H100 dev CV with --aux data/nvidia-h200 past the 24 GB of the 2-core host
    del rs, found
    gc.collect()
    # a SCORING variant runs on the fits of the variant it names, asked for or not
    fitted = list(dict.fromkeys(SCORING[n][0] if n in SCORING else n for n in asked))
    runs = [
        (name, int(seed), [n for n in asked if n in SCORING and SCORING[n][0] == name])
        for seed in args.seeds.split(",")
        for name in fitted
    ]
    global _DEV  # the pool's workers are forked: they read the dev set without a copy
    # every row the folds train on, stacked once (TrainingPool: the dev set becomes a view of its first rows); each
    # fold's training set is a row mask over it, where with_auxiliary copied it (about 8 GB a fold with the H200 as
    # auxiliary data, before stop 75)
    training = TrainingPool.build(dev, load_auxiliary(args.aux or (), args.data, rows=args.aux_rows or None))
    gc.collect()  # the auxiliary sets as loaded: the pool holds copies
    _DEV = (dev, args.inner, training, test_ids, args.train_share, args.aux_new_only)
    done: dict[int, dict] = {}

    def keep(i: int, results: list[dict]) -> None:
        """Print a finished run's rows and rewrite --out with every run finished so far, in the order asked for: a
        run stopped by a timeout leaves the runs that ended before it."""
        done[i] = results
        for result in results:
            print(json.dumps(result), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump([r for j in sorted(done) for r in done[j]], f, indent=1)

    if args.jobs > 1:
        threads = max(1, (os.cpu_count() or 1) // args.jobs)
        pool = ProcessPoolExecutor(args.jobs)
        try:
            futures = {
                pool.submit(_run, name, seed, threads, args.scores, scoring): i
                for i, (name, seed, scoring) in enumerate(runs)
            }
            for fut in as_completed(futures):
                keep(futures[fut], fut.result())
        except KeyboardInterrupt:
            # SIGINT (e.g. `timeout -s INT`) reaches the workers too, but a worker inside XGBoost does not stop for
            # it: end them, or the pool's shutdown waits for every unfinished run.
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            print(f"interrupted: {len(done)} of {len(runs)} runs finished", flush=True)
            return 130
        pool.shutdown()
    else:
        for i, (name, seed, scoring) in enumerate(runs):
            keep(i, _run(name, seed, None, args.scores, scoring))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
