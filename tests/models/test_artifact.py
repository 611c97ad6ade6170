"""Model files: train -> save -> load -> predict on a real dataset slice; mismatched or corrupt models are refused."""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import joblib
import pytest

from autoheur.cli import main
from autoheur.collect.schema import problem_from_row
from autoheur.collect.store import MANIFEST, DatasetStore
from autoheur.collect.workloads import public_problems
from autoheur.models import artifact
from autoheur.models.artifact import TrainedModel
from autoheur.models.data import AUX_ROWS
from autoheur.models.rankers import TRAIN_RELEVANCE
from autoheur.models.train import train

H100 = artifact.MODELS_DIR.parent / "data" / "nvidia-h100-80gb-hbm3"


def _mini(source, root, count=12):
    """`count` whole problems of the shipped dataset at `source` (ones that launch the kernel), copied to `root` as a
    dataset of their own: the first half of them 2D x 3D forwards (A and W K-contiguous), the rest the first of the
    other kinds, in the store's order. Why the forwards by name: the store orders problems by id, so which kinds come
    first moves as the dataset grows (at 8,308 problems the first twelve held no forward)."""
    root.mkdir()
    shutil.copy(source / MANIFEST, root / MANIFEST)
    store, mini = DatasetStore.load(source), DatasetStore.load(root)
    forwards = others = 0
    for pid, path in store.parts().items():
        part = store.read_part(pid, path)
        p = problem_from_row(part.slice(0, 1).to_pylist()[0])
        forward = (p.layout, p.a_major, p.b_major) == ("2d3d", "k", "k")
        if not p.launches or (forward and forwards >= count // 2) or (not forward and others >= count - count // 2):
            continue
        mini._write_part(pid, part)  # verbatim, as merge copies (the shipped parts are packed)
        forwards, others = forwards + forward, others + (not forward)
        if forwards + others == count:
            break
    return root


@pytest.fixture(scope="module")
def mini_of(tmp_path_factory):
    """`_mini` built once per (source, count) in this module and copied to each test's `root`: a build reads whole
    packs of a shipped dataset (13 s for the H200's), and seven tests take the same H200 problems."""
    built = {}

    def make(source, root, count=12):
        key = (Path(source), count)
        if key not in built:
            built[key] = _mini(source, tmp_path_factory.mktemp("mini") / Path(root).name, count=count)
        shutil.copytree(built[key], root)
        return root

    return make


@pytest.fixture(scope="module")
def mini_dataset(tmp_path_factory):
    """12 whole problems of the shipped H100 dataset, as a dataset of their own."""
    return _mini(H100, tmp_path_factory.mktemp("data") / "h100-mini")


@pytest.fixture(scope="module")
def trained(mini_dataset, tmp_path_factory):
    small = {"n_estimators": 60, "max_depth": 5, "n_jobs": 1}  # the real procedure (the ensemble, two-stage), small
    where = tmp_path_factory.mktemp("models")
    model = train(
        mini_dataset, "xgb_ranker", heldout_folds=2, log=lambda s: None, params=small,
        heldout_problems=where / "heldout.csv",
    )  # fmt: skip
    path = model.save(where / "h100-mini.joblib")
    return model, path


def test_heldout_problems_file_holds_what_the_metadata_summarizes(trained):
    """`train(heldout_problems=...)`: one row per problem of the held-out folds, whose summary is the metadata's."""
    import pandas as pd

    from autoheur.models.metrics import summarize

    model, path = trained
    pp = pd.read_csv(path.parent / "heldout.csv")
    assert len(pp) == pp["problem_id"].nunique() == 12
    assert set(pp["fold"].astype(str)) == {"0", "1"} and set(pp["model"]) == {"xgb_ranker"}
    everyone = next(r for r in model.meta["heldout"] if r["subset"] == "all")
    s = summarize(pp.set_index("problem_id"))
    for key in ("eff_best10_geomean", "eff_best10_min", "eff_top1_geomean", "oracle_in_top10"):
        assert round(s[key], 4) == everyone[key], key


def test_round_trip_predicts_the_same(trained):
    model, path = trained
    loaded = TrainedModel.load(path)
    p = public_problems()[5]
    assert [c.config_id for c, _ in loaded.top_k(p, 10)] == [c.config_id for c, _ in model.top_k(p, 10)]
    assert len(loaded.top_k(p, 10)) == 10


def test_metadata_travels(trained):
    model, path = trained
    meta = json.loads(path.with_suffix(".json").read_text())
    for key in ("feature_names", "features_hash", "space_hash", "device", "train_data_hash", "versions", "heldout",
                "fixed_list", "objective", "fit_seconds", "kernel_hash"):  # fmt: skip
        assert key in meta, key
    assert meta["kernel_hash"] == DatasetStore.load(H100).meta.kernel_hash
    assert meta["device"]["name"] == "NVIDIA H100 80GB HBM3"
    assert len(meta["fixed_list"]) == 10
    assert {r["subset"] for r in meta["heldout"]} >= {"all"}
    assert meta["train_problems"] == 12
    # Every library the model needs is recorded, whichever distribution installed it (xgboost or xgboost-cpu).
    import sklearn
    import xgboost

    assert meta["versions"]["xgboost"] == xgboost.__version__
    assert meta["versions"]["scikit-learn"] == sklearn.__version__


@pytest.mark.parametrize("field", ["space_hash", "features_hash"])
def test_mismatched_model_is_refused_with_how_to_retrain(trained, tmp_path, field):
    _, path = trained
    blob = joblib.load(path)
    blob["meta"][field] = "0000000000000000"
    bad = tmp_path / "bad.joblib"
    joblib.dump(blob, bad)
    with pytest.raises(ValueError, match="autoheur train"):
        TrainedModel.load(bad)


def test_model_of_another_config_space_is_refused_saying_to_recollect_its_data(trained, tmp_path):
    """Its dataset is of that space too, and `autoheur train` refuses such a dataset (check_space): "retrain it"
    alone sent the user to a second refusal. The message names the dataset to re-collect, then to train on."""
    from types import SimpleNamespace

    from autoheur.models.data import check_space

    _, path = trained
    blob = joblib.load(path)
    blob["meta"]["space_hash"] = "0000000000000000"
    joblib.dump(blob, tmp_path / "other-space.joblib")
    data = blob["meta"]["dataset"]
    with pytest.raises(ValueError, match="config-space hash 0000000000000000") as refused:
        TrainedModel.load(tmp_path / "other-space.joblib")
    assert f"autoheur collect --out {data} --new-dataset" in str(refused.value)
    assert f"autoheur train --data {data}" in str(refused.value)
    with pytest.raises(ValueError, match="Re-collect it"):  # training on that data, as "retrain it" alone said
        check_space(SimpleNamespace(family="triton", space_hash="0000000000000000"), data)
    assert "auxiliary" not in str(refused.value)  # the fixture trained on one dataset
    blob["meta"]["auxiliary"] = [{"dataset": "data/nvidia-h100-80gb-hbm3", "problems": 3}]  # as `train --aux` records
    joblib.dump(blob, tmp_path / "other-space.joblib")
    with pytest.raises(ValueError, match=r"and its auxiliary data \(data/nvidia-h100-80gb-hbm3\) the same way"):
        TrainedModel.load(tmp_path / "other-space.joblib")


def test_model_of_another_kernel_source_loads_with_a_warning(trained, tmp_path):
    _, path = trained
    blob = joblib.load(path)
    blob["meta"]["kernel_hash"] = "0000000000000000"
    stale = tmp_path / "stale.joblib"
    joblib.dump(blob, stale)
    with pytest.warns(UserWarning, match="kernel source 0000000000000000.*autoheur train"):
        TrainedModel.load(stale)


def test_the_twin_free_tail_is_saved_with_the_model(trained, tmp_path):
    """`distinct_after` is in the model's params (0, the default) and a model saved with it set loads with it set, on
    each expert too; a model pickled before the field existed (none on it or its experts) loads with it off."""
    from autoheur.models.rankers import set_prediction

    model, path = trained
    assert model.meta["params"]["distinct_after"] == 0
    blob = joblib.load(path)
    set_prediction(blob["ranker"], distinct_after=8)
    joblib.dump(blob, tmp_path / "tail.joblib")
    loaded = TrainedModel.load(tmp_path / "tail.joblib").ranker
    assert [m.distinct_after for m in [loaded, *loaded.experts_.values()]] == [8] * (1 + len(loaded.experts_))
    for m in [blob["ranker"], *blob["ranker"].experts_.values()]:
        del m.__dict__["distinct_after"]
    joblib.dump(blob, tmp_path / "old.joblib")
    loaded = TrainedModel.load(tmp_path / "old.joblib").ranker
    assert [m.distinct_after for m in [loaded, *loaded.experts_.values()]] == [0] * (1 + len(loaded.experts_))


def test_dataset_of_another_kernel_source_is_refused_unless_allowed(mini_dataset, tmp_path, monkeypatch, capsys):
    from autoheur.collect import schema
    from autoheur.models.data import load_dataset

    monkeypatch.setattr(schema, "kernel_source_hash", lambda path=None: "0000000000000000")
    with pytest.raises(ValueError, match="another kernel. Re-collect it .*--allow-stale-kernel"):
        load_dataset(mini_dataset)
    rows, device, _ = load_dataset(mini_dataset, allow_stale_kernel=True)
    assert rows["problem_id"].nunique() == 12 and device["name"] == "NVIDIA H100 80GB HBM3"
    out = tmp_path / "m.joblib"
    assert main(["train", "--data", str(mini_dataset), "--heldout-folds", "0", "--out", str(out)]) == 2
    assert "--allow-stale-kernel" in capsys.readouterr().err and not out.exists()
    assert main(["eval", "--data", str(mini_dataset), "--models", "fixed_list", "--splits", "group_kfold"]) == 2
    assert "another kernel" in capsys.readouterr().err


def test_eval_refuses_a_negative_fold_seed_before_loading(tmp_path, capsys):
    missing = tmp_path / "no-such-dataset"  # never read: the seed is refused first
    assert main(["eval", "--data", str(missing), "--splits", "group_kfold", "--fold-seed", "-1"]) == 2
    assert "--fold-seed -1: expected 0 to 2**32 - 1" in capsys.readouterr().err


def test_corrupt_or_missing_model_is_refused(trained, tmp_path):
    _, path = trained
    bad = tmp_path / "cut.joblib"
    bad.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match="not a readable autoheur model"):
        TrainedModel.load(bad)
    with pytest.raises(FileNotFoundError, match="autoheur train"):
        TrainedModel.load(tmp_path / "none.joblib")


