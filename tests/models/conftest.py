"""A small real slice of the shipped H100 dataset: 30 problems from four families, 240 configs each, as dataset rows
(`h100_rows`) and as a ranking set (`h100_slice`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from autoheur.collect.store import DatasetStore
from autoheur.models.data import COLUMNS, RankingSet

H100 = Path(__file__).resolve().parents[2] / "data" / "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="session")
def h100_rows() -> pd.DataFrame:
    """The slice's dataset rows (COLUMNS), as `load_dataset` reads them."""
    store = DatasetStore.load(H100)
    index = pd.read_parquet(next(iter(store.parts().values())), columns=["problem_id"])  # schema check
    assert len(index)
    picked, names = [], {}
    for pid in store.parts():
        t = store.read_part(pid)
        name = t.column("problem_name")[0].as_py()
        fam = name.split("/", 1)[0]
        if names.get(fam, 0) >= 10 or fam not in ("sampled", "qwen3-235b-a22b", "mixtral-8x7b", "gpt-oss-20b"):
            continue
        names[fam] = names.get(fam, 0) + 1
        picked.append(t.replace_schema_metadata(None).select(COLUMNS))
        if sum(names.values()) >= 30:
            break
    df = pa.concat_tables(picked).to_pandas()
    configs = np.sort(df["config_id"].unique())
    keep = set(np.random.default_rng(0).choice(configs, 240, replace=False))
    return df[df["config_id"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="session")
def h100_slice(h100_rows) -> RankingSet:
    return RankingSet.from_frame(h100_rows, DatasetStore.load(H100).meta.device)
