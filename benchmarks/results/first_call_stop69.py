"""Stop 69: the first top_k of a fresh process after loading and readying the shipped H100 model (what `autoheur
predict` times), then a second one, with the autoheur at CODE (a checkout; stop 68's from a worktree of 700ae5a).

    python3 benchmarks/results/first_call_stop69.py CODE
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from autoheur.collect.workloads import public_problems  # noqa: E402
from autoheur.models.artifact import TrainedModel  # noqa: E402

model = TrainedModel.load(Path(__file__).resolve().parents[2] / "models" / "nvidia-h100-80gb-hbm3.joblib")
model.prepare_scoring()
p = {q.name: q for q in public_problems()}["deepseek-v3/gate_up/mid"]
t0 = time.perf_counter()
model.top_k(p, 10)
t1 = time.perf_counter()
model.extrapolation(p)
t2 = time.perf_counter()
model.top_k(p, 10)
t3 = time.perf_counter()
print(f"{sys.argv[1]}: first top_k {1e3 * (t1 - t0):.2f} ms, extrapolation {1e3 * (t2 - t1):.2f} ms, "
      f"second top_k {1e3 * (t3 - t2):.2f} ms")  # fmt: skip
