"""`autoheur.models.data`: which problems become ranking queries."""

from __future__ import annotations

import pandas as pd

from autoheur.models.data import COLUMNS, RankingSet


def test_problems_that_never_launch_are_no_queries(h100_rows, h100_slice):
    """A 2D x 3D problem with no rows has an empty output: the wrappers never launch, so nothing is learned or scored
    (the shipped datasets hold 5 such problems, collected before collection skipped them)."""
    raw = h100_rows[COLUMNS]
    forward = raw[(raw["layout"] == "2d3d") & (raw["total"] > 0)]
    one = raw[raw["problem_id"] == forward["problem_id"].iloc[0]]
    idle = one.assign(problem_id="idle", total=0, size_mean=0.0, size_max=0, size_min=0, size_std=0.0)
    idle = idle.assign(empty_groups=idle["groups"], sizes=[[0] * g for g in idle["groups"]])
    rs = RankingSet.from_frame(pd.concat([one, idle], ignore_index=True), h100_slice.device)
    assert list(rs.problems) == [one["problem_id"].iloc[0]]
    assert len(rs.frame) == len(one) == len(rs.X)


def test_the_ranking_frame_keeps_no_per_row_group_sizes(h100_rows, h100_slice):
    """The features hold the group-size statistics; the per-row arrays (one object per row) are dropped after them."""
    assert "sizes" in h100_rows.columns
    assert "sizes" not in h100_slice.frame.columns
    assert len(h100_slice.frame) == len(h100_slice.X)
