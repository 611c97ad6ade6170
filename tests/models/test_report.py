"""The markdown evaluation report on a small synthetic evaluation: content, linked plots, life without matplotlib."""

from __future__ import annotations

import importlib.util
import math
import re
import sys

import numpy as np
import pandas as pd
import pytest

from autoheur.models.metrics import summarize
from autoheur.models.report import PLOTS_SKIPPED, write_report

SPLITS = ("group_kfold", "lomo", "h100->h200")
MODELS = ("xgb_ranker", "xgb_regressor", "nearest", "fixed_list", "fixed_best", "random")
FAMILIES = ("mixtral", "deepseek", "qwen")


def _per_problem(n_problems: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for split in SPLITS:
        for mi, model in enumerate(MODELS):
            for p in range(n_problems):
                b10 = float(np.clip(1.0 - rng.exponential(0.02 * (mi + 1)), 0, 1))
                rows.append(
                    {
                        "split": split,
                        "fold": p % 3 if split == "group_kfold" else split.split("->")[0],
                        "model": model,
                        "problem_id": f"p{p}",
                        "problem_name": f"{FAMILIES[p % 3]}-E{8 * (p + 1)}-hidden{1024 * (p + 1)}-a-rather-long-name",
                        "family": FAMILIES[p % 3],
                        "device": "h200" if "h200" in split else "h100",
                        "oracle_ms": 0.05 + 0.1 * p,
                        "eff_top1": b10 * float(rng.uniform(0.6, 1.0)),
                        "eff_best5": b10 * 0.99,
                        "eff_best10": b10,
                        "oracle_in_top10": bool(rng.random() < 0.8),
                        "ndcg10": float(rng.uniform(0.5, 1)),
                        "kendall_tau": float(rng.uniform(0, 1)),
                        "n_configs": 200,
                    }
                )
    pp = pd.DataFrame(rows)
    pp.loc[(pp["model"] == "random") & (pp["problem_id"] == "p0"), ["eff_top1", "eff_best10"]] = math.nan
    return pp


def _summary(pp: pd.DataFrame) -> pd.DataFrame:
    cols = ["oracle_ms", "eff_top1", "eff_best5", "eff_best10", "oracle_in_top10", "ndcg10", "kendall_tau"]
    rows = []
    for (split, model), g in pp.groupby(["split", "model"], sort=False):
        for subset, sel in (("all", g), ("oracle>=0.1ms", g[g["oracle_ms"] >= 0.1])):
            rows.append({"split": split, "subset": subset, "model": model, **summarize(sel[cols])})
    return pd.DataFrame(rows)


def _write(tmp_path, **kw):
    pp = _per_problem()
    kw.setdefault("importances", {"xgb_ranker": {f"f{i}": float(30 - i) for i in range(30)}})
    kw.setdefault(
        "tuning_cost",
        pd.DataFrame(
            {
                "method": ["top-10", "whole space"],
                "configs": [10, 4000],
                "est_seconds": [1.5, 7200.0],
                "note": ["best-of-10 of the ranking", None],
            }
        ),
    )
    meta = {"dataset": "data/h100.parquet", "devices": "h100, h200", "method": "CUDA events, median of 20 runs."}
    return write_report(pp, _summary(pp), tmp_path / "rep", title="Eval | test", meta=meta, **kw)


def _links(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)


def test_report_content_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    path = _write(tmp_path)
    assert path == tmp_path / "rep" / "report.md"
    text = path.read_text()
    for name in SPLITS + MODELS:
        assert name in text
    assert "| **xgb_ranker** |" in text  # the default row in bold
    assert "| xgb_regressor |" in text
    assert "oracle>=0.1ms" in text and "CUDA events, median of 20 runs." in text
    assert "| top-10 | 10 |" in text and "2.0 h" in text
    assert "Eval \\| test" in text  # a pipe in a cell is escaped
    assert PLOTS_SKIPPED not in text and "_Skipped" not in text and "_Plot skipped" not in text
    links = _links(text)
    # 4 plots per split (two CDFs, the worst problems, by family) and one importance plot.
    assert len(links) == 4 * len(SPLITS) + 1
    assert len(set(links)) == len(links)
    for link in links:
        assert "/" not in link
        f = path.parent / link
        assert f.is_file() and f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = _write(tmp_path)  # written over itself: the same plots, none removed
    assert _links(again.read_text()) == links and sorted(p.name for p in again.parent.glob("*.png")) == sorted(links)


def test_all_subset_table_comes_first(tmp_path):
    text = _write(tmp_path).read_text()
    section = text.split("## Split: group_kfold")[1].split("## Split:")[0]
    assert section.index("**Subset: all**") < section.index("| model |") < section.index("**Subset: oracle>=0.1ms**")
    # The best-of-10 geomean has 4 decimals, the other figures 3.
    row = next(line for line in section.splitlines() if line.startswith("| **xgb_ranker**"))
    cells = [c.strip("* ") for c in row.strip("|").split("|")]
    assert re.fullmatch(r"\d\.\d{4}", cells[2]) and re.fullmatch(r"\d\.\d{3}", cells[3])


def test_models_argument_sets_order_and_default(tmp_path):
    text = _write(tmp_path, models=["nearest", "xgb_ranker"]).read_text()
    assert "| **nearest** |" in text and "| xgb_ranker |" in text
    section = text.split("## Split: lomo")[1]
    assert section.index("| **nearest** |") < section.index("| xgb_ranker |") < section.index("| random |")


def test_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    path = _write(tmp_path)
    text = path.read_text()
    assert PLOTS_SKIPPED in text and 'pip install -e ".[report]"' in text
    assert not _links(text) and not list(path.parent.glob("*.png"))
    for name in SPLITS + MODELS:
        assert name in text
    assert "| **xgb_ranker** |" in text
    assert "| f0 | 30.000 |" in text  # importances fall back to a table


def test_a_new_report_removes_the_plots_of_the_one_it_replaces(tmp_path, monkeypatch):
    """Written over an earlier report without matplotlib, no plot of the earlier run is left beside the new tables;
    files the earlier report did not link to stay."""
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("# old\n\n![cdf](lomo-cdf.png)\n\n![worst](lomo-worst.png)\n[data](notes.png)\n")
    for name in ("lomo-cdf.png", "lomo-worst.png", "notes.png", "mine.png"):
        (out / name).write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    text = _write(tmp_path).read_text()
    assert PLOTS_SKIPPED in text
    assert sorted(p.name for p in out.glob("*.png")) == ["mine.png", "notes.png"]  # a plain link is not a plot


def test_missing_columns_and_empty_frames_do_not_crash(tmp_path):
    pp = _per_problem().drop(columns=["family", "eff_top1", "problem_name"])
    sm = _summary(_per_problem()).drop(columns=["kendall_tau", "eff_top1_p10"])
    text = write_report(
        pp, sm, tmp_path / "a", title="t", meta={}, importances={}, tuning_cost=pd.DataFrame({"method": ["x"]})
    ).read_text()
    assert "`kendall_tau`" in text
    try:  # the plots name the columns they miss; without matplotlib no plot is tried (test_without_matplotlib)
        import matplotlib  # noqa: F401

        assert "no `family` column" in text and "no `eff_top1` column" in text
    except ImportError:
        assert PLOTS_SKIPPED in text
    assert "Tuning cost table skipped: missing `configs`, `est_seconds`" in text
    assert "No feature importances given" in text

    empty = write_report(pd.DataFrame(), pd.DataFrame(), tmp_path / "b", title="t", meta={}).read_text()
    assert "No evaluation results" in empty

    only_summary = write_report(None, _summary(_per_problem()), tmp_path / "c", title="t", meta={}).read_text()
    assert "| **xgb_ranker** |" in only_summary


def test_tuning_cost_counts_configs_as_counts_and_says_its_basis(tmp_path):
    cost = pd.DataFrame({"method": ["top-10", "whole space"], "configs": [9.6, 52.171], "est_seconds": [1.5, 60.0]})
    cost.attrs["basis"] = "An estimate: 0.68 CPU-seconds a config."
    text = _write(tmp_path, tuning_cost=cost).read_text()
    assert "| whole space | 52.2 | 60.0 |" in text and "52.17" not in text and "| top-10 | 9.6 |" in text
    assert "An estimate: 0.68 CPU-seconds a config." in text
    cost["est_seconds"] = np.nan  # Inductor's template: the seconds do not apply, and no column says n/a
    text = _write(tmp_path, tuning_cost=cost).read_text()
    assert "| method | configs |\n" in text and "est. seconds" not in text


def test_a_model_whose_figures_are_another_ones_is_said_so_and_drawn_apart(tmp_path):
    pp = _per_problem()
    same = pp["model"] == "fixed_list"
    pp.loc[same, "eff_top1"] = pp.loc[pp["model"] == "fixed_best", "eff_top1"].to_numpy()
    text = write_report(pp, _summary(pp), tmp_path, title="t", meta={}).read_text()
    note = "_fixed_best's top-1 figures are fixed_list's on every problem by construction"  # the later of MODELS
    assert text.count(note) == len(SPLITS) and "best-of-10 figures are" not in text
    assert ("drawn dotted" in text) == (importlib.util.find_spec("matplotlib") is not None)
    with pytest.MonkeyPatch.context() as mp:  # no plots: no line said to be drawn
        mp.setitem(sys.modules, "matplotlib", None)
        mp.setitem(sys.modules, "matplotlib.pyplot", None)
        bare = write_report(pp, _summary(pp), tmp_path / "bare", title="t", meta={}).read_text()
    assert bare.count(note) == len(SPLITS) and "drawn dotted" not in bare
    pp.loc[same & (pp["problem_id"] == "p3") & (pp["split"] == "lomo"), "eff_top1"] = 0.123  # one problem apart
    text = write_report(pp, _summary(pp), tmp_path, title="t", meta={}).read_text()
    assert text.count(note) == len(SPLITS) - 1
