"""The device numbers features need: sizes from the fingerprint, plus a bandwidth and a matmul rate.

Features take the device as a mapping (a dataset's device fingerprint, `DeviceSpec.to_dict()`, or a `DeviceSpec`).
The measured `copy_GBps` and `matmul_TFLOPs` come from the collection run; when they are missing or None, defaults
by name stand in (see `DEFAULT_RATES`), so a model trained on measured rates sees slightly different roofline
features at inference on a machine that was never measured. fp32 inputs run at `matmul_TFLOPs / FP32_SLOWDOWN`:
the kernel computes them in IEEE fp32, without tensor cores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# (name substring, copy GB/s, bf16/fp16 dense TFLOP/s), first match wins; the last row is the fallback.
DEFAULT_RATES = (("H200", 4400.0, 750.0), ("H100", 3000.0, 750.0), ("", 3000.0, 750.0))
FP32_SLOWDOWN = 15.0  # ieee fp32 dot vs the bf16 tensor-core rate
DEFAULT_MAX_THREADS_PER_SM = 2048  # every GPU since Volta; used when the mapping lacks max_threads_per_sm
REQUIRED_KEYS = ("sm_count", "l2_bytes", "smem_per_sm", "smem_per_block_optin", "regs_per_sm")


@dataclass(frozen=True, slots=True)
class DeviceParams:
    """The numbers features read off a device, all plain floats or ints (hashable: a cache key)."""

    name: str
    sm_count: int
    l2_bytes: int
    smem_per_sm: int
    smem_per_block_optin: int
    regs_per_sm: int
    max_threads_per_sm: int
    copy_GBps: float
    matmul_TFLOPs: float  # bf16/fp16 rate
    measured: bool  # both rates came from the mapping (False: at least one is a default by name)


def _given(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def device_params(device) -> DeviceParams:
    """`DeviceParams` of a mapping (fingerprint or `DeviceSpec.to_dict()`), a `DeviceSpec`, or a `DeviceParams`.

    Missing or None `copy_GBps` / `matmul_TFLOPs` default by name: H200 4400 GB/s and 750 TFLOP/s, H100 3000 and 750,
    anything else 3000 and 750. A missing `max_threads_per_sm` defaults to 2048.
    """
    if isinstance(device, DeviceParams):
        return device
    if not isinstance(device, Mapping):
        if not hasattr(device, "to_dict"):
            raise TypeError(f"device must be a mapping or a DeviceSpec, got {type(device).__name__}")
        device = device.to_dict()
    missing = [k for k in REQUIRED_KEYS if device.get(k) is None]
    if missing:
        raise ValueError(f"device mapping lacks {missing}; pass a dataset's device fingerprint or DeviceSpec.to_dict()")
    name = str(device.get("name") or "")
    _, bw_default, rate_default = next(row for row in DEFAULT_RATES if row[0].lower() in name.lower())
    bw, rate = _given(device.get("copy_GBps")), _given(device.get("matmul_TFLOPs"))
    return DeviceParams(
        name=name,
        sm_count=int(device["sm_count"]),
        l2_bytes=int(device["l2_bytes"]),
        smem_per_sm=int(device["smem_per_sm"]),
        smem_per_block_optin=int(device["smem_per_block_optin"]),
        regs_per_sm=int(device["regs_per_sm"]),
        max_threads_per_sm=int(device.get("max_threads_per_sm") or DEFAULT_MAX_THREADS_PER_SM),
        copy_GBps=bw if bw is not None else bw_default,
        matmul_TFLOPs=rate if rate is not None else rate_default,
        measured=bw is not None and rate is not None,
    )