def test_no_model_for_the_device_falls_back_to_the_fixed_list(trained, tmp_path, capsys):
    model, path = trained
    shutil.copy(path, tmp_path / path.name)
    shutil.copy(path.with_suffix(".json"), tmp_path / path.with_suffix(".json").name)
    found, how = artifact.model_for_device("NVIDIA B200", tmp_path)
    assert found is None and "best fixed list" in how
    assert artifact.fallback_list(tmp_path) == model.fixed_list
    found, _ = artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path)
    assert found is not None


def test_of_several_models_of_a_gpu_the_one_named_for_it_is_taken_and_all_are_named(trained, tmp_path):
    """A model trained on another dataset of the GPU (`train --data data/fresh-...` writes models/fresh-....joblib)
    used to stand in for the GPU's own whenever its name sorted first, unsaid."""
    _, path = trained

    def put(stem):
        shutil.copy(path, tmp_path / f"{stem}.joblib")
        shutil.copy(path.with_suffix(".json"), tmp_path / f"{stem}.json")

    put("aa-trial")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one model of the GPU: no warning
        assert "model aa-trial.joblib" in artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path)[1]
    put("zz-trial")
    with pytest.warns(UserWarning, match=r"holds 2 models of the 'triton' family .*\(aa-trial.joblib, "
                                         r"zz-trial.joblib\): using aa-trial"
                                         r".joblib, the first by name\. To use another, name it "
                                         r"nvidia-h100-80gb-hbm3\.joblib"):  # fmt: skip
        assert "model aa-trial.joblib" in artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path)[1]
    put("nvidia-h100-80gb-hbm3")
    with pytest.warns(UserWarning, match="holds 3 models .*: using nvidia-h100-80gb-hbm3.joblib, the one named for"):
        found, how = artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path)
    assert found is not None and "model nvidia-h100-80gb-hbm3.joblib" in how
    grid = tmp_path / "grid"  # an Inductor-grid model is named inductor-<device-slug>: that one, not a trial's
    grid.mkdir()
    for stem in ("aa-trial", "inductor-nvidia-h200"):
        for suffix in (".joblib", ".json"):
            shutil.copy(artifact.MODELS_DIR / f"inductor-nvidia-h200{suffix}", grid / f"{stem}{suffix}")
    with pytest.warns(UserWarning, match="'inductor' family .*: using inductor-nvidia-h200.joblib, the one named for"):
        assert "inductor-nvidia-h200.joblib" in artifact.model_for_device("NVIDIA H200", grid, family="inductor")[1]


def test_train_writes_where_lookups_look_and_says_when_another_model_is_taken(trained, tmp_path, monkeypatch, capsys):
    """`train`'s default --out was models/ under the working directory, which no lookup reads unless run from the
    checkout; now it is the first directory lookups search, and a model saved where another of its GPU is taken first
    (or outside the searched directories) gets a note saying so."""
    from autoheur import cli
    from autoheur.models import train as train_mod

    model, path = trained
    shipped, own = tmp_path / "shipped", tmp_path / "own"
    shipped.mkdir()
    monkeypatch.setattr(artifact, "MODELS_DIR", shipped)
    monkeypatch.delenv("AUTOHEUR_MODELS_DIR", raising=False)
    monkeypatch.setattr(train_mod, "train", lambda *a, **k: model)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--data", str(tmp_path / "data" / "h100-trial")]) == 0
    out = capsys.readouterr().out
    assert (shipped / "h100-trial.joblib").exists() and f"saved {shipped / 'h100-trial.joblib'}" in out
    assert "note:" not in out and "replaces" not in out  # the only model of its GPU there, a new file
    shutil.copy(path, shipped / "nvidia-h100-80gb-hbm3.joblib")
    shutil.copy(path.with_suffix(".json"), shipped / "nvidia-h100-80gb-hbm3.json")
    assert main(["train", "--data", str(tmp_path / "data" / "h100-trial")]) == 0
    out = capsys.readouterr().out
    assert f"note: lookups for 'NVIDIA H100 80GB HBM3' take {shipped / 'nvidia-h100-80gb-hbm3.joblib'}, not this" in out
    # the same --out again: said what it wrote over (it did so silently)
    assert f"; it replaces the model trained {model.meta['created_at']} on {model.meta['dataset']}" in out
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(own))  # a GPU's own models, searched first
    assert main(["train", "--data", str(tmp_path / "data" / "nvidia-h100-80gb-hbm3")]) == 0
    out = capsys.readouterr().out
    assert (own / "nvidia-h100-80gb-hbm3.joblib").exists() and "note:" not in out
    elsewhere = tmp_path / "elsewhere" / "m.joblib"
    note = cli._lookup_note(elsewhere, model.meta)
    assert note.startswith(f"lookups search {own} and {shipped}, not {elsewhere.parent}: use it with predict --model")
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(shipped))  # the shipped directory named twice: searched once
    assert artifact.model_dirs() == [shipped]


def test_a_gpu_without_a_model_borrows_the_nearest_of_its_architecture(trained, tmp_path, monkeypatch):
    """Given the GPU's properties, a GPU with no model of its own borrows one of its compute capability (said in the
    message); without them, of another architecture, or with AUTOHEUR_BORROW_MODEL=0: the fixed list."""
    from autoheur.device import H100_SXM

    model, path = trained
    shutil.copy(path, tmp_path / path.name)
    shutil.copy(path.with_suffix(".json"), tmp_path / path.with_suffix(".json").name)
    h800 = {**H100_SXM.to_dict(), "name": "NVIDIA H800"}
    found, how = artifact.model_for_device("NVIDIA H800", tmp_path, spec=h800)
    assert found is not None and found.device["name"] == model.device["name"]
    assert f"'NVIDIA H800'; borrowing {path.name}" in how and "sm_90" in how
    assert artifact.model_for_device("NVIDIA H800", tmp_path)[0] is None  # its architecture unknown
    b200 = {**h800, "name": "NVIDIA B200", "compute_capability": [10, 0]}
    found, how = artifact.model_for_device("NVIDIA B200", tmp_path, spec=b200)
    assert found is None and "best fixed list" in how
    assert "For this GPU's own: autoheur collect, then autoheur train" in how  # what to do, as when borrowing
    monkeypatch.setenv("AUTOHEUR_BORROW_MODEL", "off")
    assert artifact.model_for_device("NVIDIA H800", tmp_path, spec=h800)[0] is None
    monkeypatch.delenv("AUTOHEUR_BORROW_MODEL")
    (tmp_path / path.name).write_bytes(path.read_bytes()[:1000])  # the donor unusable: the fixed list, and why
    found, how = artifact.model_for_device("NVIDIA H800", tmp_path, spec=h800)
    assert found is None and f"{path.name}, is unusable" in how and "best fixed list" in how
    monkeypatch.setenv("AUTOHEUR_BORROW_MODEL", "maybe")
    with pytest.raises(ValueError, match="AUTOHEUR_BORROW_MODEL='maybe'"):
        artifact.model_for_device("NVIDIA H800", tmp_path, spec=h800)


