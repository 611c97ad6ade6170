"""Memory of loading datasets for training and evaluation (CPU): resident and peak memory after each step.

Loads each dataset as `autoheur eval` does (`load_ranking_set`: a batch of problems at a time), keeping the earlier
ones resident, and prints the process's resident memory and its peak so far (Linux: /proc/self/status and
getrusage). `--whole` loads the whole frame first (`load_dataset`, then `RankingSet.from_frame`), the way before
stop 51. The 2-core host has 24 GB.

  python benchmarks/load_memory.py data/nvidia-h100-80gb-hbm3 data/nvidia-h200 [--whole]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoheur.models.data import RankingSet, _release_arrow_memory, load_dataset, load_ranking_set  # noqa: E402


def resident_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e6
    return float("nan")


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+", help="dataset directories, loaded in this order and kept")
    ap.add_argument("--whole", action="store_true", help="read the whole frame, then build the set (before stop 51)")
    args = ap.parse_args()
    kept = []
    t0 = time.perf_counter()

    def report(path: str, step: str, extra: str = "") -> None:
        print(
            f"{path}: {step:<10} {time.perf_counter() - t0:6.0f} s  resident {resident_gb():5.1f} GB  "
            f"peak {peak_gb():5.1f} GB {extra}",
            flush=True,
        )

    for path in args.data:
        if args.whole:
            df, device, _ = load_dataset(path)
            report(path, "read", f"(frame {df.memory_usage(deep=True).sum() / 1e9:.1f} GB)")
            rs = RankingSet.from_frame(df, device)
            del df
            _release_arrow_memory()
        else:
            rs = load_ranking_set(path)
        frame_gb = rs.frame.memory_usage(deep=True).sum() / 1e9
        report(path, "ranking", f"(frame {frame_gb:.1f} GB, X {rs.X.nbytes / 1e9:.1f} GB)")
        kept.append(rs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
