"""`autoheur selftest`: run the kernel family on small problems of every layout and check it against the reference.

On a GPU it runs a sample of configs per layout in bf16 and fp16; without one it runs the same code through the
Triton interpreter in fp16 and fp32 (the interpreter's bf16 dot is broken, see docs), on smaller shapes.
"""

from __future__ import annotations

import os
import time


def _problems(gpu: bool):
    from autoheur.problem import Problem

    dtypes = ("bfloat16", "float16") if gpu else ("float16", "float32")
    n, k = (264, 136) if gpu else (40, 24)
    sizes = (0, 37, 200, 5, 126) if gpu else (5, 0, 19, 8)
    g = len(sizes)
    for dt in dtypes:
        yield Problem("2d3d", g, sizes, 0, n, k, dt, "k", "k", name=f"2d3d {dt} (MoE forward, B stored [G,N,K])")
        yield Problem("3d2d", g, tuple(8 * s for s in sizes), k, 0, n, dt, "k", "k", name=f"3d2d {dt} (ragged N)")
        yield Problem("2d2d", g, sizes, n, k, 0, dt, "n", "m", name=f"2d2d {dt} (weight gradient, ragged K)")
        yield Problem("3d3d", 2, (), 40, n, k, dt, "n", "k", name=f"3d3d {dt} (batched)")


SAMPLE = ("m16n64k32s2w2g1-ptr", "m64n128k64s3w4g8-ptr", "m64n64k32s3w4g8-tma", "m128n128k64s3w8g8-tma-ws")


def run(verbose: bool = True) -> int:
    """Return the number of failed checks (0 = all good)."""
    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from autoheur.collect.precompile import check_config
    from autoheur.kernels import KernelConfig

    where = torch.cuda.get_device_name() if gpu else "CPU (Triton interpreter)"
    print(f"autoheur selftest on {where}")
    failed = 0
    t0 = time.time()
    for p in _problems(gpu):
        for cid in SAMPLE:
            r = check_config(p, KernelConfig.from_id(cid))
            if r.status == "invalid":  # e.g. TMA on a layout whose group bases are not 16-byte aligned
                continue
            failed += r.status != "ok"
            if verbose:
                print(f"  {p.name:44s} {cid:26s} {r.status:6s} rel err {r.rel_err:.1e}")
    print(f"{'FAILED' if failed else 'ok'}: {failed} failures in {time.time() - t0:.1f}s")
    return failed