def test_nearest_model_goes_by_architecture_then_properties():
    from autoheur.device import H100_SXM, H200

    h100, h200 = H100_SXM.to_dict(), H200.to_dict()
    ampere = {**h100, "name": "NVIDIA A100", "compute_capability": [8, 0], "sm_count": 108}
    models = [(Path("a.joblib"), {"device": h200}), (Path("b.joblib"), {"device": h100}),
              (Path("c.joblib"), {"device": ampere}), (Path("d.joblib"), {})]  # fmt: skip
    pick = lambda spec: (artifact.nearest_model(models, spec) or (None,))[0]  # noqa: E731
    assert pick({**h100, "name": "NVIDIA H800"}) == Path("b.joblib")
    assert pick({**h200, "name": "NVIDIA H200 NVL"}) == Path("a.joblib")
    assert pick({**h100, "sm_count": 114, "l2_bytes": 50 << 20}) == Path("b.joblib")  # an H100 PCIe
    assert pick({**h100, "compute_capability": [8, 0]}) == Path("c.joblib")  # an A100-class GPU: the A100's only
    assert pick({**h100, "compute_capability": [10, 0]}) is None
    # a side-car that describes its GPU in part is passed over, not taken for the nearest
    partial = [(Path("e.joblib"), {"device": {**h200, "sm_count": "132"}}), (Path("f.joblib"), {"device": h100}),
               (Path("g.joblib"), {"device": {**h200, "compute_capability": 9.0}})]  # fmt: skip
    assert artifact.nearest_model(partial, {**h200, "name": "NVIDIA H200 NVL"})[0] == Path("f.joblib")
    assert artifact.nearest_model(partial, {**h200, "compute_capability": "9.0"}) is None
    assert pick({**h100, "l2_bytes": (h100["l2_bytes"] * h200["l2_bytes"]) ** 0.5}) == Path("a.joblib")  # a tie: first


def test_models_of_another_kernel_family_are_kept_apart(trained, tmp_path):
    """An Inductor-grid model is never the run-time tuner's model, and it is checked against Inductor's grid."""
    from autoheur.inductor.choices import grid_hash

    model, _ = trained
    assert model.meta["family"] == "triton"
    ind = artifact.TrainedModel(model.ranker, {**model.meta, "family": "inductor", "space_hash": grid_hash()})
    ind.save(tmp_path / "inductor-h100.joblib")
    assert artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path)[0] is None  # the tuner's family: none here
    found, _ = artifact.model_for_device("NVIDIA H100 80GB HBM3", tmp_path, family="inductor")
    assert found is not None and found.meta["family"] == "inductor"
    blob = joblib.load(tmp_path / "inductor-h100.joblib")
    blob["meta"]["space_hash"] = model.meta["space_hash"]  # the kernel's space hash on an Inductor model: refused
    joblib.dump(blob, tmp_path / "bad.joblib")
    with pytest.raises(ValueError, match="config-space hash"):
        artifact.TrainedModel.load(tmp_path / "bad.joblib")


def test_a_problem_of_an_operand_layout_never_trained_on_is_extrapolation(trained, tmp_path):
    """Every feature of such a problem can lie inside its training range (the backward's dA, 2D x 3D with W
    N-contiguous, did beside 2D x 3D and 2D x 2D problems): the recorded kinds say it; a model from before they were
    recorded says only what its ranges say."""
    from autoheur.problem import Problem

    model, path = trained
    loaded = TrainedModel.load(path)
    kinds = loaded.meta["problem_kinds"]
    assert kinds == json.loads(path.with_suffix(".json").read_text())["problem_kinds"]
    assert ["2d3d", "bfloat16", "k", "k"] in kinds  # the mini dataset's first problems are 2D x 3D forwards
    seen = public_problems()[5]
    # A stored column-major: no dataset has it (the slice's first problems may include the backward's dA)
    unseen = Problem("2d3d", seen.groups, seen.sizes, 0, seen.n, seen.k, a_major="m", name="A-column-major")
    assert ["2d3d", "bfloat16", "m", "k"] not in kinds
    assert not any("operand layout" in s for s in loaded.extrapolation(seen))
    said = loaded.extrapolation(unseen)
    assert "2d3d bfloat16 with A m-major and B k-major (never trained on this operand layout)" in said
    older = TrainedModel(loaded.ranker, {k: v for k, v in loaded.meta.items() if k != "problem_kinds"})
    assert not any("operand layout" in s for s in older.extrapolation(unseen))


def test_predict_cli(trained, capsys):
    _, path = trained
    rc = main(["predict", "--groups", "8", "--total", "512", "--routing", "zipf", "--n", "1024", "--k", "2048",
               "--model", str(path), "--json", "--top", "5"])  # fmt: skip
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["top"]) == 5 and all(isinstance(t["score"], float) for t in out["top"])
    assert out["scorer"].startswith(("compiled", "not compiled", "off"))  # forest.status(): how small batches score
    assert main(["predict", "--groups", "8", "--n", "1024", "--k", "2048", "--model", str(path)]) == 2
    assert "sizes, or total and routing" in capsys.readouterr().err
    assert main(["predict", "--public", "no-such-problem", "--model", str(path)]) == 2


def test_shipped_models_load_and_predict():
    """The models in models/ match the installed code (else CI says: retrain)."""
    paths = artifact.shipped_models()
    assert paths, "no shipped model in models/"
    for path in paths:
        m = TrainedModel.load(path)
        assert len(m.top_k(public_problems()[0], 10)) == 10


def test_the_shipped_h100_models_borrowed_problems_are_pinned():
    """The shipped H100 model's borrowed problems are listed beside it (README: its command's --aux-problems): as many
    as its metadata says it trained on, each in the shipped H200 data and none in the H100's (the H200 problems the
    H100 data lacked when it was fitted), so its command refits it on the same problems however the H200 data grows."""
    from autoheur.collect.store import read_problem_ids

    listed = read_problem_ids(artifact.MODELS_DIR / "nvidia-h100-80gb-hbm3.aux-problems.txt")
    meta = json.loads((artifact.MODELS_DIR / "nvidia-h100-80gb-hbm3.json").read_text())
    (aux,) = meta["auxiliary"]
    assert aux["device"] == "NVIDIA H200" and aux["new_only"] and aux["problems"] == len(listed)
    assert listed <= read_problem_ids(artifact.MODELS_DIR.parent / "data" / "nvidia-h200")
    assert not listed & read_problem_ids(H100)
    # the README's command for it, read by the CLI's own parser, fits what the metadata records
    from autoheur.cli import build_parser
    from autoheur.models.rankers import parse_pairs, parse_rounds

    readme = (artifact.MODELS_DIR.parent / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if ln.startswith(f"autoheur train --data data/{H100.name} --aux")]
    args = build_parser().parse_args(line.split()[1:])
    assert args.aux == [aux["dataset"]] and args.aux_new_only and args.aux_share == aux["share"]
    assert args.aux_problems == "models/nvidia-h100-80gb-hbm3.aux-problems.txt"
    assert parse_rounds(args.rounds) == (meta["params"]["n_estimators"], meta["params"]["learning_rate"])
    assert parse_pairs(args.pairs) == (meta["params"]["pair_method"], meta["params"]["pairs"])


def test_train_applies_the_family_defaults(tmp_path):
    """The Inductor family keeps the single inner-CV-selected objective and the 6 metric grades as training labels
    (rankers.FAMILY_PARAMS) and no re-ranker; autoheur's own kernel family gets the ensemble, the 9 grades and the
    re-ranker."""
    from autoheur.models.metrics import RELEVANCE_THRESHOLDS
    from autoheur.models.rankers import ENSEMBLE, OBJECTIVES

    inductor = artifact.MODELS_DIR.parent / "data" / "inductor-nvidia-h100-80gb-hbm3"
    small = {"n_estimators": 8, "max_depth": 3, "n_jobs": 1}
    model = train(inductor, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small)
    assert model.meta["objective"] in OBJECTIVES and set(model.meta["objective_selection"]) == set(OBJECTIVES)
    assert model.meta["family"] == "inductor"
    assert tuple(model.ranker.relevance) == RELEVANCE_THRESHOLDS  # the 6 grades its shipped model was trained on
    assert model.ranker.rerank_top == 0  # nor a near-best re-ranker, in any expert
    assert all(e.reranker_ is None for e in model.ranker.experts_.values())
    # the 2D x 2D expert (a weight gradient's) and the rest; a dataset of the forward alone fits the rest alone
    assert model.ranker.experts == ("layout_2d2d",) and set(model.ranker.experts_) == {1}
    assert model.meta["expert_fits"] == {"rest": {"problems": 145, "objective": model.meta["objective"],
                                                  "hedge": model.meta["hedge"]}}  # fmt: skip
    forced = train(inductor, "xgb_ranker", heldout_folds=0, log=lambda s: None, params={**small, "objective": ENSEMBLE})
    assert forced.meta["objective"] == ENSEMBLE  # explicit parameters still win


def test_the_triton_family_trains_the_ensemble(trained):
    model, _ = trained
    assert model.meta["objective"] == "ensemble" and model.ranker.experts == ("layout_2d2d",)
    for expert in model.ranker.experts_.values():  # one per layout kind the training data has
        assert len(expert.members_) == 1 and tuple(expert.relevance) == TRAIN_RELEVANCE  # the lead alone
        assert expert.rerank_top == 48 and expert.reranker_ is not None


