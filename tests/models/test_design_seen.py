"""`models/design-seen.txt`: the problems design choices have seen, and eval's subset of the others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import autoheur.models.design_seen as ds
from autoheur.models.evaluate import summarize_splits

A, B, C = "00000000000000aa", "00000000000000bb", "00000000000000cc"


def test_record_adds_each_id_once_sorted_and_reads_back(tmp_path):
    path = tmp_path / "seen.txt"
    assert ds.read_seen(path) is None  # no list: nothing known to be unseen
    assert ds.record_seen([B, A, B], path) == 2
    assert ds.record_seen([A, C], path) == 1
    assert ds.record_seen([C], path) == 0
    lines = path.read_text().splitlines()
    assert [x for x in lines if not x.startswith("#")] == [A, B, C] and lines[0].startswith("#")
    assert ds.read_seen(path) == {A, B, C}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_garbled_list_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "seen.txt"
    path.write_text(f"# header\n{A}\nnot-an-id\n")
    with pytest.raises(ValueError, match=r"seen\.txt:3: 'not-an-id' is not a problem id .* restore it from git"):
        ds.read_seen(path)
    with pytest.raises(ValueError, match="not problem ids"):
        ds.record_seen(["xyz"], tmp_path / "other.txt")


def test_eval_reports_the_problems_the_list_lacks_as_design_unseen(tmp_path, monkeypatch):
    """Subset design_unseen is the problems not listed, on every split, a row of 0 problems where all are listed;
    with no list there is no such subset."""
    pp = pd.DataFrame({
        "split": ["s"] * 3, "fold": ["0"] * 3, "model": ["m"] * 3, "problem_id": [A, B, C], "oracle_ms": [0.2] * 3,
        "n_configs": [10] * 3, "eff_top1": [1.0, 0.5, 0.8], "eff_best5": [1.0] * 3, "eff_best10": [1.0, 0.9, 0.95],
        "oracle_in_top10": [True, False, True], "ndcg10": [1.0] * 3, "kendall_tau": [0.5] * 3,
    })  # fmt: skip
    monkeypatch.setattr(ds, "SEEN_FILE", tmp_path / "seen.txt")
    assert "design_unseen" not in set(summarize_splits(pp)["subset"])
    ds.record_seen([A, B])
    row = summarize_splits(pp).set_index("subset").loc["design_unseen"]
    assert row["n_problems"] == 1 and row["eff_best10_min"] == 0.95
    ds.record_seen([C])
    row = summarize_splits(pp).set_index("subset").loc["design_unseen"]  # every problem seen: said, not left out
    assert row["n_problems"] == 0 and np.isnan(row["eff_best10_min"])


def test_the_shipped_list_reads():
    seen = ds.read_seen()
    assert seen is not None and len(seen) >= 12_510  # every problem shipped at stop 78


def test_records_in_one_timestamp_tick_and_from_two_processes_lose_nothing(tmp_path):
    """Each record reads the file afresh under a lock: writes within one mtime tick (coarse on older kernels,
    simulated by setting it back) and two processes recording at once both keep every id."""
    import os
    import subprocess
    import sys

    path = tmp_path / "seen.txt"
    ds.record_seen([A], path)
    st = path.stat()
    ds.read_seen(path)  # cached
    ds.record_seen([B], path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    ds.record_seen([C], path)
    assert ds.read_seen(path) == {A, B, C} and oct(path.stat().st_mode & 0o777) == "0o644"
    script = (
        "import sys; from autoheur.models.design_seen import record_seen\n"
        "for i in range(200): record_seen([f'{int(sys.argv[1]) * 1000 + i:016x}'], sys.argv[2])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w), str(path)]) for w in (1, 2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(ds.read_seen(path)) == 3 + 400


def test_record_seen_refuses_ids_longer_than_16(tmp_path):
    """An id of 18 hex digits starts like one of 16: refused whole, and nothing written (the list would be refused
    on its next read)."""
    with pytest.raises(ValueError, match="not problem ids"):
        ds.record_seen(["00000000000000aa00"], tmp_path / "seen.txt")
    assert not (tmp_path / "seen.txt").exists()
