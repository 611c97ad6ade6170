"""forest.py: the compiled walk of a booster's trees gives XGBoost's scores bit for bit, or steps aside."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from autoheur.collect.workloads import public_problems
from autoheur.models import artifact, forest
from autoheur.models.rankers import booster_predict

needs_library = pytest.mark.skipif(forest._library() is None, reason=f"forest: {forest.status()}")


def _rows(rng, n: int, f: int) -> np.ndarray:
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, 0] = np.round(X[:, 0])  # ties with the split values, on both sides of `x < split`
    return X


@pytest.fixture(scope="module")
def boosters():
    rng = np.random.default_rng(0)
    X = _rows(rng, 600, 9)
    y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=len(X))
    reg = xgb.XGBRegressor(n_estimators=40, max_depth=7, learning_rate=0.3, n_jobs=1, base_score=0.37).fit(X, y)
    qid = np.repeat(np.arange(30), 20)
    rel = np.clip(np.round(y - y.min()), 0, 8).astype(int)
    rank = xgb.XGBRanker(n_estimators=25, max_depth=5, objective="rank:pairwise", n_jobs=1).fit(X, rel, qid=qid)
    lossguide = xgb.XGBRegressor(n_estimators=15, grow_policy="lossguide", max_leaves=40, max_depth=0, n_jobs=1)
    return {
        "regressor": reg.get_booster(),
        "ranker": rank.get_booster(),
        "lossguide": lossguide.fit(X, y).get_booster(),
    }


@needs_library
@pytest.mark.parametrize("name", ["regressor", "ranker", "lossguide"])
def test_scores_are_xgboost_bit_for_bit(boosters, name):
    booster = boosters[name]
    X = _rows(np.random.default_rng(1), 300, 9)
    rounds = booster.num_boosted_rounds()
    for begin, end in [(0, 0), (0, 10), (10, rounds), (3, 4), (5, 5)]:
        for n in (1, 15, 16, 17, 64, 65, 300):  # the C routine's 16-row lanes and 64-row blocks, and their tails
            want = booster.inplace_predict(X[:n], iteration_range=(begin, end)).astype(np.float64)
            got = forest.forest_predict(booster, X[:n], begin, end)
            assert got is not None
            np.testing.assert_array_equal(got, want, err_msg=f"{name} rounds [{begin}, {end}) rows {n}")


@needs_library
def test_the_shipped_models_score_as_xgboost_and_list_the_same_configs(monkeypatch):
    """Every booster of each shipped model, on rows whose values sit on and beside its split values, and each
    model's top 10 of the public problems with the walk on and off."""
    rng = np.random.default_rng(2)
    for path in artifact.shipped_models():
        model = artifact.TrainedModel.load(path)
        experts = [model.ranker._expert(e) for e in range(len(model.ranker.experts_ or ()))] or [model.ranker]
        for ex in experts:
            rr = getattr(ex, "reranker_", None)
            for booster in [m.get_booster() for m in ex.members_] + ([rr.get_booster()] if rr is not None else []):
                f = forest.forest_of(booster)
                assert f is not None, path
                inner = f.nodes["child"][:, 0] != np.arange(len(f.nodes))
                X = np.empty((200, f.n_features), np.float32)
                for j in range(f.n_features):
                    split = f.nodes["thr"][inner & (f.nodes["feat"] == j)]
                    pick = rng.choice(split if len(split) else np.zeros(1, np.float32), len(X))
                    X[:, j] = np.where(rng.random(len(X)) < 0.5, pick, np.nextafter(pick, np.float32(-np.inf)))
                for begin, end in [(0, 0), (0, 50), (50, booster.num_boosted_rounds())]:
                    want = booster.inplace_predict(X, iteration_range=(begin, end)).astype(np.float64)
                    np.testing.assert_array_equal(forest.forest_predict(booster, X, begin, end), want)
        for p in public_problems()[:6]:
            on = [c.config_id for c, _ in model.top_k(p, 10)]
            monkeypatch.setenv("AUTOHEUR_FOREST", "0")
            off = [c.config_id for c, _ in model.top_k(p, 10)]
            monkeypatch.delenv("AUTOHEUR_FOREST")
            assert on == off, (path.name, p.name)