def test_train_cli_says_the_default_auxiliary_rows(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert f"default {AUX_ROWS}: models.data.AUX_ROWS" in " ".join(capsys.readouterr().out.split())


def test_eval_loads_a_dataset_only_trained_on_thinned(mini_dataset, tmp_path, monkeypatch, capsys, mini_of):
    """`autoheur eval --aux-for h200 --splits h200:...`: the H100 set is only auxiliary training data there, and loads
    thinned as `autoheur train --aux` loads it (the whole H100 set beside the H200's is more than a 24 GB host holds);
    a model that reads every row of a problem is refused before anything loads; a set with a split of its own loads
    whole."""
    from pathlib import Path

    from autoheur.models import eval_datasets as eval_job

    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    real, loads = eval_job.load_ranking_set, {}

    def spy(path, allow_stale_kernel=False, thin=None):
        loads[Path(path).name] = thin
        return real(path, allow_stale_kernel, thin=thin)

    monkeypatch.setattr(eval_job, "load_ranking_set", spy)
    args = ["eval", "--data", str(mini_dataset), "--data", str(h200), "--aux-for", "h200"]
    assert main([*args, "--splits", "h200:group_kfold", "--models", "fixed_list"]) == 2
    assert "--aux-rows 0" in capsys.readouterr().err and not loads
    assert main([*args, "--splits", "h200:group_kfold", "--models", "xgb_ranker", "--aux-rows", "256"]) == 0
    assert loads == {"h100-mini": 256, "h200-mini": None}
    loads.clear()
    assert main([*args, "--splits", "h200:group_kfold,h100->h200", "--models", "fixed_list"]) == 0
    assert loads == {"h100-mini": None, "h200-mini": None}  # the H100 set is a cross-device split's training set


def test_eval_of_cross_device_splits_alone_holds_one_dataset_and_reports_the_same_figures(
    mini_dataset, tmp_path, monkeypatch, mini_of
):
    """`autoheur eval` whose splits are all cross-device loads one dataset at a time (two datasets both ways: three
    loads, where both full shipped sets passed 24 GB), with the figures the all-loaded path gives; its report names the
    dataset of its tuning cost and importances, the latter from the split's own fit."""
    from pathlib import Path

    import pandas as pd

    from autoheur.models import eval_datasets as eval_job

    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    real, loads = eval_job.load_ranking_set, []

    def spy(path, allow_stale_kernel=False, thin=None):
        loads.append(Path(path).name)
        return real(path, allow_stale_kernel, thin=thin)

    monkeypatch.setattr(eval_job, "load_ranking_set", spy)
    data, models = [str(mini_dataset), str(h200)], ["fixed_list", "nearest"]
    lean = eval_job.eval_datasets(data, [*models, "xgb_ranker"], ["cross_device"], rounds="10x0.3")
    assert loads == ["h100-mini", "h200-mini", "h100-mini"]
    assert lean.basis.name == "h100" and lean.basis.importances is not None
    assert all(isinstance(s, eval_job.LetGo) for s in lean.sets.values()) and list(lean.sets) == ["h100", "h200"]
    loads.clear()
    full = eval_job.eval_datasets(data, models, ["cross_device", "h100:group_kfold"])
    assert loads == ["h100-mini", "h200-mini"]  # a within-device split: every dataset loaded at once, as before
    cross = full.per_problem[full.per_problem["split"].str.contains("->")].reset_index(drop=True)
    cross = cross.astype({"fit_saw_problem": bool})  # object there: the within-device rows have no such value
    pd.testing.assert_frame_equal(lean.per_problem[lean.per_problem["model"] != "xgb_ranker"].reset_index(drop=True),
                                  cross)  # fmt: skip
    text = eval_job.write_eval_report(lean, tmp_path / "r", lean.per_problem["model"].unique(), data=data,
                                      command="c").read_text()  # fmt: skip
    assert "as its cross-device splits fitted it on every problem of h100" in text
    assert "Dataset: h100. " in text and "NVIDIA H200" in text and "h100 0, h200 0" in text


def test_eval_refuses_a_dataset_it_cannot_use_before_loading_any(mini_dataset, tmp_path, monkeypatch, capsys):
    """Each --data's space, kernel and problems are checked before the first dataset loads: a second dataset of no
    problems was found only after the first one's minutes of loading (and, one at a time, of fitting)."""
    from autoheur.models import eval_datasets as eval_job

    empty = tmp_path / "h200-empty"
    empty.mkdir()
    shutil.copy(artifact.MODELS_DIR.parent / "data" / "fresh-nvidia-h200" / MANIFEST, empty / MANIFEST)
    loads = []
    monkeypatch.setattr(eval_job, "load_ranking_set", lambda *a, **k: loads.append(a))
    for splits in ("cross_device", "h100:group_kfold,h100->h200"):
        assert main(["eval", "--data", str(mini_dataset), "--data", str(empty), "--splits", splits]) == 2
        assert "holds no problems yet" in capsys.readouterr().err and not loads


def test_eval_warns_of_a_config_subset_trial_once(mini_dataset, tmp_path):
    """The check of every --data before the first load warned of a config-subset trial, and its load again: the same
    warning twice, from two places."""
    import warnings

    import pyarrow.parquet as pq

    from autoheur.models import eval_datasets as eval_job

    trial = shutil.copytree(mini_dataset, tmp_path / "h100-trial")  # as if timed over a subset: manifest and parts
    record = json.loads((trial / MANIFEST).read_text())
    record["metadata"]["configs"] = "sample:3:seed0"
    (trial / MANIFEST).write_text(json.dumps(record))
    for part in trial.glob("part-*.parquet"):
        table = pq.read_table(part)
        meta = {**json.loads(table.schema.metadata[b"autoheur"]), "configs": "sample:3:seed0"}
        pq.write_table(table.replace_schema_metadata({b"autoheur": json.dumps(meta)}), part)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # as a user sees them: once a place
        eval_job.eval_datasets([trial], ["fixed_list"], ["h100:group_kfold"])
    assert sum("a trial over a config subset (sample:3:seed0)" in str(w.message) for w in seen) == 1


def test_train_with_auxiliary_data_of_another_device(mini_dataset, tmp_path, mini_of):
    """--aux: another device's problems train too (as queries of their own) and the metadata says so; the held-out
    figures and the fallback list stay the device's own. The same device, or another kernel family, is refused."""
    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    small = {"n_estimators": 20, "max_depth": 3, "n_jobs": 1}
    model = train(mini_dataset, "xgb_ranker", heldout_folds=2, log=lambda s: None, params=small, aux=[h200])
    (aux,) = model.meta["auxiliary"]
    assert aux["device"] == "NVIDIA H200" and aux["problems"] == 8 and aux["dataset"] == str(h200)
    assert aux["rows_per_problem"] == AUX_ROWS and aux["rows"] == 8 * AUX_ROWS  # thinned as it loaded
    assert model.meta["own_problems"] == 12 and model.meta["train_problems"] == 20
    assert model.meta["device"]["name"] == DatasetStore.load(mini_dataset).meta.device["name"]
    assert all(row["n_problems"] <= 12 for row in model.meta["heldout"])  # scored on its own problems only
    assert len(model.top_k(public_problems()[0], 10)) == 10
    with pytest.raises(ValueError, match="merge"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[mini_dataset])
    # thinned to fewer rows than the fit samples, or fewer than 4: refused before anything loads
    with pytest.raises(ValueError, match=r"keeps 64 a problem .*--aux-rows 0"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200], aux_rows=64)
    with pytest.raises(ValueError, match="at least 4"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200], aux_rows=2)
    inductor = artifact.MODELS_DIR.parent / "data" / "inductor-nvidia-h100-80gb-hbm3"
    with pytest.raises(ValueError, match="same family and space"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[inductor])


def test_train_with_only_the_auxiliary_problems_the_dataset_lacks(mini_dataset, tmp_path, mini_of):
    """--aux-new-only: another device's copies of the dataset's own problems are left out of the auxiliary data, its
    other problems kept; the metadata says so. Without --aux it is refused before any data loads."""
    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    own, theirs = set(DatasetStore.load(mini_dataset).parts()), set(DatasetStore.load(h200).parts())
    assert 0 < len(own & theirs) < len(theirs)  # some shared problems, some new: the case to tell apart
    small = {"n_estimators": 20, "max_depth": 3, "n_jobs": 1}
    model = train(mini_dataset, "xgb_ranker", heldout_folds=2, log=lambda s: None, params=small, aux=[h200],
                  aux_new_only=True)  # fmt: skip
    (aux,) = model.meta["auxiliary"]
    assert aux["new_only"] and aux["problems"] == len(theirs - own)
    assert model.meta["train_problems"] == 12 + len(theirs - own)
    with pytest.raises(ValueError, match="no auxiliary dataset"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux_new_only=True)
    assert main(["train", "--data", str(mini_dataset), "--aux-new-only", "--out", str(tmp_path / "m.joblib")]) == 2


