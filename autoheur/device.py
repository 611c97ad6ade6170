"""What autoheur needs to know about a GPU: the properties that decide feasibility and speed.

Feasibility of a config (shared memory, registers, TMA) is computed from these numbers, never from a per-GPU table.
`DeviceSpec.from_torch()` reads them off the current CUDA device; the presets below are the values torch 2.11 reported
on the lent machines, used by CPU tests and as a fallback description when no GPU is present.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass


def device_slug(name: str) -> str:
    """A GPU name as a file name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (data/ and models/ use it)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    smem_per_block_optin: int  # bytes a block may use after opting in (227 KB on Hopper)
    smem_per_sm: int  # bytes per multiprocessor, shared by resident blocks
    regs_per_sm: int  # 32-bit registers per multiprocessor
    max_threads_per_sm: int
    l2_bytes: int

    @property
    def slug(self) -> str:
        """Filesystem-safe name, e.g. 'nvidia-h100-80gb-hbm3'."""
        return device_slug(self.name)

    @property
    def has_tma(self) -> bool:
        return self.compute_capability >= (9, 0)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["compute_capability"] = list(self.compute_capability)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> DeviceSpec:
        d = dict(d)
        d["compute_capability"] = tuple(d["compute_capability"])
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})

    @classmethod
    def from_torch(cls, device: int | str | None = None) -> DeviceSpec:
        import torch

        p = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
        return cls(
            name=p.name,
            compute_capability=(p.major, p.minor),
            sm_count=p.multi_processor_count,
            smem_per_block_optin=p.shared_memory_per_block_optin,
            smem_per_sm=p.shared_memory_per_multiprocessor,
            regs_per_sm=p.regs_per_multiprocessor,
            max_threads_per_sm=p.max_threads_per_multi_processor,
            l2_bytes=p.L2_cache_size,
        )


# Values reported by torch.cuda.get_device_properties on the lent machines (torch 2.11.0+cu130).
H100_SXM = DeviceSpec(
    name="NVIDIA H100 80GB HBM3",
    compute_capability=(9, 0),
    sm_count=132,
    smem_per_block_optin=232448,
    smem_per_sm=233472,
    regs_per_sm=65536,
    max_threads_per_sm=2048,
    l2_bytes=52428800,
)
H200 = dataclasses.replace(H100_SXM, name="NVIDIA H200", l2_bytes=62914560)

PRESETS = {"h100": H100_SXM, "h200": H200}
# What `autoheur collect` names the device of a dataset timed in the Triton interpreter (the H100's feasibility rules,
# the CPU's timings): never an H100's. At run time in the interpreter a model of such data comes first (Tuner.model).
INTERPRETER_NAME = "Triton interpreter (H100 rules)"


def current_device_spec() -> DeviceSpec:
    """The current CUDA device, or the H100 preset when there is no GPU (CPU interpreter, tests)."""
    import torch

    if torch.cuda.is_available():
        return DeviceSpec.from_torch()
    return H100_SXM