@needs_library
def test_it_steps_aside_where_xgboost_should_score(boosters, monkeypatch):
    booster = boosters["regressor"]
    X = _rows(np.random.default_rng(3), forest.MAX_ROWS + 1, 9)
    assert forest.forest_predict(booster, X) is None  # a big batch: XGBoost's threads
    assert forest.forest_predict(booster, X[:0]) is None
    assert forest.forest_predict(booster, X[:5, :8]) is None  # not the booster's features
    nan = X[:5].copy()
    nan[2, 1] = np.nan  # a missing value: XGBoost's default directions
    assert forest.forest_predict(booster, nan) is None
    want = booster.inplace_predict(nan).astype(np.float64)
    np.testing.assert_array_equal(booster_predict(booster, nan), want)
    monkeypatch.setenv("AUTOHEUR_FOREST", "0")
    assert forest.forest_predict(booster, X[:5]) is None
    assert forest.status().startswith("off")
    with pytest.raises(ValueError, match="iteration range"):
        forest.forest_of(booster).predict(X[:5], 7, 3)


@needs_library
def test_a_booster_loaded_over_is_read_again(boosters):
    booster = xgb.Booster(model_file=boosters["ranker"].save_raw("ubj"))
    X = _rows(np.random.default_rng(6), 20, 9)
    np.testing.assert_array_equal(booster_predict(booster, X), boosters["ranker"].inplace_predict(X))
    booster.load_model(boosters["regressor"].save_raw("ubj"))  # 40 rounds, not 25: the same object, another model
    np.testing.assert_array_equal(booster_predict(booster, X), boosters["regressor"].inplace_predict(X))


def test_boosters_it_does_not_read_go_to_xgboost():
    rng = np.random.default_rng(4)
    X = _rows(rng, 200, 4)
    frame = pd.DataFrame(X, columns=list("abcd")).assign(c=pd.Categorical(rng.integers(0, 5, len(X))))
    cat = xgb.XGBRegressor(n_estimators=5, enable_categorical=True, tree_method="hist", n_jobs=1, max_cat_to_onehot=1)
    cat = cat.fit(frame, X[:, 0] + frame["c"].cat.codes).get_booster()
    multi = xgb.XGBClassifier(n_estimators=3, n_jobs=1).fit(X, rng.integers(0, 3, len(X))).get_booster()
    for booster, why in [(cat, "categorical"), (multi, "several outputs")]:
        assert forest.forest_of(booster) is None
        assert why in forest._FORESTS[booster]
    assert forest.forest_predict(multi, X[:5]) is None


def test_a_model_document_out_of_range_is_not_read(boosters):
    doc = forest.ubjson_loads(bytes(boosters["ranker"].save_raw("ubj")))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][3]
    inner = int(np.flatnonzero(tree["left_children"] >= 0)[0])
    tree["right_children"][inner] = len(tree["left_children"])  # a child past its tree's nodes
    with pytest.raises(forest.Unsupported, match="out of range"):
        forest.Forest.from_model(doc)
    tree["right_children"][inner] = inner + 1
    tree["split_indices"][inner] = 9  # the booster has 9 features: 0-8
    with pytest.raises(forest.Unsupported, match="out of range"):
        forest.Forest.from_model(doc)


def test_no_compiler_means_xgboost_and_a_reason(boosters, monkeypatch, tmp_path):
    monkeypatch.setattr(forest, "_state", {})
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    booster = boosters["regressor"]
    X = _rows(np.random.default_rng(5), 20, 9)
    assert forest.forest_predict(booster, X) is None
    assert "not compiled" in forest.status() and "false failed" in forest.status()
    np.testing.assert_array_equal(booster_predict(booster, X), booster.inplace_predict(X).astype(np.float64))
    assert not list(tmp_path.rglob("*.so"))


@pytest.fixture
def built(monkeypatch, tmp_path) -> Path:
    """The routine compiled into a cache of its own (tmp_path), this process's state fresh: the library's path."""
    if forest._compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setattr(forest, "_state", {})
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path))
    assert forest._library() is not None
    (lib,) = tmp_path.rglob("*.so")
    return lib


def test_the_routine_is_compiled_once_into_the_cache(built, monkeypatch, tmp_path):
    lib = built
    assert str(lib) in forest.status() and lib.parent == tmp_path / "forest"
    stamp = lib.stat().st_mtime_ns
    monkeypatch.setattr(forest, "_state", {})
    assert forest._library() is not None and lib.stat().st_mtime_ns == stamp  # loaded, not rebuilt
    assert sorted(p.name for p in lib.parent.iterdir()) == sorted([lib.name, lib.with_suffix(".sha256").name])