def test_train_keeps_only_the_listed_auxiliary_problems(mini_dataset, tmp_path, monkeypatch, mini_of):
    """--aux-problems FILE: the auxiliary data keeps the problems the file lists (with --aux-new-only, those the
    dataset also lacks), and the metadata names the file; a listed id the auxiliary data lacks is refused, and so are
    a bad file and a list without --aux, before any data loads."""
    from autoheur.models import data
    from autoheur.models import train as train_module

    # 12: at stop 74 the H200's first 8 (in the store's order) held only one problem the H100's 12 lack
    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=12)
    own, theirs = set(DatasetStore.load(mini_dataset).parts()), set(DatasetStore.load(h200).parts())
    new, shared = sorted(theirs - own), sorted(theirs & own)
    assert len(new) >= 2 and shared
    listed = {new[0], new[1], shared[0]}
    ids = tmp_path / "aux-ids.txt"
    ids.write_text("# borrowed\n" + "\n".join(sorted(listed)) + "\n")
    small = {"n_estimators": 20, "max_depth": 3, "n_jobs": 1}
    model = train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200],
                  aux_problems=ids)  # fmt: skip
    (aux,) = model.meta["auxiliary"]
    assert aux["problems"] == 3 and aux["problems_file"] == str(ids)
    assert model.meta["train_problems"] == 12 + 3
    model = train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200],
                  aux_problems=ids, aux_new_only=True)  # fmt: skip
    assert model.meta["auxiliary"][0]["problems"] == 2  # the listed ones the dataset lacks
    unknown = "0123456789abcdef"
    assert unknown not in theirs
    ids.write_text(f"{new[0]}\n{unknown}\n")
    with pytest.raises(ValueError, match=f"lists 1 problems the auxiliary data lacks \\(e.g. {unknown}\\)"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200],
              aux_problems=ids)  # fmt: skip
    loads = []
    monkeypatch.setattr(train_module, "load_ranking_set", lambda *a, **k: loads.append(a))
    monkeypatch.setattr(data, "load_ranking_set", lambda *a, **k: loads.append(a))
    ids.write_text("not an id\n")
    with pytest.raises(ValueError, match="is not a problem id"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200],
              aux_problems=ids)  # fmt: skip
    with pytest.raises(ValueError, match="no auxiliary dataset"):
        train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux_problems=ids)
    out = tmp_path / "m.joblib"
    assert main(["train", "--data", str(mini_dataset), "--aux", str(h200), "--aux-problems", str(tmp_path / "none"),
                 "--out", str(out)]) == 2  # fmt: skip
    assert not loads and not out.exists()


