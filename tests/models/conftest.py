"""A small real slice of the shipped H100 dataset: 30 problems from four families, 240 configs each, as dataset rows
(`h100_rows`) and as a ranking set (`h100_slice`)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from autoheur.collect.store import DatasetStore
from autoheur.models.data import COLUMNS, RankingSet

H100 = Path(__file__).resolve().parents[2] / "data" / "nvidia-h100-80gb-hbm3"


FAMILIES = ("sampled", "qwen3-235b-a22b", "mixtral-8x7b", "gpt-oss-20b")


@pytest.fixture(scope="session")
def h100_rows() -> pd.DataFrame:
    """The slice's dataset rows (COLUMNS), as `load_dataset` reads them: in problem-id order, the first problems of
    FAMILIES, at most 10 a family and 30 in all, then 240 configs of them drawn once.

    The names come from two columns of each file, the picked problems' rows straight from their files (a filtered
    read): the store's own reads validate every problem of a pack, 53 s here for the 80 packs the picks are spread
    over. Those reads are tested in tests/collect; test_data.py checks a few problems of this slice against them."""
    parts = DatasetStore.load(H100).parts()
    names = {}
    for path in sorted(set(parts.values())):
        t = pq.read_table(path, columns=["problem_id", "problem_name"]).group_by(["problem_id", "problem_name"])
        names.update(zip(*t.aggregate([]).to_pydict().values(), strict=True))
    picked, counts = [], {}
    for pid in parts:
        fam = names[pid].split("/", 1)[0]
        if counts.get(fam, 0) >= 10 or fam not in FAMILIES:
            continue
        counts[fam] = counts.get(fam, 0) + 1
        picked.append(pid)
        if len(picked) >= 30:
            break
    tables = {}
    for path in sorted({parts[pid] for pid in picked}):
        pids = [pid for pid in picked if parts[pid] == path]
        t = pq.read_table(path, columns=COLUMNS, filters=[("problem_id", "in", pids)]).replace_schema_metadata(None)
        tables.update((pid, t.filter(pc.equal(t["problem_id"], pid))) for pid in pids)
    df = pa.concat_tables([tables[pid] for pid in picked]).to_pandas()
    configs = np.sort(df["config_id"].unique())
    keep = set(np.random.default_rng(0).choice(configs, 240, replace=False))
    return df[df["config_id"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="session")
def h100_slice(h100_rows) -> RankingSet:
    return RankingSet.from_frame(h100_rows, DatasetStore.load(H100).meta.device)


def _twin_id(config_id: str) -> str:
    """A config id less its group_m and warp-specialization parts (as benchmarks/list_fill.py's twin_key): the
    string form of near_best.twin_keys, to test it and the distinct tail against."""
    return re.sub(r"g\d+", "", config_id).replace("-ws", "")


@pytest.fixture
def twin_id():
    return _twin_id
