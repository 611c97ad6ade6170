"""The tuned-config cache on disk: corrupt files read by many processes, unusable locations, the files that must not
hold "aten", and interpreted runs kept apart from a GPU's."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import warnings

import pytest
import torch

from autoheur.inference import tuner as tuner_mod
from autoheur.inference.api import grouped_mm
from autoheur.inference.cache import TuneCache
from autoheur.kernels.reference import reference_grouped_mm

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # as tests/conftest.py decides
OFFS = torch.tensor([5, 5, 28], dtype=torch.int32, device=DEVICE)
CFG = "m64n128k64s3w4g8-ptr"


def _damage(path) -> None:
    """Replace the cache file by a truncated one at once (readers see the old file or the damaged one, never half)."""
    tmp = path.with_suffix(f".damage-{os.getpid()}")
    tmp.write_text('{"k": {"config": "m64n1')
    tmp.replace(path)


def _hammer(directory, i, barrier, rounds):
    """Damage the file, then read it and write to it from a fresh cache (a new process's view), `rounds` times."""
    path = TuneCache("GPU X", directory).path
    barrier.wait()
    for j in range(rounds):
        if j % 2 == 0:
            _damage(path)
        c = TuneCache("GPU X", directory)
        assert c.get("missing") is None
        c.put(f"w{i}-{j}", {"config": CFG})


def test_a_corrupt_file_hammered_by_processes_crashes_none_and_sets_aside_only_corrupt_files(tmp_path):
    """Readers and writers of a corrupt file race to set it aside: only one under the lock does, after re-reading
    it there; no process crashes, and no good file (a writer's replacement) is ever moved aside."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_hammer, args=(tmp_path, i, barrier, 40)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    aside = list(tmp_path.glob("*.corrupt-*"))
    assert aside  # the damage was seen and set aside
    for f in aside:
        with pytest.raises(ValueError):
            json.loads(f.read_text())


def test_a_good_file_replaced_after_a_corrupt_read_is_not_set_aside(tmp_path, monkeypatch):
    """The unlocked read saw damage; by the time the reader holds the lock, a writer has put a good file back."""
    c = TuneCache("GPU X", tmp_path)
    c.path.write_text("{not json")
    real = TuneCache._read
    reads = []

    def read(self):
        reads.append(1)
        data = real(self)
        if len(reads) == 1:  # the unlocked read; then a writer replaces the file with a good one
            c.path.write_text(json.dumps({"k": {"config": CFG}}))
        return data

    monkeypatch.setattr(TuneCache, "_read", read)
    assert c.get("k")["config"] == CFG
    assert not list(tmp_path.glob("*.corrupt-*")) and json.loads(c.path.read_text())["k"]["config"] == CFG


@pytest.mark.parametrize("where", ["dir-under-a-file", "dir-at-the-file"])
def test_an_unusable_location_falls_back_to_memory_with_one_warning(tmp_path, where):
    if where == "dir-under-a-file":
        (tmp_path / "afile").write_text("")
        c = TuneCache("GPU X", tmp_path / "afile" / "cache")
    else:
        c = TuneCache("GPU X", tmp_path)
        c.path.mkdir()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert c.get("k") is None
        c.put("k", {"config": CFG})
        c.put("k2", {"config": CFG})
        assert c.get("k")["config"] == CFG and c.get("k2")["config"] == CFG  # in memory
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 1 and str(c.path) in msgs[0] and "AUTOHEUR_CACHE_DIR" in msgs[0]


def test_grouped_mm_runs_with_an_unusable_cache_dir(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "afile" / "cache"))
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")
    monkeypatch.setenv("AUTOHEUR_ATEN", "off")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        grouped_mm(torch.randn(28, 24), torch.randn(3, 24, 40), OFFS)
        grouped_mm(torch.randn(28, 24), torch.randn(3, 24, 48), OFFS)  # another key
    assert sum("cannot use the tuning cache" in str(x.message) for x in w) == 1


def test_the_triton_only_file_never_hands_back_aten(tmp_path):
    plain, with_aten = TuneCache("GPU X", tmp_path), TuneCache("GPU X", tmp_path, aten=True)
    assert plain.path != with_aten.path  # the choices made with torch._grouped_mm among the candidates: a file apart
    plain.path.write_text(json.dumps({"k": {"config": "aten"}, "k2": {"config": CFG}}))
    assert plain.get("k") is None and plain.get("k2")["config"] == CFG  # a miss; the rest of the file stands
    with pytest.raises(ValueError, match="aten"):
        plain.put("k", {"config": "aten"})
    with_aten.put("k", {"config": "aten"})
    assert TuneCache("GPU X", tmp_path, aten=True).get("k")["config"] == "aten"


def test_a_planted_aten_in_the_triton_only_file_is_retuned_with_aten_off(monkeypatch):
    """AUTOHEUR_ATEN=off must never run torch._grouped_mm, whatever its cache file holds."""
    import autoheur.inference.api as api
    from autoheur.inference.key import tune_key
    from autoheur.kernels.validate import validate

    monkeypatch.setenv("AUTOHEUR_ATEN", "off")
    monkeypatch.setenv("AUTOHEUR_TUNE", "off")
    a, b = torch.randn(28, 24), torch.randn(3, 24, 40)
    call = validate(a, b, OFFS)
    cache = tuner_mod.default_tuner().cache(call.device.name, aten=False)
    key = tune_key(call).to_str()
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text(json.dumps({key: {"config": "aten"}}))
    monkeypatch.setattr(api, "aten_grouped_mm", lambda call: pytest.fail("ran torch._grouped_mm with ATEN=off"))
    out = grouped_mm(a, b, OFFS)
    torch.testing.assert_close(out[:28], reference_grouped_mm(a, b, OFFS)[:28])
    assert json.loads(cache.path.read_text())[key]["config"] != "aten"  # overwritten by the retune


def test_interpreted_runs_have_a_cache_file_of_their_own(tmp_path, monkeypatch):
    """The interpreter's winners are CPU wall-clock timings under the H100 preset's name: never a GPU's file."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    interpreted = TuneCache("NVIDIA H100 80GB HBM3", tmp_path).path
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert TuneCache("NVIDIA H100 80GB HBM3", tmp_path).path != interpreted


def test_a_failed_write_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    """A write cut short (a full disk) warns and leaves the earlier file as it was, and no temp file behind."""
    from pathlib import Path

    cache = TuneCache("GPU X", tmp_path)
    cache.put("k", {"config": CFG})
    before = cache.path.read_bytes()
    real = Path.write_text

    def dies(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError("No space left on device")

    monkeypatch.setattr(Path, "write_text", dies)
    with pytest.warns(UserWarning, match="cannot use the tuning cache"):
        cache.put("k2", {"config": CFG})
    monkeypatch.undo()
    assert cache.path.read_bytes() == before and not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.parametrize(
    "content",
    [
        {"k": CFG},
        {"k": None},
        {"k": ["x"]},
        [1, 2],
        {"k": {"config": CFG, "mode": ["predicted"]}},
        {"k": {"config": CFG, "top_k": "10"}},
        {"k": {"config": CFG, "model": 3}},
    ],
    ids=["str", "null", "list", "array", "mode-list", "top_k-text", "model-number"],
)
def test_a_file_of_the_wrong_shape_is_set_aside(tmp_path, content):
    """Valid JSON of the wrong shape is as corrupt as broken JSON: set aside, never a crash, and the cache works on."""
    cache = TuneCache("GPU X", tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text(json.dumps(content))
    assert cache.get("k") is None and list(tmp_path.glob("*.corrupt-*"))
    cache.put("k", {"config": CFG})
    assert TuneCache("GPU X", tmp_path).get("k")["config"] == CFG


def test_a_put_onto_a_corrupt_file_sets_it_aside(tmp_path):
    cache = TuneCache("GPU X", tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text("{not json")
    cache.put("k", {"config": CFG})
    assert list(tmp_path.glob("*.corrupt-*")) and TuneCache("GPU X", tmp_path).get("k")["config"] == CFG