@pytest.mark.parametrize("damage", ["cut short", "another library", "no digest", "garbled digest"])
def test_a_damaged_library_in_the_cache_is_rebuilt_not_loaded(built, monkeypatch, tmp_path, damage):
    """A cut-short library in the cache crashed the process (a bus error) when loaded, and another library raised
    past the fallback (no such symbol): each is now checked against the digest written beside it, and rebuilt."""
    lib = built
    good = lib.read_bytes()
    # Damaged as another process would leave it: a new file in its place (this process has the library mapped, and
    # writing into a mapped file would fault this process, not test the check).
    bad = tmp_path / "bad.so"
    if damage == "cut short":
        bad.write_bytes(good[:3000])
        os.replace(bad, lib)
    elif damage == "another library":
        other = tmp_path / "other.c"
        other.write_text("int other(void) { return 1; }\n")
        subprocess.run([*forest._compiler(), "-shared", "-fPIC", str(other), "-o", str(bad)], check=True)
        os.replace(bad, lib)
    elif damage == "no digest":
        lib.with_suffix(".sha256").unlink()
    else:
        lib.with_suffix(".sha256").write_bytes(b"\xff\xfe")  # not even text
    monkeypatch.setattr(forest, "_state", {})
    assert forest._library() is not None  # rebuilt, and loaded
    assert forest._sha256(lib) == lib.with_suffix(".sha256").read_text().strip() and lib.stat().st_size == len(good)
    assert "compiled" in forest.status()


def test_ubjson_reads_what_xgboost_writes_as_its_json_says(boosters):
    booster = boosters["lossguide"]
    ubj = forest.ubjson_loads(bytes(booster.save_raw("ubj")))
    ref = json.loads(booster.save_raw("json"))

    def same(a, b, where="$"):
        if isinstance(b, dict):
            assert isinstance(a, dict) and a.keys() == b.keys(), where
            for k in b:
                same(a[k], b[k], f"{where}.{k}")
        elif isinstance(b, list) and not (isinstance(a, np.ndarray)):
            assert isinstance(a, list) and len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                same(x, y, f"{where}[{i}]")
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, np.asarray(b, dtype=a.dtype), err_msg=where)
        elif isinstance(b, float):
            assert np.float32(a) == np.float32(b), where
        else:
            assert a == b, where

    same(ubj, ref)


def test_ubjson_refuses_what_it_does_not_read():
    doc = forest.ubjson_loads(b"{i\x01aSi\x02hii\x01b[$l#i\x02\x00\x00\x00\x01\xff\xff\xff\xffi\x01c[TZi\x05]}")
    assert doc["a"] == "hi" and doc["c"] == [True, None, 5]
    np.testing.assert_array_equal(doc["b"], [1, -1])
    for bad, msg in [(b"{i\x01aT}x", "after the document"), (b"X", "unknown marker"), (b"[$l]", "without a count"),
                     (b"{$i#i\x01}", "optimized objects"), (b"Sd", "expected an integer")]:  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            forest.ubjson_loads(bad)


def test_prepare_scoring_reads_every_booster_of_a_shipped_model(monkeypatch):
    model = artifact.TrainedModel.load(artifact.shipped_models()[0])
    boosters = model.ranker.boosters()
    experts = model.ranker.experts_.values() if model.ranker.experts_ else [model.ranker]
    assert len(boosters) == sum(len(e.members_) + (e.reranker_ is not None) for e in experts)
    monkeypatch.setenv("AUTOHEUR_FOREST", "0")
    assert model.prepare_scoring().startswith("off")
    assert not any(b in forest._FORESTS for b in boosters)
    monkeypatch.delenv("AUTOHEUR_FOREST")
    status = model.prepare_scoring()
    if forest._library() is None:
        pytest.skip(f"forest: {status}")
    assert all(isinstance(forest._FORESTS.get(b), forest.Forest) for b in boosters)


@pytest.mark.parametrize("text, on", [("0", False), ("off", False), ("No", False), ("1", True), ("TRUE", True)])
def test_the_forest_knob_takes_on_off_spellings_and_refuses_the_rest(monkeypatch, text, on):
    monkeypatch.setenv("AUTOHEUR_FOREST", text)
    assert forest.enabled() is on
    monkeypatch.setenv("AUTOHEUR_FOREST", "fast")  # read as on before: a typo must not pass for a choice
    with pytest.raises(ValueError, match="AUTOHEUR_FOREST='fast': expected one of"):
        forest.enabled()
