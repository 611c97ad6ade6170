"""The config space: its size and fingerprint, config ids, and the feasibility rules computed from a DeviceSpec."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from autoheur.device import H100_SXM
from autoheur.kernels import SPACE_HASH, KernelConfig, Ragged, Signature, all_configs, feasible_configs
from autoheur.kernels import config as cfgmod
from autoheur.kernels.config import acc_regs_per_thread, infeasible_reason, occupancy, smem_bytes

# Changing the space (an axis, a value, the order) or a feasibility constant must bump SPACE_VERSION in
# autoheur/kernels/config.py, and then these two numbers: datasets and models carry SPACE_HASH and refuse a mismatch.
SPACE_SIZE = 5760
EXPECTED_SPACE_HASH = "fc6ce798b8437b92"

SIG_BF16_M = Signature(Ragged.M, 2, True)  # 2D x 3D, 2-byte elements (bf16/fp16), TMA-legal layout
A100_LIKE = dataclasses.replace(H100_SXM, name="sm80", compute_capability=(8, 0))


# ---------------------------------------------------------------------------------------------------------------
# The space
# ---------------------------------------------------------------------------------------------------------------


def test_space_size_is_stable():
    assert len(all_configs()) == SPACE_SIZE


def test_space_hash_is_stable():
    assert re.fullmatch(r"[0-9a-f]{16}", SPACE_HASH)
    assert SPACE_HASH == EXPECTED_SPACE_HASH
    assert cfgmod._space_fingerprint() == SPACE_HASH  # deterministic within and across processes


def test_space_is_the_product_of_the_axes():
    axes = (cfgmod.BLOCK_M, cfgmod.BLOCK_N, cfgmod.BLOCK_K, cfgmod.NUM_STAGES, cfgmod.NUM_WARPS, cfgmod.GROUP_M)
    n_tile = 1
    for axis in axes:
        n_tile *= len(axis)
    assert len(all_configs()) == n_tile * 3  # ptr, tma, tma + warp specialization
    assert all_configs() is all_configs()  # cached: one fixed order
    for c in all_configs():
        assert not c.warp_specialize or c.load == "tma"


def test_config_ids_are_unique_and_round_trip():
    ids = [c.config_id for c in all_configs()]
    assert len(set(ids)) == len(ids)
    for c in all_configs():
        assert KernelConfig.from_id(c.config_id) == c


def test_config_id_format():
    assert KernelConfig(128, 256, 64, 4, 8, 8, "tma", True).config_id == "m128n256k64s4w8g8-tma-ws"
    assert KernelConfig(16, 64, 32, 2, 2).config_id == "m16n64k32s2w2g1-ptr"


@pytest.mark.parametrize("bad", ["", "m128n256k64s4w8g8", "m128n256k64s4w8g8-cp", "m128n256k64s4w8g8-tma-ws-x"])
def test_from_id_rejects_garbage(bad):
    with pytest.raises(ValueError, match="not a config id"):
        KernelConfig.from_id(bad)


def test_from_id_rejects_out_of_space_values():
    with pytest.raises(ValueError, match="block_m"):
        KernelConfig.from_id("m48n256k64s4w8g8-tma")


def test_to_dict_round_trips():
    for c in all_configs()[::97]:
        assert KernelConfig(**c.to_dict()) == c


def test_kernel_kwargs():
    kw = KernelConfig(64, 128, 32, 3, 4, 8, "tma", True).kernel_kwargs()
    assert kw == dict(
        BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, USE_TMA=True, WARP_SPECIALIZE=True, num_stages=3, num_warps=4
    )
    assert KernelConfig(64, 128, 32, 3, 4).kernel_kwargs()["USE_TMA"] is False


# ---------------------------------------------------------------------------------------------------------------
# KernelConfig rejects values outside the space
# ---------------------------------------------------------------------------------------------------------------

VALID = dict(block_m=64, block_n=64, block_k=32, num_stages=3, num_warps=4, group_m=1, load="ptr")


@pytest.mark.parametrize(
    "field,value",
    [
        ("block_m", 8),
        ("block_m", 512),
        ("block_n", 16),
        ("block_k", 48),
        ("num_stages", 1),
        ("num_stages", 6),
        ("num_warps", 1),
        ("num_warps", 16),
        ("group_m", 4),
        ("load", "cp.async"),
        ("load", "TMA"),
    ],
)
def test_rejects_out_of_space_values(field, value):
    with pytest.raises(ValueError, match=rf"KernelConfig\.{field}="):
        KernelConfig(**{**VALID, field: value})


def test_rejects_warp_specialize_with_ptr():
    with pytest.raises(ValueError, match="warp_specialize"):
        KernelConfig(**VALID, warp_specialize=True)
    assert KernelConfig(**{**VALID, "load": "tma"}, warp_specialize=True).warp_specialize


def test_rejects_non_bool_warp_specialize():
    with pytest.raises(TypeError, match="warp_specialize"):
        KernelConfig(**{**VALID, "load": "tma"}, warp_specialize=1)


@pytest.mark.parametrize("field,value", [("block_m", 64.0), ("group_m", True)])
def test_rejects_non_int_axis_values(field, value):
    with pytest.raises((TypeError, ValueError)):
        KernelConfig(**{**VALID, field: value})  # would give ids like 'm64.0n64...' or '...gTrue-ptr' (no round trip)


@pytest.mark.parametrize("obj", [KernelConfig(**VALID), SIG_BF16_M, H100_SXM], ids=["config", "signature", "device"])
def test_frozen(obj):
    name = dataclasses.fields(obj)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, getattr(obj, name))
    with pytest.raises((AttributeError, TypeError)):  # slots: no new attributes either
        obj.extra = 1


def test_hashable_and_equal_by_value():
    assert KernelConfig(**VALID) == KernelConfig(**VALID)
    assert len({KernelConfig(**VALID), KernelConfig(**VALID)}) == 1


# ---------------------------------------------------------------------------------------------------------------
# Feasibility: computed from the signature and the DeviceSpec
# ---------------------------------------------------------------------------------------------------------------


def test_feasible_count_2dx3d_bf16_h100():
    feasible = feasible_configs(SIG_BF16_M, H100_SXM)
    assert len(feasible) >= 1000
    assert {c.load for c in feasible} == {"ptr", "tma"}
    assert any(c.warp_specialize for c in feasible)
    for axis in ("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m"):
        assert {getattr(c, axis) for c in feasible} == set(getattr(cfgmod, axis.upper())), axis


@pytest.mark.parametrize("elem_bytes", [1, 2, 4])
@pytest.mark.parametrize("tma_aligned", [True, False])
def test_feasible_configs_matches_infeasible_reason(elem_bytes, tma_aligned):
    """The whole-space rule (feasible_mask, what feasible_configs reads) against the config-by-config one, on devices
    that bind each rule: shared memory (small and huge), no TMA, and registers (a 1 MB block lets every config past
    shared memory, leaving the register and warp-specialization rules alone to decide)."""
    sig = Signature(Ragged.K, elem_bytes, tma_aligned)
    devices = (
        H100_SXM, A100_LIKE, dataclasses.replace(H100_SXM, smem_per_block_optin=100 * 1024),
        dataclasses.replace(H100_SXM, smem_per_block_optin=1 << 20),
    )  # fmt: skip
    for device in devices:
        mask = cfgmod.feasible_mask(sig, device)
        assert mask.shape == (len(all_configs()),) and mask.dtype == bool
        want = [infeasible_reason(c, sig, device) is None for c in all_configs()]
        assert mask.tolist() == want, device
        assert feasible_configs(sig, device) == [c for c, ok in zip(all_configs(), want, strict=True) if ok]


@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_smem_bytes_formula(elem_bytes):
    c = KernelConfig(128, 128, 64, 4, 8)
    assert smem_bytes(c, elem_bytes) == 4 * (128 + 128) * 64 * elem_bytes + cfgmod.SMEM_RESERVE


@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_smem_rule_follows_the_device(elem_bytes):
    """A config feasible on the H100 becomes infeasible on a device with 1 byte less shared memory than it needs."""
    sig = Signature(Ragged.M, elem_bytes, True)
    c = KernelConfig(128, 128, 64, 3, 8)
    need = smem_bytes(c, elem_bytes)
    assert infeasible_reason(c, sig, H100_SXM) is None
    assert infeasible_reason(c, sig, dataclasses.replace(H100_SXM, smem_per_block_optin=need)) is None
    reason = infeasible_reason(c, sig, dataclasses.replace(H100_SXM, smem_per_block_optin=need - 1))
    assert reason is not None and "shared memory" in reason and str(need) in reason


def test_smem_rule_over_the_space():
    small = dataclasses.replace(H100_SXM, smem_per_block_optin=100 * 1024)
    big = set(feasible_configs(SIG_BF16_M, H100_SXM))
    few = set(feasible_configs(SIG_BF16_M, small))
    assert few < big
    assert all(smem_bytes(c, 2) <= 100 * 1024 for c in few)
    assert all(smem_bytes(c, 2) > 100 * 1024 for c in big - few)
    fp32 = feasible_configs(Signature(Ragged.M, 4, True), H100_SXM)
    assert set(fp32) < big  # 4-byte elements need twice the shared memory
    assert all(smem_bytes(c, 4) <= H100_SXM.smem_per_block_optin for c in fp32)


@pytest.mark.parametrize(
    "bm,bn,warps,feasible",
    [
        (128, 256, 8, True),  # 128 accumulators per thread: the limit
        (256, 256, 8, False),  # 256: would spill
        (256, 128, 4, False),
        (128, 128, 4, True),
        (32, 32, 2, True),  # 16 per thread: the floor
        (16, 32, 2, False),  # 8 per thread: too many warps for the tile
        (32, 64, 8, False),
    ],
)
def test_register_rules(bm, bn, warps, feasible):
    c = KernelConfig(bm, bn, 32, 2, warps)
    assert acc_regs_per_thread(c) == bm * bn // (32 * warps)
    reason = infeasible_reason(c, SIG_BF16_M, H100_SXM)
    assert (reason is None) == feasible, reason
    if not feasible:
        assert "per thread" in reason or "registers" in reason


def test_register_rules_over_the_space():
    for c in feasible_configs(SIG_BF16_M, H100_SXM):
        assert cfgmod.MIN_ACC_PER_THREAD <= acc_regs_per_thread(c) <= cfgmod.MAX_ACC_REGS


def test_no_tma_before_hopper():
    assert not A100_LIKE.has_tma and H100_SXM.has_tma
    feasible = feasible_configs(SIG_BF16_M, A100_LIKE)
    assert feasible and {c.load for c in feasible} == {"ptr"}
    reason = infeasible_reason(KernelConfig(64, 64, 32, 3, 4, load="tma"), SIG_BF16_M, A100_LIKE)
    assert reason is not None and "compute capability" in reason
    # Same device otherwise: exactly the pointer configs survive.
    assert set(feasible) == {c for c in feasible_configs(SIG_BF16_M, H100_SXM) if c.load == "ptr"}


@pytest.mark.parametrize("ragged", list(Ragged))
def test_no_tma_without_aligned_layout(ragged):
    aligned = feasible_configs(Signature(ragged, 2, True), H100_SXM)
    unaligned = feasible_configs(Signature(ragged, 2, False), H100_SXM)
    assert unaligned and {c.load for c in unaligned} == {"ptr"}
    assert set(unaligned) == {c for c in aligned if c.load == "ptr"}
    reason = infeasible_reason(KernelConfig(64, 64, 32, 3, 4, load="tma"), Signature(ragged, 2, False), H100_SXM)
    assert reason is not None and "16-byte" in reason


@pytest.mark.parametrize(
    "bm,stages,warps,feasible",
    [(64, 3, 4, True), (128, 5, 8, True), (32, 3, 4, False), (64, 2, 4, False), (64, 3, 2, False)],
)
def test_warp_specialization_rule(bm, stages, warps, feasible):
    c = KernelConfig(bm, 64, 32, stages, warps, load="tma", warp_specialize=True)
    reason = infeasible_reason(c, SIG_BF16_M, H100_SXM)
    assert (reason is None) == feasible, reason
    assert infeasible_reason(dataclasses.replace(c, warp_specialize=False), SIG_BF16_M, H100_SXM) is None


def test_feasibility_ignores_the_device_name():
    renamed = dataclasses.replace(H100_SXM, name="anything")
    assert feasible_configs(SIG_BF16_M, renamed) == feasible_configs(SIG_BF16_M, H100_SXM)


# ---------------------------------------------------------------------------------------------------------------
# Occupancy
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_occupancy_at_least_one(elem_bytes):
    for c in all_configs():
        assert 1 <= occupancy(c, elem_bytes, H100_SXM) <= cfgmod.MAX_OCCUPANCY


@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_occupancy_non_increasing_in_stages(elem_bytes):
    tiles = itertools.product(
        cfgmod.BLOCK_M, cfgmod.BLOCK_N, cfgmod.BLOCK_K, cfgmod.NUM_WARPS, cfgmod.GROUP_M, cfgmod.LOADS
    )
    for bm, bn, bk, w, g, load in tiles:
        occ = [occupancy(KernelConfig(bm, bn, bk, s, w, g, load), elem_bytes, H100_SXM) for s in cfgmod.NUM_STAGES]
        assert occ == sorted(occ, reverse=True), (bm, bn, bk, w, g, load, occ)


def test_occupancy_examples():
    small = KernelConfig(32, 32, 32, 2, 2)  # 5 KB of smem, 64 threads, 80 registers each: capped at 8
    assert occupancy(small, 2, H100_SXM) == cfgmod.MAX_OCCUPANCY
    big = KernelConfig(128, 256, 64, 4, 8)  # 197 KB of smem: one per SM
    assert occupancy(big, 2, H100_SXM) == 1
    mid = KernelConfig(128, 128, 64, 2, 4)  # 65 KB of smem -> 3; 128 threads x 192 registers -> 2
    assert occupancy(mid, 2, H100_SXM) == 2
    more_regs = dataclasses.replace(H100_SXM, regs_per_sm=2 * H100_SXM.regs_per_sm)
    assert occupancy(mid, 2, more_regs) == 3
