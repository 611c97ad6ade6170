"""Does inference rank the configs the collection timed? For every problem of a dataset, the shipped model's
candidate set (`TrainedModel.candidates`, from `Problem.signature()`) against the configs the dataset holds for it
(the collection's feasible space, from `validate` on drawn inputs). The held-out figures rank the dataset's rows, so a
config missing from the candidate set is a loss `autoheur eval` cannot show (stop 78: one-row operands were offered no
TMA config). CPU, about a minute per 9,000 problems.

    python benchmarks/candidate_sets.py data/nvidia-h100-80gb-hbm3 models/nvidia-h100-80gb-hbm3.joblib
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoheur.collect.schema import problem_from_row  # noqa: E402
from autoheur.collect.store import DatasetStore  # noqa: E402
from autoheur.models.artifact import TrainedModel  # noqa: E402

COLUMNS = ["problem_id", "problem_name", "layout", "dtype", "a_major", "b_major", "groups", "total", "m", "n", "k",
           "sizes", "config_id"]  # fmt: skip


def mismatches(data: Path, model: TrainedModel) -> list[tuple[str, int, int]]:
    """(problem name, configs only the model offers, configs only the dataset holds) of each problem that differs."""
    df = DatasetStore.load(data).read(COLUMNS)
    held = df.groupby("problem_id", sort=False)["config_id"].agg(lambda s: frozenset(s.astype(str)))
    out = []
    for pid, row in df.drop_duplicates("problem_id").set_index("problem_id").iterrows():
        offered = frozenset(c.config_id for c in model.candidates(problem_from_row(row), model.device))
        if offered != held[pid]:
            out.append((row["problem_name"], len(offered - held[pid]), len(held[pid] - offered)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("model", type=Path)
    args = ap.parse_args(argv)
    bad = mismatches(args.data, TrainedModel.load(args.model))
    for name, extra, missing in bad[:20]:
        print(f"{name}: {extra} offered but not timed, {missing} timed but not offered")
    print(f"{len(bad)} problems whose candidate set differs from the timed configs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
