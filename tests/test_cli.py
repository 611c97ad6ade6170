"""The CLI: counts below 1 refused, `autoheur tune` on problems it cannot run (exit 2 with a message, no
traceback), and `predict` with a model of another device saying so, or borrowing one for a GPU without its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

# The kernels made now, in the interpreter on a CPU: imported first under a test's TRITON_INTERPRET=0 they were
# compiled ones, and a later interpreted tune found no driver (this file run alone)
import autoheur.kernels.grouped_gemm  # noqa: F401
from autoheur.cli import main


@pytest.mark.parametrize("argv", [["predict", "--top", "0"], ["predict", "--top", "-1"], ["tune", "--top-k", "0"],
                                  ["tune", "--top-k", "-1"], ["tune", "--top-k", "many"]])  # fmt: skip
def test_counts_below_one_are_refused(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"argument {argv[1]}: expected a positive integer" in capsys.readouterr().err


def test_tune_without_a_gpu_or_the_interpreter_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 2
    assert capsys.readouterr().err.startswith("autoheur tune: no CUDA GPU here: set TRITON_INTERPRET=1")


def test_tune_of_a_problem_the_kernel_refuses_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    shapes = tmp_path / "s.jsonl"  # n = 33 float32, B n-major: rows of 132 bytes
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 33, "k": 32, "dtype": "float32", "b_major": "n"}\n')
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoheur tune: problem 's.jsonl:1': b has strides") and "16 bytes" in err


def test_predict_with_a_model_of_another_device_says_whose_ranking_it_is(capsys):
    """--model of the H100 with --device h200: the ranking is the H100 model's, and the output says so (stderr, the
    source line and the JSON's model_device) rather than presenting it as the H200's."""
    model = str(Path(__file__).resolve().parents[1] / "models" / "nvidia-h100-80gb-hbm3.joblib")
    args = ["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--model", model, "--json"]
    assert main([*args, "--device", "h200"]) == 0
    out = capsys.readouterr()
    assert "was trained on NVIDIA H100 80GB HBM3, not NVIDIA H200" in out.err
    got = json.loads(out.out)
    assert got["model_device"] == "NVIDIA H100 80GB HBM3" and "trained on NVIDIA H100" in got["source"]
    assert main([*args, "--device", "h100"]) == 0
    out = capsys.readouterr()
    assert "trained on" not in out.err and json.loads(out.out)["model_device"] == "NVIDIA H100 80GB HBM3"


def test_predict_on_a_gpu_without_a_model_borrows_its_kins(capsys, monkeypatch):
    """On a GPU with no model of its own (here an H100 PCIe: 114 SMs), predict ranks with the nearest shipped model of
    its architecture, with this GPU's own properties, and says so; a GPU named but not here (architecture unknown):
    the fixed list, said too."""
    import dataclasses

    import autoheur.device
    from autoheur.device import H100_SXM
    from autoheur.models.artifact import MODELS_DIR, TrainedModel

    args = ["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--json", "--top", "3"]
    assert main([*args, "--device", "NVIDIA H800"]) == 0  # no GPU here: its architecture is unknown
    out = capsys.readouterr()
    got = json.loads(out.out)
    assert got["model_device"] is None and "best fixed list" in got["source"] and "best fixed list" in out.err
    pcie = dataclasses.replace(H100_SXM, name="NVIDIA H100 PCIe", sm_count=114)
    monkeypatch.setattr(autoheur.device, "current_device_spec", lambda: pcie)
    assert main(args) == 0
    out = capsys.readouterr()
    got = json.loads(out.out)
    assert got["device"] == "NVIDIA H100 PCIe" and got["model_device"] == H100_SXM.name
    assert "borrowing nvidia-h100-80gb-hbm3.joblib" in out.err and "borrowing" in got["source"]
    assert any("log2_sm_count" in s for s in got["extrapolating"])  # 114 SMs: outside the H100's training range
    donor = TrainedModel.load(MODELS_DIR / "nvidia-h100-80gb-hbm3.joblib")
    from autoheur.collect.workloads import public_problems

    problem = next(p for p in public_problems() if p.name == "qwen3-30b-a3b/gate_up/decode")
    as_pcie = [c.config_id for c, _ in donor.top_k(problem, 3, device={**donor.device, **pcie.to_dict()})]
    assert [t["config"] for t in got["top"]] == as_pcie  # ranked with this GPU's properties
    assert as_pcie != [c.config_id for c, _ in donor.top_k(problem, 3)]  # which the H100's own would not give


def test_collect_says_what_this_host_cannot_collect_before_writing_anything(tmp_path, capsys, monkeypatch):
    """No GPU and no interpreter, or bf16 in the interpreter (its bf16 dot is wrong: every row would read `wrong`):
    exit 2 with what to do, and no dataset started."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32}\n')  # bfloat16, the default
    out = tmp_path / "d"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert main(["collect", "--shapes", str(shapes), "--out", str(out)]) == 2
    assert "no CUDA GPU here: set TRITON_INTERPRET=1" in capsys.readouterr().err and not out.exists()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert main(["collect", "--shapes", str(shapes), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 of the 1 problems are bfloat16, which the Triton interpreter computes wrongly" in err and not out.exists()
    assert main(["collect", "--shapes", str(shapes), "--dry-run"]) == 0  # a dry run only lists them


@pytest.mark.parametrize("cmd", [["collect", "--workload", "public", "--dry-run"], ["data", "refine", "ds"],
                                 ["data", "polish", "ds"], ["data", "retime", "ds"]])  # fmt: skip
def test_gpus_below_one_or_past_this_machines_are_refused_saying_what_to_give(cmd, capsys, monkeypatch):
    """`--gpus 0` was refused as "--gpus 0: this machine has 0" (on an 8-GPU host "has 8"): the complaint of too many,
    not of a count below one."""
    name = " ".join(cmd[:2]) if cmd[0] == "data" else cmd[0]
    for gpus in ("0", "-2"):
        assert main([*cmd, "--gpus", gpus]) == 2
        want = f"--gpus {gpus}: expected a count of GPUs, at least 1 (one worker each), or 'all'"
        assert capsys.readouterr().err == f"autoheur {name}: {want}\n"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert main([*cmd, "--gpus", "3"]) == 2
    want = "--gpus 3: this machine has 2 GPU(s); give at most 2, or 'all'"
    assert capsys.readouterr().err == f"autoheur {name}: {want}\n"


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`autoheur ... | head`: the pipe closes under the command; it ends quietly (exit 0), not with a BrokenPipeError
    traceback."""
    import subprocess
    import sys

    code = ("import sys\nfrom autoheur import cli\n"
            "def gone(args):\n    raise BrokenPipeError(32, 'Broken pipe')\n"
            "cli.cmd_space = gone\nsys.exit(cli.main(['space']))\n")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr


def test_predict_takes_a_public_problem_whole(capsys):
    """--public with a problem flag beside it: refused, naming the flags (they were dropped without a word: asking
    for a public problem in float32 ranked its bf16 form)."""
    args = ["predict", "--public", "qwen3-30b-a3b/gate_up/decode"]
    assert main([*args, "--n", "5", "--dtype", "float32"]) == 2
    assert "--public takes the problem whole; drop --n, --dtype" in capsys.readouterr().err
    assert main([*args, "--json", "--top", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["shape"]["dtype"] == "bfloat16"


def test_predict_refuses_an_empty_size_instead_of_dropping_it(capsys):
    """--sizes 1,2,,3 read as three groups (the empty entry dropped) where a group was meant; a trailing comma too."""
    args = ["predict", "--n", "256", "--k", "512", "--json", "--top", "1"]
    for sizes in ("16,32,,48", "16,32,"):
        assert main([*args, "--sizes", sizes]) == 2
        assert "has an empty entry: one size per group" in capsys.readouterr().err
    assert main([*args, "--sizes", "16, 32,48"]) == 0
    assert json.loads(capsys.readouterr().out)["shape"]["sizes"] == [16, 32, 48]


def test_predict_gives_a_weight_gradient_the_backwards_majors_and_shows_them(capsys):
    """--layout 2d2d defaults to the weight gradient's operand majors (A m-major, B n-major: what the backward runs
    and the models trained on), not k/k (never trained on); the JSON carries the whole shape, the text the majors."""
    base = ["predict", "--layout", "2d2d", "--sizes", "64,0,192", "--m", "256", "--n", "512", "--top", "2"]
    assert main([*base, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["shape"] == {"layout": "2d2d", "groups": 3, "sizes": [64, 0, 192], "m": 256, "n": 512, "k": 0,
                            "dtype": "bfloat16", "a_major": "m", "b_major": "n"}  # fmt: skip
    assert not any("operand layout" in s for s in got["extrapolating"])
    assert main([*base, "--a-major", "k", "--b-major", "k", "--json"]) == 0  # given: kept, and flagged
    got = json.loads(capsys.readouterr().out)
    assert (got["shape"]["a_major"], got["shape"]["b_major"]) == ("k", "k")
    assert any("never trained on this operand layout" in s for s in got["extrapolating"])
    assert main(["predict", "--groups", "2", "--sizes", "8,8", "--n", "64", "--k", "64", "--top", "1"]) == 0
    assert "(A k-major, B k-major)" in capsys.readouterr().out  # 2d3d: the forward's
    assert main(["predict", "--sizes", "8,8", "--n", "64", "--k", "64", "--m", "9"]) == 2
    assert "layout 2d3d takes n, k; m is the sum of the groups' sizes" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "0,0", "--n", "32", "--k", "32"],
        ["--layout", "3d2d", "--groups", "4", "--total", "0", "--m", "32", "--k", "32"],
    ],
)
def test_predict_refuses_a_problem_that_never_launches_the_kernel(capsys, argv):
    """No rows (2d3d) or columns (3d2d): the output is empty and the run time returns it before any tuning, as tune
    skips it; predict ranked ten configs and scores for it as if they ran."""
    assert main(["predict", *argv, "--device", "h100", "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "never launches the kernel" in out.err


def test_predict_device_presets_in_any_case(capsys):
    assert main(["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--device", "H100", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["device"] == got["model_device"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(("device", "want"), [
    ("h200 ", "--device 'h200 ' has spaces around it, which no GPU's name has: give 'h200'"),
    (" NVIDIA H200", "--device ' NVIDIA H200' has spaces around it, which no GPU's name has: give 'NVIDIA H200'"),
    ("", "--device '' names no device: give one (h100, h200 or a GPU's name), or leave --device out"),
    ("  ", "--device '  ' names no device"),
])  # fmt: skip
def test_predict_refuses_a_device_name_with_spaces_around_it_or_none(capsys, device, want):
    """'h200 ' was taken as an unknown GPU's name (no model borrowed: the fixed list, exit 0), and '' as no --device
    (this host's GPU): refused by repr, as --layout '2d3d ' is."""
    assert main(["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--device", device, "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith(f"autoheur predict: {want}")


def test_predict_explains_the_scores_past_the_shortlist(capsys):
    assert main(["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--top", "3000"]) == 0
    out = capsys.readouterr().out
    assert "score -30000.000" in out and "scores near -10000: configs past the model's shortlist" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's bf16 only")
def test_tune_refuses_bfloat16_in_the_interpreter(tmp_path, capsys, monkeypatch):
    """bf16 (a shapes line's default dtype) in the interpreter: wrong products, so refused as `collect` and the API
    refuse it, before any problem is tuned (it ran, and timed kernels computing garbage)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"groups": 2, "sizes": [3, 4], "n": 32, "k": 32, "dtype": "float32"}\n'
                      '{"groups": 2, "sizes": [3, 4], "n": 32, "k": 32}\n')  # fmt: skip
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "1 of the 2 problems are bfloat16 (e.g. 's.jsonl:2'" in out.err


def test_a_bad_setting_is_one_line_not_a_traceback(capsys, monkeypatch):
    """An AUTOHEUR_* knob read where it is used (some at import): the CLI says it in one line, exit 2."""
    monkeypatch.setenv("AUTOHEUR_FOREST", "x")
    assert main(["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--device", "h100"]) == 2
    assert capsys.readouterr().err == (
        "autoheur predict: AUTOHEUR_FOREST='x': expected one of ('1', 'true', 'on', 'yes', '0', 'false', 'off', 'no')\n"
    )


def test_predict_refuses_a_model_of_the_inductor_family(capsys):
    model = Path(__file__).resolve().parents[1] / "models" / "inductor-nvidia-h100-80gb-hbm3.joblib"
    assert main(["predict", "--public", "qwen3-30b-a3b/gate_up/decode", "--model", str(model)]) == 2
    assert "a model of the 'inductor' family" in capsys.readouterr().err


def test_train_and_eval_refuse_an_output_they_cannot_write_before_the_work(tmp_path, capsys, monkeypatch):
    """Found after the whole fit or evaluation (a traceback), or written over (a .json --out: the model and its
    side-car one file): now refused first. The dataset is never read."""
    import autoheur.models.train as train_mod

    monkeypatch.setattr(train_mod, "train", lambda *a, **k: pytest.fail("trained"))
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    data = ["--data", str(tmp_path / "no-such-dataset")]
    cases = [
        (["--out", str(tmp_path)], "is a directory: give a file path"),
        (["--out", str(tmp_path / "m.json")], ".json is the model's side-car"),
        (["--out", str(afile / "m.joblib")], "afile.txt is not a directory"),
        (["--out", str(tmp_path / "m.joblib"), "--heldout-problems", str(tmp_path)], "--heldout-problems"),
    ]
    for extra, message in cases:
        assert main(["train", *data, *extra]) == 2
        assert message in capsys.readouterr().err
    assert main(["eval", *data, "--report", str(afile)]) == 2
    assert f"--report {afile} exists and is not a directory" in capsys.readouterr().err
    kept = tmp_path / "kept"  # a report kept as a record (reports/eval-stopNN): never written over
    kept.mkdir()
    (kept / "report.md").write_text("# an earlier evaluation\n")
    assert main(["eval", *data, "--report", str(kept)]) == 2
    assert f"--report {kept} holds a report already (report.md)" in capsys.readouterr().err
    assert (kept / "report.md").read_text() == "# an earlier evaluation\n"
    # an empty --report wrote no report, an empty --aux-problems kept every auxiliary problem: each silently
    for extra in (["--report", ""], ["--aux-for", "x", "--aux-problems", ""]):
        assert main(["eval", *data, *extra]) == 2
        assert f"{extra[-2]} '' names no path: give one, or leave {extra[-2]} out" in capsys.readouterr().err
    # train: an empty --out saved the model at the default path, the others were ignored, each silently
    for extra in (["--out", ""], ["--heldout-problems", ""], ["--aux", "x", "--aux-problems", ""]):
        assert main(["train", *data, *extra]) == 2
        assert f"{extra[-2]} '' names no path: give one, or leave {extra[-2]} out" in capsys.readouterr().err


def test_a_shapes_path_that_is_no_text_file_is_refused(tmp_path, capsys):
    assert main(["tune", "--shapes", str(tmp_path)]) == 2
    assert "is a directory: give a .jsonl or .csv file" in capsys.readouterr().err
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xa8\xff\x00")
    assert main(["collect", "--dry-run", "--shapes", str(binary)]) == 2
    assert "is not text (UTF-8)" in capsys.readouterr().err


def test_workload_options_beside_shapes_are_refused(tmp_path, capsys):
    """--count, --workload, --layouts, --dtypes (and tune's --seed) choose a workload's problems; beside --shapes they
    were silently ignored (a --count 5 collected the whole file). Their defaults beside --shapes are fine."""
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')
    for argv, named in [
        (["collect", "--dry-run", "--shapes", str(shapes), "--count", "5"], "--count chooses"),
        (["collect", "--dry-run", "--layouts=2d2d", "--shapes", str(shapes), "--dtypes", "float16"],
         "--dtypes, --layouts choose"),
        (["tune", "--shapes", str(shapes), "--seed", "3", "--workload", "public"], "--seed, --workload choose"),
    ]:  # fmt: skip
        assert main(argv) == 2
        assert f"{named} a workload's problems, and --shapes gives them" in capsys.readouterr().err
    assert main(["collect", "--dry-run", "--shapes", str(shapes), "--seed", "3"]) == 0  # collect's seed: the inputs
    assert "32" in capsys.readouterr().out
    assert main(["collect", "--dry-run", "--workload", "sampled", "--count", "2"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) >= 2


def test_a_seed_the_workloads_would_overflow_is_refused_by_name(capsys):
    """A 64-bit --seed passed argparse and failed in the workload's draws as "Overflow when unpacking long long",
    naming no option."""
    big = str(2**64 - 1)
    for argv in (["collect", "--dry-run", "--workload", "models", "--seed", big], ["tune", "--seed", "-1"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2 and "--seed: expected an integer from 0 to 2**32 - 1" in capsys.readouterr().err
    assert main(["collect", "--dry-run", "--workload", "models", "--count", "1", "--seed", str(2**32 - 1)]) == 0


@pytest.mark.parametrize("kind", ["retime", "refine", "polish"])
def test_a_data_pass_takes_any_seed_its_dataset_may_have_been_collected_with(kind, capsys):
    """A pass's --seed is the collection's inputs' seed, not a workload's: it draws nothing that 32 bits bound. A
    dataset collected through the Python API (CollectOptions takes torch's 64-bit range) or by a `collect` of before
    its 32-bit limit may hold such a seed, which its passes must be given; past 64 bits is refused by name."""
    from autoheur.cli import build_parser

    parser = build_parser()
    for seed in (2**40, 2**64 - 1, -1):
        assert parser.parse_args(["data", kind, "somewhere", "--seed", str(seed)]).seed == seed
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["data", kind, "somewhere", "--seed", str(2**64)])
    assert exited.value.code == 2 and "--seed: expected an integer from -2**63 to 2**64 - 1" in capsys.readouterr().err


def test_predict_refuses_a_bad_knob_its_path_would_not_read(monkeypatch, capsys):
    """AUTOHEUR_BORROW_MODEL=maybe passed `predict` on a GPU with a model of its own (no borrowing read it)."""
    monkeypatch.setenv("AUTOHEUR_BORROW_MODEL", "maybe")
    args = ["predict", "--groups", "8", "--total", "512", "--routing", "uniform", "--n", "256", "--k", "512"]
    assert main([*args, "--device", "h100"]) == 2
    assert "AUTOHEUR_BORROW_MODEL='maybe': expected one of" in capsys.readouterr().err


def test_layouts_and_dtypes_beside_a_fixed_workload_are_refused(capsys):
    """The public, models, backward and sampled_grad_a workloads are the models' own problems: --dtypes float16
    (which the interpreter's bf16 refusal suggested) was silently ignored and the same bf16 problems listed."""
    for workload in ("public", "models", "backward", "sampled_grad_a"):
        assert main(["collect", "--dry-run", "--workload", workload, "--dtypes", "float16"]) == 2
        assert f"--workload {workload} is its problems as they are: --dtypes chooses" in capsys.readouterr().err
    assert main(["collect", "--dry-run", "--workload", "public", "--layouts", "2d2d", "--dtypes", "float16"]) == 2
    assert "--dtypes, --layouts choose the sampled problems" in capsys.readouterr().err
    assert main(["collect", "--dry-run", "--workload", "sampled", "--dtypes", "float32", "--count", "3"]) == 0
    listed = capsys.readouterr().out.strip().splitlines()
    assert len(listed) == 3 and all(" float32 " in line for line in listed)


def test_train_and_eval_say_which_file_they_could_not_read(tmp_path, capsys, monkeypatch):
    """A part file this user may not read (or any OSError while the data load) ended train and eval in a raw
    traceback: both caught ValueError and FileNotFoundError alone. Now the error is said, naming the file."""
    import autoheur.models.eval_datasets as eval_job
    import autoheur.models.train as train_mod

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied", "data/x/part-0.parquet")

    monkeypatch.setattr(train_mod, "train", denied)
    monkeypatch.setattr(eval_job, "eval_datasets", denied)
    data = ["--data", str(tmp_path / "ds")]
    assert main(["train", *data, "--out", str(tmp_path / "m.joblib")]) == 2
    assert "autoheur train: [Errno 13] Permission denied: 'data/x/part-0.parquet'" in capsys.readouterr().err
    assert main(["eval", *data]) == 2
    assert "autoheur eval: [Errno 13] Permission denied: 'data/x/part-0.parquet'" in capsys.readouterr().err


def test_a_dataset_without_problems_is_refused_by_name(tmp_path, capsys):
    """A manifest and no rows (a collection begun, or killed before its first problem): train said 'max() arg is an
    empty sequence'."""
    import shutil

    src = Path(__file__).resolve().parents[1] / "data" / "fresh-nvidia-h200" / "dataset.json"
    (tmp_path / "ds").mkdir()
    shutil.copy(src, tmp_path / "ds" / "dataset.json")
    assert main(["train", "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "m.joblib")]) == 2
    assert "holds no problems yet" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a tiny problem in the interpreter")
def test_tune_says_where_each_problems_candidates_came_from(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32"}\n')  # groups from the sizes
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("s.jsonl:1") and "tuned in" in line and "(1 candidates: model" in line


def test_train_names_the_model_after_the_dataset_directory_given_as_dot(tmp_path, monkeypatch, capsys):
    """`cd data/<slug> && autoheur train --data .`: the default --out was `<models dir>/.joblib` (a hidden file with a
    side-car `.joblib.json`), not `<slug>.joblib` as for `--data data/<slug>`."""
    from types import SimpleNamespace

    import autoheur.models.train as train_mod

    saved = []
    model = SimpleNamespace(meta={"heldout": [], "fit_seconds": 0.0, "device": {"name": "GPU x"}}, save=saved.append)
    monkeypatch.setattr(train_mod, "train", lambda *a, **k: model)
    monkeypatch.setenv("AUTOHEUR_MODELS_DIR", str(tmp_path / "own"))
    (tmp_path / "data" / "gpu-x").mkdir(parents=True)
    (tmp_path / "own").mkdir()
    monkeypatch.chdir(tmp_path / "data" / "gpu-x")
    assert main(["train", "--data", "."]) == 0
    assert saved == [tmp_path / "own" / "gpu-x.joblib"] and f"saved {tmp_path / 'own' / 'gpu-x.joblib'}" in (
        capsys.readouterr().out
    )
    (tmp_path / "store-7").mkdir()  # a dataset directory that is a link: named as given, as before `.` was
    (tmp_path / "data" / "gpu-y").symlink_to(tmp_path / "store-7")
    assert main(["train", "--data", str(tmp_path / "data" / "gpu-y")]) == 0
    assert saved[1:] == [tmp_path / "own" / "gpu-y.joblib"]
    assert main(["train", "--data", ".."]) == 0  # cd data/gpu-x/sub, say
    assert saved[2:] == [tmp_path / "own" / "data.joblib"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a tiny problem in the interpreter")
def test_tune_skips_a_problem_that_never_launches_the_kernel(tmp_path, capsys, monkeypatch):
    """No rows (an empty output): the run time returns it before any tuning, and `autoheur collect` skips it; tune
    printed a "chosen" config and a time for launches that compute nothing."""
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"sizes": [0, 0], "n": 32, "k": 32, "dtype": "float32", "name": "empty"}\n')
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("empty") and "skipped: never launches the kernel" in line and " ms " not in line
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["problem"] == "empty" and "config" not in row and "skipped" in row


def test_tune_of_a_problem_no_candidate_can_run_names_it(tmp_path, capsys, monkeypatch):
    """Every candidate failing to compile or run is a failure (exit 1) said with the problem's name, not a traceback;
    the problems tuned before it are printed, as text or JSON."""
    from autoheur.inference import tune

    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    real = tune.compile_in_parallel
    calls = []

    def second_fails(call, cfgs, pool=None, where=None):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError(f"none of the {len(cfgs)} candidate configs compiled and computed a correct result")
        return real(call, cfgs, pool, where) if where else real(call, cfgs, pool)

    monkeypatch.setattr(tune, "compile_in_parallel", second_fails)
    shapes = tmp_path / "s.jsonl"
    line = '{"groups": 2, "sizes": [16, 16], "n": 32, "k": 32, "dtype": "float32", "name": "%s"}\n'
    shapes.write_text(line % "first" + line % "second")
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("first ") and "second" not in out.out
    assert (
        out.err
        == "autoheur tune: problem 'second': none of the 1 candidate configs compiled and computed a correct result\n"
    )
    calls.clear()
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1", "--json"]) == 1
    out = capsys.readouterr()
    assert [row["problem"] for row in json.loads(out.out)] == ["first"]  # what was tuned before the failure
    assert out.err.startswith("autoheur tune: problem 'second': none of the 1")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's bfloat16 refusal")
def test_tune_skips_a_bfloat16_problem_that_never_launches_in_the_interpreter(tmp_path, capsys, monkeypatch):
    """The interpreter's bf16 refusal is for problems the kernel runs: an empty output is returned before any tuning
    (as the run time returns it, bf16 on the CPU too), so it is skipped, not refused with the whole file."""
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    shapes = tmp_path / "s.jsonl"
    shapes.write_text('{"sizes": [0, 0], "n": 32, "k": 32, "name": "empty"}\n')  # bfloat16, the default dtype
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("empty") and "skipped: never launches the kernel" in line
    shapes.write_text('{"sizes": [0, 0], "n": 32, "k": 32, "name": "empty"}\n{"sizes": [4], "n": 32, "k": 32}\n')
    assert main(["tune", "--shapes", str(shapes), "--top-k", "1"]) == 2
    assert "1 of the 2 problems are bfloat16" in capsys.readouterr().err


def test_predict_fallback_lists_only_configs_the_problem_can_run(capsys, monkeypatch):
    """With no model for the GPU (AUTOHEUR_BORROW_MODEL=0 on an H100 PCIe), predict shows the best fixed list as the
    run-time tuner uses it: without the configs infeasible for this problem on this GPU (float32: the list's large
    tiles need more shared memory than a block may have), not the list as stored."""
    import dataclasses

    import autoheur.device
    from autoheur.collect.shapes import problem_from_record
    from autoheur.device import H100_SXM
    from autoheur.kernels.config import feasible_configs
    from autoheur.models.artifact import fallback_list

    pcie = dataclasses.replace(H100_SXM, name="NVIDIA H100 PCIe", sm_count=114)
    monkeypatch.setattr(autoheur.device, "current_device_spec", lambda: pcie)
    monkeypatch.setenv("AUTOHEUR_BORROW_MODEL", "0")
    shape = {"groups": 4, "total": 100, "n": 128, "k": 256, "dtype": "float32"}
    ok = {c.config_id for c in feasible_configs(problem_from_record(dict(shape)).signature(), pcie)}
    stored = fallback_list()
    assert any(c not in ok for c in stored)  # the case at hand: some of the list cannot run this problem
    argv = ["predict", "--json", *[a for k, v in shape.items() for a in (f"--{k}", str(v))]]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["model_device"] is None and "best fixed list" in got["source"]
    assert [t["config"] for t in got["top"]] == [c for c in stored if c in ok]


def test_predict_fallback_for_an_unknown_gpu_lists_no_tma_config_the_call_cannot_run(capsys):
    """A GPU not here and of no preset (its properties unknown) gets the stored list, but a 2d3d call with A
    column-major cannot load by TMA on any GPU (the signature's rule): the list's -tma configs were listed for it."""
    from autoheur.models.artifact import fallback_list

    assert any(c.endswith(("-tma", "-tma-ws")) for c in fallback_list())  # the case at hand
    shape = ["--groups", "8", "--total", "512", "--n", "256", "--k", "256", "--a-major", "m"]
    assert main(["predict", *shape, "--device", "Some Future GPU", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["model_device"] is None and got["top"]
    assert [t["config"] for t in got["top"]] == [c for c in fallback_list() if "-tma" not in c]


def test_predict_with_a_model_whose_library_is_not_installed_says_so_without_a_traceback(tmp_path, capsys, monkeypatch):
    """TrainedModel.load turns a missing library into an ImportError that names it and how to install it; predict let
    it out as a traceback (exit 1), where its other refusals of a model are one line and exit code 2."""
    import sys
    import types

    import joblib

    lib = types.ModuleType("autoheur_test_absent_lib")
    ranker = type("Ranker", (), {"__module__": lib.__name__})
    lib.Ranker = ranker
    monkeypatch.setitem(sys.modules, lib.__name__, lib)
    joblib.dump({"format_version": 1, "meta": {}, "ranker": ranker()}, tmp_path / "m.joblib")
    monkeypatch.delitem(sys.modules, lib.__name__)  # as on a host without that library
    argv = ["predict", "--groups", "4", "--total", "100", "--n", "128", "--k", "256"]
    assert main([*argv, "--model", str(tmp_path / "m.joblib")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoheur predict: ") and "pip install autoheur_test_absent_lib" in err