def test_train_aux_share_samples_fewer_rows_of_an_auxiliary_problem(mini_dataset, tmp_path, monkeypatch, mini_of):
    """--aux-share S: each auxiliary problem gives the fit S of the rows an own problem gives (the ranker's
    aux_share), and the metadata says so; a share out of (0, 1], one without auxiliary data and one for a model that
    samples no rows are refused before any data loads."""
    from autoheur.models import data, rankers
    from autoheur.models import train as train_module

    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    small = {"n_estimators": 20, "max_depth": 3, "n_jobs": 1}
    real, sampled = rankers.sample_rows, []

    def spy(*args, **kwargs):
        sampled.append(real(*args, **kwargs))
        return sampled[-1]

    monkeypatch.setattr(rankers, "sample_rows", spy)
    model = train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, aux=[h200],
                  aux_share=0.5)  # fmt: skip
    assert model.meta["params"]["aux_share"] == 0.5 and model.meta["auxiliary"][0]["share"] == 0.5
    per = model.ranker.per_problem
    counts = {}
    for sub in sampled:  # one sample per layout expert, each of its own problems
        counts.update(sub.frame["problem_id"].astype(str).value_counts().to_dict())
    aux = {pid: n for pid, n in counts.items() if pid.startswith(data.AUX_PREFIX)}
    own = {pid: n for pid, n in counts.items() if not pid.startswith(data.AUX_PREFIX)}
    assert len(aux) == 8 and len(own) == 12
    assert set(aux.values()) == {per // 2} and set(own.values()) == {per}
    assert len(model.top_k(public_problems()[0], 10)) == 10

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(train_module, "load_ranking_set", no_load)
    kw = {"heldout_folds": 0, "log": lambda s: None, "params": small}
    with pytest.raises(ValueError, match="no auxiliary data"):
        train(mini_dataset, "xgb_ranker", aux_share=0.5, **kw)
    for bad in (0, 1.5, -0.5):
        with pytest.raises(ValueError, match=r"share in \(0, 1\]"):
            train(mini_dataset, "xgb_ranker", aux=[h200], aux_share=bad, **kw)
    with pytest.raises(ValueError, match="does not sample auxiliary rows"):
        train(mini_dataset, "fixed_list", aux=[h200], aux_share=0.5, heldout_folds=0, log=lambda s: None)
    out = str(tmp_path / "m.joblib")
    assert main(["train", "--data", str(mini_dataset), "--aux-share", "0.5", "--out", out]) == 2


def test_eval_aux_share_reaches_the_ranker_and_is_checked_first(mini_dataset, tmp_path, monkeypatch, capsys, mini_of):
    """`autoheur eval --aux-share S` gives xgb_ranker that share for the auxiliary problems of its splits; without
    --aux-for, or without xgb_ranker among the models, it is refused before anything loads."""
    from autoheur.models import eval_datasets as eval_job

    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    got = []

    def spy(sets, models, splits, params=None, **kw):
        got.append((models, params))
        raise ValueError("stopped by the test")

    monkeypatch.setattr(eval_job, "cross_validate", spy)
    args = ["eval", "--data", str(mini_dataset), "--data", str(h200), "--splits", "h100:group_kfold", "--aux-rows", "0"]
    assert main([*args, "--models", "xgb_ranker,fixed_list", "--aux-for", "h100", "--aux-share", "0.5"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
    ((models, params),) = got
    assert params["xgb_ranker"]["aux_share"] == 0.5 and "aux_share" not in params.get("fixed_list", {})
    loads = []
    monkeypatch.setattr(eval_job, "load_ranking_set", lambda *a, **k: loads.append(a))
    assert main([*args, "--models", "xgb_ranker", "--aux-share", "0.5"]) == 2
    assert "--aux-for" in capsys.readouterr().err
    assert main([*args, "--models", "fixed_list", "--aux-for", "h100", "--aux-share", "0.5"]) == 2
    assert "--models" in capsys.readouterr().err
    assert main([*args, "--models", "xgb_ranker", "--aux-for", "h100", "--aux-share", "2"]) == 2
    assert "(0, 1]" in capsys.readouterr().err and not loads


def test_train_rounds_set_the_boosting_budget_and_are_checked_first(mini_dataset, tmp_path, monkeypatch):
    """--rounds TREESxSTEP: the ranker's n_estimators and learning_rate (over the family's and the given params),
    recorded in the model's metadata; a malformed budget, or one for a model that is not boosted, is refused
    before any data loads."""
    from autoheur.models import train as train_module

    small = {"n_estimators": 20, "max_depth": 3, "n_jobs": 1, "rerank_top": 0}
    model = train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, rounds="7x0.3")
    assert (model.meta["params"]["n_estimators"], model.meta["params"]["learning_rate"]) == (7, 0.3)
    assert {e.n_estimators for e in model.ranker.experts_.values()} == {7}
    booster = model.ranker.experts_[model.ranker.fallback_].boosters()[0]
    assert booster.num_boosted_rounds() == 7

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(train_module, "load_ranking_set", no_load)
    kw = {"heldout_folds": 0, "log": lambda s: None, "params": small}
    step = r"learning rate in \(0, 1\]"
    for bad, match in (("450", "TREESxSTEP"), ("x0.1", "TREESxSTEP"), ("0x0.1", "positive count"),
                       ("450x0", step), ((450, 2.0), step)):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            train(mini_dataset, "xgb_ranker", rounds=bad, **kw)
    with pytest.raises(ValueError, match="no boosted model"):
        train(mini_dataset, "fixed_list", rounds="450x0.1", heldout_folds=0, log=lambda s: None)
    out = str(tmp_path / "m.joblib")
    assert main(["train", "--data", str(mini_dataset), "--rounds", "450", "--out", out]) == 2


def _params_spy(monkeypatch):
    """(the eval job's module, the list each cross_validate call's params go to): the call then stops the run."""
    from autoheur.models import eval_datasets as eval_job

    got = []

    def spy(sets, models, splits, params=None, **kw):
        got.append(params)
        raise ValueError("stopped by the test")

    monkeypatch.setattr(eval_job, "cross_validate", spy)
    return eval_job, got


def test_eval_rounds_reach_every_boosted_model_and_are_checked_first(mini_dataset, monkeypatch, capsys):
    """`autoheur eval --rounds TREESxSTEP` gives xgb_ranker and xgb_regressor that budget and no other model;
    refused before anything loads when malformed or when no named model is boosted."""
    eval_job, got = _params_spy(monkeypatch)
    args = ["eval", "--data", str(mini_dataset), "--splits", "group_kfold"]
    assert main([*args, "--models", "xgb_ranker,xgb_regressor,fixed_list", "--rounds", "350x0.13"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
    (params,) = got
    for name in ("xgb_ranker", "xgb_regressor"):
        assert (params[name]["n_estimators"], params[name]["learning_rate"]) == (350, 0.13)
    assert "n_estimators" not in params.get("fixed_list", {})
    loads = []
    monkeypatch.setattr(eval_job, "load_ranking_set", lambda *a, **k: loads.append(a))
    assert main([*args, "--models", "fixed_list,nearest", "--rounds", "350x0.13"]) == 2
    assert "no boosted model" in capsys.readouterr().err
    assert main([*args, "--models", "xgb_ranker", "--rounds", "350"]) == 2
    assert "TREESxSTEP" in capsys.readouterr().err and not loads


def test_train_pairs_set_the_pair_construction_and_are_checked_first(mini_dataset, tmp_path, monkeypatch):
    """--pairs METHOD:COUNT: the ranker's pair_method and pairs (every LambdaMART fit's lambdarank_pair_method),
    recorded in the model's metadata; a malformed spec, or one for a model that is not fitted on pairs, is refused
    before any data loads."""
    from autoheur.models import train as train_module

    small = {"n_estimators": 5, "max_depth": 3, "n_jobs": 1, "rerank_top": 0}
    model = train(mini_dataset, "xgb_ranker", heldout_folds=0, log=lambda s: None, params=small, pairs="topk:5")
    assert (model.meta["params"]["pair_method"], model.meta["params"]["pairs"]) == ("topk", 5)
    booster = model.ranker.experts_[model.ranker.fallback_].boosters()[0]
    obj = json.loads(booster.save_config())["learner"]["objective"]["lambdarank_param"]
    assert (obj["lambdarank_pair_method"], obj["lambdarank_num_pair_per_sample"]) == ("topk", "5")

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(train_module, "load_ranking_set", no_load)
    kw = {"heldout_folds": 0, "log": lambda s: None, "params": small}
    for bad in ("topk", "topk:", "topk:0", "random:8", "topk:x", ":16"):
        with pytest.raises(ValueError, match="METHOD:COUNT"):
            train(mini_dataset, "xgb_ranker", pairs=bad, **kw)
    with pytest.raises(ValueError, match="no model fitted on pairs"):
        train(mini_dataset, "xgb_regressor", pairs="topk:16", **kw)
    out = str(tmp_path / "m.joblib")
    assert main(["train", "--data", str(mini_dataset), "--pairs", "topk", "--out", out]) == 2


def test_eval_pairs_reach_the_ranker_alone_and_are_checked_first(mini_dataset, monkeypatch, capsys):
    """`autoheur eval --pairs METHOD:COUNT` gives xgb_ranker that pair construction and no other model; refused
    before anything loads when malformed or when xgb_ranker is not named."""
    eval_job, got = _params_spy(monkeypatch)
    args = ["eval", "--data", str(mini_dataset), "--splits", "group_kfold"]
    assert main([*args, "--models", "xgb_ranker,xgb_regressor", "--pairs", "topk:16", "--rounds", "9x0.3"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
    (params,) = got
    assert params["xgb_ranker"]["pair_method"] == "topk" and params["xgb_ranker"]["pairs"] == 16
    assert params["xgb_ranker"]["n_estimators"] == 9  # beside --rounds, not instead of it
    assert "pair_method" not in params.get("xgb_regressor", {})
    loads = []
    monkeypatch.setattr(eval_job, "load_ranking_set", lambda *a, **k: loads.append(a))
    assert main([*args, "--models", "xgb_regressor,fixed_list", "--pairs", "topk:16"]) == 2
    assert "no model fitted on pairs" in capsys.readouterr().err
    assert main([*args, "--models", "xgb_ranker", "--pairs", "16"]) == 2
    assert "METHOD:COUNT" in capsys.readouterr().err and not loads


def test_eval_aux_new_only_trains_on_the_problems_the_dataset_lacks(
    mini_dataset, tmp_path, monkeypatch, capsys, mini_of
):
    """`autoheur eval --aux-for h100 --aux-new-only`: each within-device split of the H100 set trains on the H200's
    problems the H100 set lacks, never on the H200's copies of its own; `--aux-problems FILE`: on the listed ones
    only (with --aux-new-only, those the H100 set lacks); either without --aux-for is refused before anything
    loads."""
    from autoheur.models import eval_datasets as eval_job
    from autoheur.models import evaluate

    h200 = mini_of(artifact.MODELS_DIR.parent / "data" / "nvidia-h200", tmp_path / "h200-mini", count=8)
    own, theirs = set(DatasetStore.load(mini_dataset).parts()), set(DatasetStore.load(h200).parts())
    assert 0 < len(own & theirs) < len(theirs)
    real, seen = evaluate.run_split, []

    def spy(split, folds, rs_train, rs_test, models, log=print, params=None, aux=(), **kw):
        pool = kw.get("pool")  # a within-device split gets its dataset's pool: the borrowed ids are its own to read
        borrowed = [set(pool.raw_ids.iloc[pool.n_own :].astype(str))] if pool is not None and pool.aux else []
        seen.append((split, [set(a.problems) for a in aux] + borrowed))
        return real(split, folds, rs_train, rs_test, models, log, params, aux, **kw)

    monkeypatch.setattr(evaluate, "run_split", spy)
    args = ["eval", "--data", str(mini_dataset), "--data", str(h200), "--models", "fixed_list", "--aux-rows", "0"]
    assert main([*args, "--aux-for", "h100", "--aux-new-only", "--splits", "h100:group_kfold,h100:lomo"]) == 0
    assert [s for s, _ in seen] == ["h100:group_kfold", "h100:lomo"]
    assert all(aux == [theirs - own] for _, aux in seen)
    seen.clear()
    assert main([*args, "--aux-for", "h100", "--splits", "h100:group_kfold"]) == 0
    assert seen[0][1] == [theirs]  # without the flag: all of them
    listed = set(sorted(theirs - own)[:2]) | set(sorted(theirs & own)[:1])
    ids = tmp_path / "aux-ids.txt"
    ids.write_text("\n".join(sorted(listed)) + "\n")
    seen.clear()
    assert main([*args, "--aux-for", "h100", "--aux-problems", str(ids), "--splits", "h100:group_kfold"]) == 0
    assert seen == [("h100:group_kfold", [listed])]
    seen.clear()
    assert main([*args, "--aux-for", "h100", "--aux-problems", str(ids), "--aux-new-only", "--splits",
                 "h100:lomo"]) == 0  # fmt: skip
    assert seen == [("h100:lomo", [listed - own])]
    loads = []
    monkeypatch.setattr(eval_job, "load_ranking_set", lambda *a, **k: loads.append(a))
    for flag in (["--aux-new-only"], ["--aux-problems", str(ids)]):
        assert main([*args, *flag, "--splits", "h100:group_kfold"]) == 2
        assert "--aux-for" in capsys.readouterr().err and not loads


def test_prepare_scoring_readies_the_candidates_and_their_features(trained, monkeypatch):
    """After prepare_scoring, a top_k of an element size the model was trained on builds no candidate tuple and no
    config-side features (what its first call paid, ~5-10 ms), and ranks as an unprepared model does; layouts with
    the same feasible set share one candidate tuple."""
    import autoheur.features.core as core

    model, path = trained
    fresh = TrainedModel.load(path)
    problems = [p for p in public_problems() if p.dtype == "bfloat16"]
    want = {p.name: [c.config_id for c, _ in fresh.top_k(p, 10)] for p in problems[:6]}
    prepared = TrainedModel.load(path)
    prepared.prepare_scoring()
    built = []
    real = core._config_block
    sets = dict(prepared._feasible_sets)
    assert len(sets) == 2  # bfloat16, TMA-aligned or not
    seen = lambda c, elem, dev, cache: built.append((id(c), elem, dev) in core._BLOCKS) or real(c, elem, dev, cache)
    monkeypatch.setattr(core, "_config_block", seen)
    for p in problems[:6]:
        assert [c.config_id for c, _ in prepared.top_k(p, 10)] == want[p.name]
    assert prepared._feasible_sets == sets
    assert built and all(built)  # every call found its block cached
    by_layout = {prepared.candidates(p, prepared.device) for p in problems if p.signature().tma_aligned}
    assert len(by_layout) == 1


def test_eval_names_each_inductor_dataset_by_its_device_and_refuses_two_of_one_name(tmp_path, capsys):
    """`autoheur eval` names a dataset by its directory's device: the two shipped Inductor datasets are
    'inductor-h100' and 'inductor-h200' (both were 'inductor' before stop 75, and their cross-device split found
    nothing to run), and two datasets of one name are refused with a message, not merged into one."""
    from autoheur.models.eval_datasets import short_name

    data = Path(__file__).resolve().parents[2] / "data"
    h100, h200 = data / "inductor-nvidia-h100-80gb-hbm3", data / "inductor-nvidia-h200"
    assert [short_name(p) for p in (h100, h200)] == ["inductor-h100", "inductor-h200"]
    assert [short_name(p) for p in ("data/nvidia-h100-80gb-hbm3", "x/nvidia-h200", "retest-nvidia-h200")] == [
        "h100",
        "h200",
        "retest-h200",
    ]
    report = tmp_path / "report"
    args = ["eval", "--data", str(h100), "--data", str(h200), "--models", "fixed_list"]
    assert main([*args, "--splits", "inductor-h100->inductor-h200", "--report", str(report)]) == 0
    summary = (report / "summary.csv").read_text()
    assert "inductor-h100->inductor-h200" in summary and "inductor-h200->" not in summary
    twin = tmp_path / "b" / h100.name
    shutil.copytree(h100, twin)
    capsys.readouterr()
    assert main(["eval", "--data", str(h100), "--data", str(twin), "--models", "fixed_list"]) == 2
    assert "both go by the short name 'inductor-h100'" in capsys.readouterr().err


# -- model files and their side-cars -----------------------------------------------------------------------------------

INDUCTOR = ("inductor-nvidia-h100-80gb-hbm3", "inductor-nvidia-h200")  # the small shipped models (0.5-1 MB)


def _models_dir(tmp_path) -> Path:
    """A copy of the two shipped Inductor models and their side-cars."""
    where = tmp_path / "models"
    where.mkdir()
    for name in INDUCTOR:
        for suffix in (".joblib", ".json"):
            shutil.copy(artifact.MODELS_DIR / f"{name}{suffix}", where / f"{name}{suffix}")
    return where


def test_a_model_file_that_is_not_its_side_cars_is_refused(tmp_path):
    """Lookups go by the side-car: the H100 model saved as the H200's file, beside the H200 side-car, loaded as the
    H200's model. Now refused, naming both files."""
    where = _models_dir(tmp_path)
    shutil.copy(where / f"{INDUCTOR[0]}.joblib", where / f"{INDUCTOR[1]}.joblib")
    found, _ = artifact.model_for_device("NVIDIA H100 80GB HBM3", where, family="inductor")
    assert found is not None and found.device["name"] == "NVIDIA H100 80GB HBM3"
    want = rf"{INDUCTOR[1]}.joblib is not the model its side-car {INDUCTOR[1]}.json describes .*device is 'NVIDIA H100"
    with pytest.raises(ValueError, match=rf"{want}.*git checkout -- models/"):
        artifact.model_for_device("NVIDIA H200", where, family="inductor")


def test_an_unreadable_side_car_is_named_and_the_other_models_still_found(tmp_path):
    """A side-car cut short made every lookup fail with a bare JSONDecodeError; now it is left out with a warning
    naming it, the other models are found, and the fallback message of its own device names it."""
    where = _models_dir(tmp_path)
    side = where / f"{INDUCTOR[1]}.json"
    side.write_text(side.read_text()[:300])
    with pytest.warns(UserWarning, match=rf"{side} is unreadable \(JSONDecodeError.*git checkout -- models/"):
        found, _ = artifact.model_for_device("NVIDIA H100 80GB HBM3", where, family="inductor")
    assert found is not None and found.device["name"] == "NVIDIA H100 80GB HBM3"
    with pytest.warns(UserWarning, match="is unreadable"):
        found, how = artifact.model_for_device("NVIDIA H200", where, family="inductor")
    assert found is None and f"unreadable side-cars left out: {side}" in how and "best fixed list" in how


def test_save_replaces_the_side_car_whole_or_not_at_all(tmp_path, monkeypatch):
    """A save that dies writing the side-car (a kill, a full disk) left it half-written, which broke every lookup;
    now the model file and its side-car stay the earlier pair, and no temp file is left."""
    model = TrainedModel.load(artifact.MODELS_DIR / f"{INDUCTOR[1]}.joblib")
    path = model.save(tmp_path / "m.joblib")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(before) == {"m.joblib", "m.json"}
    real = Path.write_text

    def dies_half_way(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError("No space left on device")

    monkeypatch.setattr(Path, "write_text", dies_half_way)
    model.meta = {**model.meta, "created_at": "later"}
    with pytest.raises(OSError, match="No space left"):
        model.save(path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert TrainedModel.load(path).meta["created_at"] == json.loads(before["m.json"])["created_at"]


@pytest.mark.parametrize(
    "edit, want",
    [
        (lambda meta: meta.pop("device"), r"lacks \['device'\]"),
        (lambda meta: meta["device"].pop("sm_count"), r"lacks \['device.sm_count'\]"),
        (lambda meta: meta.pop("feature_names"), r"lacks \['feature_names'\]"),
        (lambda meta: meta["feature_names"].reverse(), "feature names that are not those its features hash"),
    ],
)
def test_a_model_whose_metadata_lacks_what_inference_reads_is_refused_on_load(tmp_path, edit, want):
    """Such a model loaded, then failed with a KeyError at its first prediction."""
    blob = joblib.load(artifact.MODELS_DIR / f"{INDUCTOR[1]}.joblib")
    edit(blob["meta"])
    joblib.dump(blob, tmp_path / "m.joblib")
    with pytest.raises(ValueError, match=rf"m.joblib.*{want}.*autoheur train"):
        TrainedModel.load(tmp_path / "m.joblib")


@pytest.mark.parametrize(
    "edit, want",
    [
        (lambda blob: blob.pop("ranker"), "holds no ranker"),
        (lambda blob: blob.update(ranker={}), "holds a dict, not a ranker"),
    ],
)
def test_a_model_file_without_a_ranker_is_refused_on_load(tmp_path, edit, want):
    """Such a file failed with a KeyError on load (no ranker), or loaded and failed at its first prediction."""
    blob = joblib.load(artifact.MODELS_DIR / f"{INDUCTOR[1]}.joblib")
    edit(blob)
    joblib.dump(blob, tmp_path / "m.joblib")
    with pytest.raises(ValueError, match=rf"m.joblib {want}.*autoheur train"):
        TrainedModel.load(tmp_path / "m.joblib")


def test_extrapolation_says_above_and_below_the_range():
    from autoheur.problem import Problem

    model = TrainedModel.load(artifact.MODELS_DIR / "inductor-nvidia-h200.joblib")
    said = {n: model.extrapolation(Problem("2d3d", 8, (512,) * 8, 0, n, 4096)) for n in (1 << 16, 16, 2048)}
    assert any(s.startswith("log2_call_n=") for s in said[1 << 16]) and any(
        s.startswith("log2_call_n=") for s in said[16]
    )
    assert not any(s.startswith("log2_call_n=") for s in said[2048])


def test_mixtral_gate_up_is_within_the_inductor_filters_margin_on_an_h200():
    """Stop 82's block benchmark: mixtral-8x7b's gate/up GEMM (8 experts, n 28,672, k 4,096, 1,024 rows) is just past
    the H200 Inductor model's range (log2_group_bytes_over_l2 1.91 against 1.90) and kept Inductor's whole list; the
    filter's margin (stop 83) narrows it."""
    from autoheur.inductor.filter import RANGE_MARGIN
    from autoheur.problem import Problem

    model = TrainedModel.load(artifact.MODELS_DIR / "inductor-nvidia-h200.joblib")
    gate_up = Problem("2d3d", 8, (128,) * 8, 0, 28672, 4096, dtype="bfloat16")
    assert model.extrapolation(gate_up, margin=RANGE_MARGIN) == []


def test_extrapolation_margin_is_a_share_of_the_span():
    """With a margin, a feature counts as outside only further out than that share of its training span; a feature
    of no span (one device's SM count) stays outside at any margin."""
    from autoheur.features.core import N_PROBLEM, problem_vector
    from autoheur.problem import Problem

    model = TrainedModel.load(artifact.MODELS_DIR / "inductor-nvidia-h200.joblib")
    lo, hi = model.meta["problem_ranges"]["log2_call_n"]
    n = 1 << 15  # log2 15 over the range's top (14.8)
    past = (15 - hi) / (hi - lo)
    outside = lambda margin: {s.split("=")[0] for s in model.extrapolation(  # noqa: E731
        Problem("2d3d", 8, (512,) * 8, 0, n, 4096), margin=margin)}  # fmt: skip
    assert "log2_call_n" in outside(0) and "log2_call_n" in outside(past * 0.9)
    assert "log2_call_n" not in outside(past * 1.1)
    other = dict(model.device, sm_count=model.device["sm_count"] + 2)
    inside = Problem("2d3d", 8, (512,) * 8, 0, 2048, 4096)
    assert problem_vector(inside, other)[N_PROBLEM - 2] != problem_vector(inside, model.device)[N_PROBLEM - 2]
    assert not model.extrapolation(inside)
    assert any(s.startswith("log2_sm_count=") for s in model.extrapolation(inside, other, margin=10.0))
    for bad in (-0.1, float("nan"), True):
        with pytest.raises(ValueError, match="margin="):
            model.extrapolation(inside, margin=bad)


def test_candidates_are_the_devices_own():
    """The candidate cache keys on the device: a GPU with less shared memory is never offered the H100's configs."""
    from autoheur.device import DeviceSpec
    from autoheur.kernels.config import infeasible_reason
    from autoheur.problem import Problem

    model = TrainedModel.load(artifact.MODELS_DIR / "nvidia-h100-80gb-hbm3.joblib")
    problem = Problem("2d3d", 8, (512,) * 8, 0, 2048, 4096)
    model.top_k(problem, 10)  # the H100's candidates, cached
    small = {**model.device, "name": "small", "smem_per_sm": 101376, "smem_per_block_optin": 101376}
    spec = DeviceSpec.from_dict({k: small[k] for k in DeviceSpec.__dataclass_fields__})
    got = model.candidates(problem, small)
    assert got and all(infeasible_reason(c, problem.signature(), spec) is None for c in got)


def test_a_borrowed_model_file_must_be_its_side_cars(tmp_path):
    """The donor's model file is checked against its side-car as an own model is: another file under its name is
    not borrowed."""
    from autoheur.device import H200

    where = tmp_path / "models"
    where.mkdir()
    shutil.copy(artifact.MODELS_DIR / "inductor-nvidia-h200.json", where / "inductor-nvidia-h200.json")
    shutil.copy(artifact.MODELS_DIR / "inductor-nvidia-h100-80gb-hbm3.joblib", where / "inductor-nvidia-h200.joblib")
    nvl = {**H200.to_dict(), "name": "NVIDIA H200 NVL"}
    found, how = artifact.model_for_device("NVIDIA H200 NVL", where, family="inductor", spec=nvl)
    assert found is None and "is unusable" in how and "describes" in how


def test_a_side_car_names_its_training_data_and_is_a_record(tmp_path):
    """A side-car whose training-data hash is not its model file's is refused; one that is JSON but not a record is
    left out with a warning, and the other models are still found."""
    where = tmp_path / "models"
    where.mkdir()
    for name in ("inductor-nvidia-h200", "inductor-nvidia-h100-80gb-hbm3"):
        for suffix in (".joblib", ".json"):
            shutil.copy(artifact.MODELS_DIR / f"{name}{suffix}", where / f"{name}{suffix}")
    side = where / "inductor-nvidia-h200.json"
    meta = json.loads(side.read_text())
    side.write_text(json.dumps({**meta, "train_data_hash": "0" * 16}))
    with pytest.raises(ValueError, match="train_data_hash differs"):
        artifact.model_for_device("NVIDIA H200", where, family="inductor")
    side.write_text("[1, 2]")
    with pytest.warns(UserWarning, match="not a record"):
        found, _ = artifact.model_for_device("NVIDIA H100 80GB HBM3", where, family="inductor")
    assert found is not None


def test_a_models_directory_of_ones_own_comes_before_the_shipped_one(trained, tmp_path, monkeypatch):
    """$AUTOHEUR_MODELS_DIR: a GPU's model trained outside the checkout is found first (run time, predict, the fallback
    list); unset, the shipped models/ as before."""
    model, path = trained
    own = tmp_path / "own"
    own.mkdir()
    shutil.copy(path, own / path.name)
    shutil.copy(path.with_suffix(".json"), own / path.with_suffix(".json").name)
    name = model.device["name"]
    shipped, _ = artifact.model_for_device(name)
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(own))
    assert artifact.model_dirs() == [own, artifact.MODELS_DIR]
    found, how = artifact.model_for_device(name)
    assert found.meta["train_data_hash"] == model.meta["train_data_hash"] != shipped.meta["train_data_hash"]
    assert path.name in how and artifact.fallback_list() == model.fixed_list
    monkeypatch.delenv("AUTOHEUR_MODELS_DIR")
    assert artifact.model_for_device(name)[0].meta["train_data_hash"] == shipped.meta["train_data_hash"]
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(tmp_path / "typo"))  # not a directory: said, not passed over
    with pytest.warns(UserWarning, match="AUTOHEUR_MODELS_DIR=.*typo' is not a directory: only the shipped models/"):
        assert artifact.model_for_device(name)[0].meta["train_data_hash"] == shipped.meta["train_data_hash"]


def test_in_the_interpreter_a_model_of_interpreter_data_comes_first(trained, tmp_path, monkeypatch):
    """A model trained on a dataset collected in the interpreter (its device: "Triton interpreter (H100 rules)") is
    what the tuner ranks with when the interpreter runs the kernels: train-then-use can be tried end to end on a CPU
    (stop 79's walkthrough could not). Without one, the H100's model as before."""
    import copy

    from autoheur.device import H100_SXM, INTERPRETER_NAME
    from autoheur.inference.tuner import Tuner

    model, _ = trained
    own = copy.deepcopy(model)
    own.meta["device"] = {**own.meta["device"], "name": INTERPRETER_NAME}
    own.save(tmp_path / "own" / "triton-interpreter-h100-rules.joblib")
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(tmp_path / "own"))
    monkeypatch.setattr("autoheur.inference.tuner.interpreting", lambda: True)
    assert Tuner().model(H100_SXM).device["name"] == INTERPRETER_NAME
    monkeypatch.setattr("autoheur.inference.tuner.interpreting", lambda: False)
    assert Tuner().model(H100_SXM).device["name"] == H100_SXM.name  # on a GPU: the GPU's own
    monkeypatch.delenv("AUTOHEUR_MODELS_DIR")
    monkeypatch.setattr("autoheur.inference.tuner.interpreting", lambda: True)
    assert Tuner().model(H100_SXM).device["name"] == H100_SXM.name  # none of one's own: the shipped H100's


def test_predict_in_the_interpreter_ranks_with_the_tuners_model(trained, tmp_path, monkeypatch, capsys):
    """`predict` said the H100 model while the tuner, in the interpreter, ranked with a model of interpreter data:
    its top 10 was not the list the tuner times. Now both take the same model and rank alike; --device or --model
    still picks as asked."""
    import copy

    from autoheur.device import H100_SXM, INTERPRETER_NAME
    from autoheur.problem import Problem

    model, _ = trained
    own = copy.deepcopy(model)
    own.meta["device"] = {**own.meta["device"], "name": INTERPRETER_NAME}
    own.save(tmp_path / "own" / "triton-interpreter-h100-rules.joblib")
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(tmp_path / "own"))
    args = ["predict", "--groups", "8", "--total", "512", "--routing", "uniform", "--n", "256", "--k", "512",
            "--dtype", "float16", "--json"]  # fmt: skip
    for on in (True, False):
        monkeypatch.setattr(sys.modules["autoheur.kernels.validate"], "interpreting", lambda on=on: on)
        monkeypatch.setattr("autoheur.inference.tuner.interpreting", lambda on=on: on)
        assert main(args) == 0
        got = json.loads(capsys.readouterr().out)
        from autoheur.inference.tuner import Tuner

        tuner_model = Tuner().model(H100_SXM)
        assert got["model_device"] == tuner_model.device["name"] == (INTERPRETER_NAME if on else H100_SXM.name)
        problem = Problem(**{**got["shape"], "sizes": tuple(got["shape"]["sizes"])})
        want = tuner_model.top_k(problem, 10, device={**tuner_model.device, **H100_SXM.to_dict()})
        assert [t["config"] for t in got["top"]] == [c.config_id for c, _ in want]
    monkeypatch.setattr(sys.modules["autoheur.kernels.validate"], "interpreting", lambda: True)
    assert main([*args, "--device", "h100"]) == 0  # named: that GPU's model, in the interpreter too
    assert json.loads(capsys.readouterr().out)["model_device"] == H100_SXM.name


def test_predict_model_of_interpreter_data_in_the_interpreter_is_this_hosts(trained, tmp_path, monkeypatch, capsys):
    """`predict --model FILE` (what `train` says to run for a model saved outside the lookups) with a model of
    interpreter data, in the interpreter: it is this host's model, as the lookup takes it, not one "trained on Triton
    interpreter (H100 rules), not NVIDIA H100 80GB HBM3" with a --device to give."""
    import copy

    from autoheur.device import INTERPRETER_NAME

    own = copy.deepcopy(trained[0])
    own.meta["device"] = {**own.meta["device"], "name": INTERPRETER_NAME}
    path = own.save(tmp_path / "elsewhere" / "mine.joblib")
    monkeypatch.setattr(sys.modules["autoheur.kernels.validate"], "interpreting", lambda: True)
    args = ["predict", "--groups", "8", "--total", "512", "--routing", "uniform", "--n", "256", "--k", "512",
            "--dtype", "float16", "--model", str(path)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr()
    assert "was trained on" not in out.err and f"on {INTERPRETER_NAME}: model {path}," in out.out
    monkeypatch.setattr(sys.modules["autoheur.kernels.validate"], "interpreting", lambda: False)
    assert main(args) == 0  # on a GPU: another device's model, said
    assert f"{path} was trained on {INTERPRETER_NAME}, not NVIDIA H100 80GB HBM3" in capsys.readouterr().err


def test_train_on_one_problem_with_held_out_folds_says_what_to_do(mini_of, tmp_path):
    """Every hash fold holds all of a one-problem dataset or none of it: train said "max() arg is an empty sequence"."""
    one = mini_of(H100, tmp_path / "one", count=1)
    with pytest.raises(ValueError, match=r"holds 1 problem\(s\), all in one of the 5 hash folds: .* --heldout-folds 0"):
        train(one, "fixed_list", heldout_folds=5, log=lambda s: None)
    assert train(one, "fixed_list", heldout_folds=0, log=lambda s: None).meta["heldout"] == []


def test_train_keeps_no_figures_of_an_empty_subset(trained):
    """design_unseen is a row of 0 problems in eval's summaries where no problem is unseen; train's held-out records
    wrote it as NaN into the side-car (which strict JSON readers refuse) and printed 'nan' lines."""
    model, path = trained
    assert model.meta["heldout"] and all(row["n_problems"] > 0 for row in model.meta["heldout"])
    assert "NaN" not in path.with_suffix(".json").read_text()


def test_train_checks_the_model_name_and_folds_before_the_data_loads(mini_dataset, tmp_path, monkeypatch, capsys):
    """A misspelt --model or a --heldout-folds of 1 or less is refused at once, not after the dataset has loaded (a
    minute or more for a shipped one)."""
    import autoheur.models.train as train_module

    def no_load(*a, **k):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(train_module, "load_ranking_set", no_load)
    with pytest.raises(ValueError, match=r"^unknown model 'xgb_rank'; choose from"):
        train(mini_dataset, "xgb_rank", heldout_folds=0, log=lambda s: None)
    for folds in (-1, 1, 2.5):
        with pytest.raises(ValueError, match=rf"^heldout_folds={folds}: 0 \(no held-out figures\) or at least 2"):
            train(mini_dataset, "xgb_ranker", heldout_folds=folds, log=lambda s: None)
    assert main(["train", "--data", str(mini_dataset), "--model", "bogus", "--out", str(tmp_path / "m.joblib")]) == 2
    assert "unknown model 'bogus'" in capsys.readouterr().err
