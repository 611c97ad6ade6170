"""Render the markdown tables of BENCHMARKS.md from a gpu_proof.py result (proof.json)."""

from __future__ import annotations

import json
import math
import sys


def main(path: str) -> None:
    r = json.load(open(path))
    env, ceil = r["env"], r["env"]["ceilings"]
    print(
        f"Device: {env['device']['name']} ({env['device']['sm_count']} SMs), torch {env['torch']}, "
        f"triton {env['triton']}, CUDA {env['cuda']}, date {env['date']}, space hash {env['space_hash']}."
    )
    print(
        f"Measured ceilings: copy {ceil['copy_GBps']:.0f} GB/s (read + write), dense bf16 8192^3 matmul "
        f"{ceil['matmul_TFLOPs']:.0f} TFLOP/s.\n"
    )
    c = r["correct"]
    print(
        f"Correctness: {c['passed']}/{c['checks']} (layout x dtype x major x config) checks passed; max relative "
        f"error bf16 {c['max_rel_err']['bfloat16']:.1e}, fp16 {c['max_rel_err']['float16']:.1e}.\n"
    )
    k = r["compile"]
    print(
        f"Full-space compile (2D x 3D bf16, {k['feasible']} feasible configs, {k['workers']} processes): "
        f"{k['wall_s']:.0f} s wall; status {k['status_counts']}.\n"
    )
    print(
        "| problem | G | rows | N | K | rows/group | aten ms | best ms | speedup | TFLOP/s | GB/s | roofline "
        "| aten roofline | best config | median cfg ms | worst cfg ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in r["time"]:
        print(
            f"| {t['problem']} | {t['G']} | {t['rows']} | {t['N']} | {t['K']} | {t['mean_rows']:.0f} | "
            f"{t['aten_ms']:.3f} | {t['best_ms']:.3f} | {t['speedup']:.2f} | {t['TFLOPs']:.0f} | {t['GBps']:.0f} | "
            f"{t['roofline_frac']:.2f} | {t['aten_roofline_frac']:.2f} | {t['best_config']} | "
            f"{t['median_cfg_ms']:.3f} | {t['worst_cfg_ms']:.2f}{'+' if t['censored'] else ''} |"
        )
    sp = [t["speedup"] for t in r["time"]]
    mem = [t for t in r["time"] if t["mean_rows"] <= 256]
    comp = [t for t in r["time"] if t["mean_rows"] > 256]
    print(
        f"\nGeomean speedup over aten: {math.exp(sum(map(math.log, sp)) / len(sp)):.3f} ({len(sp)} problems); "
        f"min on memory-bound (rows/group <= 256, {len(mem)}): {min(t['speedup'] for t in mem):.2f}; "
        f"min on compute-bound ({len(comp)}): {min(t['speedup'] for t in comp):.2f}."
    )
    print(
        f"Memory-bound problems at >= 85% of copy bandwidth: "
        f"{sum(t['GBps'] >= 0.85 * ceil['copy_GBps'] for t in mem)}/{len(mem)}; compute-bound at >= 75% of the "
        f"measured matmul rate: {sum(t['TFLOPs'] >= 0.75 * ceil['matmul_TFLOPs'] for t in comp)}/{len(comp)}."
    )


if __name__ == "__main__":
    main(sys.argv[1])
