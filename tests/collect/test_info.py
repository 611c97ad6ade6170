"""`autoheur data info` (collect/info.py): counts, statuses, layouts and the timing spread, per dataset and over a
directory of them."""

from __future__ import annotations

import pytest

from autoheur.collect.info import format_info, info
from autoheur.device import H100_SXM, H200

from .test_store import PROBLEMS, fill, make_meta


def test_info_counts(tmp_path):
    fill(tmp_path / "data" / "h100", PROBLEMS)
    fill(tmp_path / "data" / "h200", PROBLEMS[:1], meta=make_meta(spec=H200), scale=3.0)
    one = info(tmp_path / "data" / "h100")
    assert (one["rows"], one["problems"], one["configs"]) == (9, 3, 3)
    assert one["status"] == {"ok": 3, "censored": 3, "compile_error": 3}
    assert one["layouts"] == {"2d2d": 1, "2d3d": 1, "3d3d": 1} and one["dtypes"] == {"bfloat16": 2, "float16": 1}
    t = one["timing"]
    assert t["best_ms"]["p50"] == pytest.approx(0.1) and t["worst_over_best"]["max"] == pytest.approx(5.0)
    assert t["median_over_best"]["p50"] == pytest.approx(3.0)
    both = info(tmp_path / "data")
    assert both["devices"] == sorted([H100_SXM.name, H200.name]) and both["rows"] == 12 and both["problems"] == 4
    assert both["timing"]["best_ms"]["max"] == pytest.approx(0.3)
    text = format_info(both)
    assert "12 rows, 4 problems" in text and "compile_error 4" in text and "worst_over_best" in text
    # The same problem timed by another kernel family counts again, and its configs belong to another space.
    fill(tmp_path / "data" / "inductor-h100", PROBLEMS[:1], meta=make_meta(family="inductor"))
    three = info(tmp_path / "data")
    assert (three["problems"], three["configs"]) == (5, 6)
    assert "(inductor family), 1 problems" in format_info(three)
    with pytest.raises(ValueError, match="no dataset"):
        info(tmp_path / "nothing")


def test_a_half_built_merge_left_by_a_kill_is_not_counted(tmp_path):
    fill(tmp_path / "data" / "h100", PROBLEMS[:1])
    fill(tmp_path / "data" / ".h100-all.merging-123", PROBLEMS)  # what a SIGKILLed merge leaves beside its target
    assert info(tmp_path / "data")["problems"] == 1
