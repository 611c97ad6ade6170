"""The `autoheur` command line: each subcommand calls one library function.

Examples:
  autoheur selftest                         # kernels vs reference on every layout (GPU, else the CPU interpreter)
  autoheur space                            # the config space: size, hash, feasible configs per layout
  autoheur space --device h200 --dtype float16 --layout 2d2d
  autoheur collect --count 400              # the default workload, whole space, into data/<device-slug>
  autoheur collect --workload sampled --layouts 3d2d,2d2d --dtypes float16 --count 50
  autoheur collect --shapes my_shapes.jsonl --gpus all
  autoheur collect --workload backward --count 400   # the gradient GEMMs of the public models' forwards
  autoheur collect --workload sampled_grad_a --count 300   # the input gradients of the sampled forwards
  autoheur collect --family inductor --workload aten_backward --count 100   # a compiled training step's backward
  autoheur collect --shard 3/8 --out /scratch/h100-3   # one of 8 machines; then: autoheur data merge ...
  autoheur data info data/                  # rows, problems, devices, coverage of every dataset under data/
  autoheur data merge /scratch/h100-* --into data/nvidia-h100-80gb-hbm3
  autoheur train --data data/nvidia-h100-80gb-hbm3   # -> models/nvidia-h100-80gb-hbm3.joblib (+ .json)
  autoheur eval --data data/nvidia-h100-80gb-hbm3 --data data/nvidia-h200 --report reports/my-eval
  autoheur predict --groups 128 --total 4096 --routing zipf --n 1536 --k 2048 --device h100
  autoheur predict --public qwen3-30b-a3b/gate_up/decode --json
  autoheur tune --workload public --compare-exhaustive   # on a GPU: top-10 tuning vs the whole space
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# The workloads whose problems --layouts and --dtypes do not choose (their layouts and dtypes are the models' own)
FIXED_WORKLOADS = ("public", "models", "backward", "sampled_grad_a", "aten_backward")
# autoheur.collect.workloads.WORKLOADS, spelled out so that `--help` does not import torch (a test keeps them equal)
WORKLOAD_CHOICES = ("default", "public", "models", "sampled", "backward", "sampled_grad_a", "aten_backward")


def cmd_selftest(args: argparse.Namespace) -> int:
    from autoheur.selftest import run

    return 1 if run(verbose=not args.quiet) else 0


def cmd_space(args: argparse.Namespace) -> int:
    from collections import Counter

    from autoheur.device import PRESETS, current_device_spec
    from autoheur.kernels.config import SPACE_HASH, SPACE_VERSION, Signature, all_configs, feasible_configs
    from autoheur.problem import LAYOUTS

    device = PRESETS[args.device] if args.device else current_device_spec()
    elem = {"bfloat16": 2, "float16": 2, "float32": 4}[args.dtype]
    sig = Signature(LAYOUTS[args.layout], elem, tma_aligned=not args.no_tma)
    feas = feasible_configs(sig, device)
    print(f"config space v{SPACE_VERSION}, hash {SPACE_HASH}: {len(all_configs())} configs in all")
    print(f"feasible for {args.layout} {args.dtype} on {device.name}: {len(feas)}")
    for field in ("block_m", "block_n", "block_k", "num_stages", "num_warps", "load", "warp_specialize"):
        counts = Counter(getattr(c, field) for c in feas)
        print(f"  {field:16s} " + "  ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    return 0


class _Given(argparse.Action):
    """Stores the value as `store` does and records the option's name in `args._given`: a workload option given
    beside --shapes (or --layouts/--dtypes beside a fixed workload) is refused, where its default would not be."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace._given = {*getattr(namespace, "_given", ()), max(self.option_strings, key=len)}  # "--count"


def _workload_options_beside_shapes(args: argparse.Namespace) -> str | None:
    """The refusal of workload options given with --shapes (they choose a workload's problems, which --shapes
    replaces: silently ignored, a user's --count 50 would collect the whole file)."""
    given = sorted(getattr(args, "_given", ()))
    fixed = set(given) & {"--layouts", "--dtypes"}
    if not args.shapes and fixed and args.workload in FIXED_WORKLOADS:
        verb = "chooses" if len(fixed) == 1 else "choose"
        return (f"--workload {args.workload} is its problems as they are: {', '.join(sorted(fixed))} {verb} the "
                "sampled problems of the default and sampled workloads (or give the shapes with --shapes)")  # fmt: skip
    if args.shapes and given:
        verb = "chooses" if len(given) == 1 else "choose"
        return f"{', '.join(given)} {verb} a workload's problems, and --shapes gives them: drop one or the other"
    return None


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in the help, but not the None or False of an option that has no value until given (its help says what
    happens then)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _csv(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _cannot_collect_here(problems, family: str) -> str | None:
    """Why this host cannot collect these problems, before anything is written: no GPU and no interpreter, or bf16
    in the interpreter (its bf16 dot is wrong: every row would be recorded `wrong`); for the inductor family, no GPU
    with Inductor's template, or autoheur's choice filter installed in this process."""
    import torch

    from autoheur.kernels.validate import interpreting

    if family == "inductor":
        from autoheur.inductor.collect import why_filtered, why_no_template_here

        if why := why_no_template_here() or why_filtered():
            return why
    if torch.cuda.is_available() and not interpreting():
        return None
    if not interpreting():
        return (
            "no CUDA GPU here: set TRITON_INTERPRET=1 to collect in the Triton interpreter on the CPU (slow; its "
            "timings are the CPU's)"
        )
    bf16 = sum(p.dtype == "bfloat16" for p in problems)
    if bf16:
        return (f"{bf16} of the {len(problems)} problems are bfloat16, which the Triton interpreter computes wrongly "
                "(every row would be recorded `wrong`): collect them on a GPU, or give float16 or float32 problems "
                "(--workload sampled --dtypes float16, or dtype in a --shapes file)")  # fmt: skip
    return None


def _done_count(out: Path) -> str:
    from autoheur.collect.store import DatasetStore

    try:
        return str(len(DatasetStore.load(out).done_problems()))
    except Exception:  # noqa: BLE001 - a dataset not started yet, or unreadable: the count is only a courtesy
        return "no"


def cmd_collect(args: argparse.Namespace) -> int:
    from autoheur.collect.runner import CollectOptions, collect, device_spec, parse_shard, run_problems, shard
    from autoheur.collect.shapes import ShapesError, load_shapes
    from autoheur.collect.workloads import roofline_ms, workload

    try:
        shard_spec = parse_shard(args.shard)
        if why := _workload_options_beside_shapes(args):
            raise ValueError(why)
        if args.shapes:
            problems = load_shapes(args.shapes)
        else:
            problems = workload(args.workload, args.count, args.seed, _csv(args.layouts), _csv(args.dtypes))
        if args.only:
            problems = _by_ids(problems, args.only, keep=True, family=args.family)
        if args.skip:
            problems = _by_ids(problems, args.skip, keep=False, family=args.family)
    except (ShapesError, ValueError, FileNotFoundError) as exc:
        print(f"autoheur collect: {exc}", file=sys.stderr)
        return 2
    try:
        gpus = _gpu_count(args.gpus)
    except ValueError as exc:
        print(f"autoheur collect: {exc}", file=sys.stderr)
        return 2
    if not args.dry_run:
        why = _cannot_collect_here(problems, args.family)
        if why:
            print(f"autoheur collect: {why}", file=sys.stderr)
            return 2
    if args.dry_run:  # the shard's share of what the run collects: taken after the duplicates go, as the run's is
        for p in shard(run_problems(problems, args.family), *shard_spec):
            print(f"{p.layout} {p.dtype:8s} G={p.groups:<3d} rows={p.total:<7d} m={p.m} n={p.n} k={p.k} "
                  f"roofline {roofline_ms(p):.3f} ms  {p.name}")  # fmt: skip
        return 0
    out = Path(args.out) if args.out else Path("data") / device_spec(0).slug
    try:  # every option checked before a dataset is begun
        opts = CollectOptions(
            reps=args.reps,
            **({} if args.abort_factor is None else {"abort_factor": args.abort_factor}),
            workers=args.workers,
            time_limit_s=args.time_limit,
            config_sample=args.sample_configs,
            config_ids=_csv(args.configs) if args.configs is not None else None,
            seed=args.seed,
            family=args.family,
        )
    except ValueError as exc:
        print(f"autoheur collect: {exc}", file=sys.stderr)
        return 2
    if args.family == "inductor" and not args.out:
        out = Path("data") / f"inductor-{device_spec(0).slug}"
    try:
        summary = collect(problems, out, opts, new=args.new_dataset, gpus=gpus, shard_spec=shard_spec)
    except ValueError as exc:  # a mismatched dataset: the message says what to do
        print(f"autoheur collect: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"autoheur collect: interrupted; {_done_count(out)} problems of {out} are saved (the one in flight is "
              "not, nor any half of it); the same command again goes on where this one stopped",
              file=sys.stderr)  # fmt: skip
        return 130
    print(json.dumps(summary, indent=2, default=str))
    return 1 if summary.get("errors") else 0


def _by_ids(problems: list, path: str, keep: bool, family: str = "triton") -> list:
    """`collect --only PATH` (keep=True) / `--skip PATH` (keep=False): keep / drop the problems whose ids PATH holds
    (a dataset, or a file from `autoheur data ids`), the list's order kept. The inductor family's datasets hold the
    problems Inductor times (`as_benchmarked`: the offsets split evenly), so there a problem is also matched by that
    problem's id: else `--skip` of an Inductor dataset would leave out almost nothing. An `--only` that keeps none
    of the problems is refused (ValueError), before collect begins a dataset at --out with nothing to put in it."""
    from autoheur.collect.schema import problem_id
    from autoheur.collect.store import read_problem_ids

    ids = read_problem_ids(path)
    keys = [problem_id]
    if family == "inductor":
        from autoheur.inductor.collect import as_benchmarked

        keys.append(lambda p: problem_id(as_benchmarked(p)))
    if keep and not ids:  # else every problem left out, and collect went on to begin an empty dataset at --out
        raise ValueError(f"--only {path} lists no problem ids (an empty file, or a dataset with no finished problem): "
                         "nothing would be collected; give a file of ids (`autoheur data ids DATASET > FILE`) or a "
                         "dataset that has some")  # fmt: skip
    kept = [p for p in problems if any(key(p) in ids for key in keys) == keep]
    if keep and not kept:  # ids of other problems: another workload, count, seed or shapes file than the list's
        raise ValueError(f"--only {path}: none of its {len(ids)} problem ids is among the {len(problems)} problems "
                         "listed, so nothing would be collected; give the --workload, --count and --seed (or the "
                         "--shapes file) that list them")  # fmt: skip
    print(f"autoheur collect: --{'only' if keep else 'skip'} {path}: {len(problems) - len(kept)} of {len(problems)} "
          "problems left out", file=sys.stderr)  # fmt: skip
    return kept


def cmd_data_ids(args: argparse.Namespace) -> int:
    from autoheur.collect.store import read_problem_ids

    try:
        ids = read_problem_ids(args.path)
    except (ValueError, FileNotFoundError) as exc:
        print(f"autoheur data ids: {exc}", file=sys.stderr)
        return 2
    for pid in sorted(ids):
        print(pid)
    return 0


def cmd_data_info(args: argparse.Namespace) -> int:
    from autoheur.collect.info import format_info, info

    try:
        d = info(Path(args.path))
    except ValueError as exc:
        print(f"autoheur data info: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(d, indent=2) if args.json else format_info(d))
    return 0


def cmd_data_merge(args: argparse.Namespace) -> int:
    from autoheur.collect.merge import merge

    try:
        d = merge([Path(s) for s in args.sources], Path(args.into), ("refine", "polish") if args.finished else ())
    except ValueError as exc:
        print(f"autoheur data merge: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(d, indent=2))
    return 0


def _data_pass(name: str, run) -> int:
    """`autoheur data <name>`: run it, print its summary as JSON; a refusal (ValueError) is exit code 2."""
    try:
        summary = run()
    except ValueError as exc:
        print(f"autoheur data {name}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _gpu_count(text: str) -> int:
    """`--gpus`: a count of this machine's GPUs (at least 1; any count without a GPU, where the interpreter runs each
    worker on the CPU), or 'all'."""
    import torch

    if text == "all":
        return max(1, torch.cuda.device_count())
    try:
        gpus = int(text)
    except ValueError:
        raise ValueError(f"--gpus {text!r}: a number or 'all'") from None
    if gpus < 1:  # said apart from too many: "--gpus 0: this machine has 0" (or has 8) read as the wrong complaint
        raise ValueError(f"--gpus {gpus}: expected a count of GPUs, at least 1 (one worker each), or 'all'")
    if torch.cuda.is_available() and gpus > torch.cuda.device_count():
        have = torch.cuda.device_count()
        raise ValueError(f"--gpus {gpus}: this machine has {have} GPU(s); give at most {have}, or 'all'")
    return gpus


def cmd_data_retime(args: argparse.Namespace) -> int:
    from autoheur.collect.passes import retime
    from autoheur.collect.runner import CollectOptions

    def run():
        opts = CollectOptions(reps=args.reps, workers=args.workers, time_limit_s=args.time_limit, seed=args.seed)
        return retime(Path(args.path), opts, spread_above=args.spread_above, gpus=_gpu_count(args.gpus))

    return _data_pass("retime", run)


def cmd_data_refine(args: argparse.Namespace) -> int:
    return _near_best_pass(args, "refine")


def cmd_data_polish(args: argparse.Namespace) -> int:
    return _near_best_pass(args, "polish")


def _near_best_pass(args: argparse.Namespace, kind: str) -> int:
    """`data refine` or `data polish`: the pass of that name (passes.py), its defaults from passes.<KIND>_*."""
    from autoheur.collect import passes
    from autoheur.collect.runner import CollectOptions

    given = {name: getattr(args, name) for name in ("reps", "within", "top")}
    reps, within, top = (getattr(passes, f"{kind.upper()}_{n.upper()}") if v is None else v for n, v in given.items())

    def run():
        opts = CollectOptions(reps=reps, workers=args.workers, time_limit_s=args.time_limit, seed=args.seed)
        return getattr(passes, kind)(Path(args.path), opts, within=within, top=top, gpus=_gpu_count(args.gpus))

    return _data_pass(kind, run)


def cmd_data_pack(args: argparse.Namespace) -> int:
    from autoheur.collect.store import RETIME_KINDS, DatasetStore, one_writer

    def run():
        store = DatasetStore.load(Path(args.path))
        with one_writer(store.root):  # not while a collection or pass writes there (it packs its own at its end)
            return {
                "root": args.path,
                "packed": {"part": store.pack_parts(), **{k: store.pack(k) for k in RETIME_KINDS}},
            }

    return _data_pass("pack", run)


def _named_empty(*options: tuple[str, str | None]) -> str | None:
    """The refusal of the first (option, value) whose value is '' (a path option naming no path, which the command
    took as not given: its default used, or nothing written), or None."""
    empty = [o for o, v in options if v == ""]
    return f"{empty[0]} '' names no path: give one, or leave {empty[0]} out" if empty else None


def _cannot_write(path: Path, what: str, directory: bool = False) -> str | None:
    """Why `path` (a file, or a directory when `directory`) cannot be written, checked before the work that ends in
    writing it (a fit, an evaluation: minutes), or None. Its missing parents are made later, as the writers do.
    Under a directory this user cannot search, Path.exists raises PermissionError rather than answer: said too."""
    try:
        if directory and path.exists() and not path.is_dir():
            return f"{what} {path} exists and is not a directory"
        if not directory and path.is_dir():
            return f"{what} {path} is a directory: give a file path"
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"{what} {path}: {parent} is not a directory"
    except OSError as exc:
        return f"{what} {path}: cannot reach it ({exc.strerror})"
    if not os.access(parent, os.W_OK):
        return f"{what} {path}: {parent} is not writable"
    return None


def cmd_train(args: argparse.Namespace) -> int:
    from autoheur.models.artifact import MODELS_DIR
    from autoheur.models.train import train

    data = Path(args.data)
    first = Path(os.environ.get("AUTOHEUR_MODELS_DIR") or MODELS_DIR)  # where lookups look first (made if missing)
    # `--data .` or `..`: the directory's name (lexically: a link to a dataset is named as given, not by its target)
    out = Path(args.out) if args.out else first / f"{Path(os.path.abspath(data)).name}.joblib"
    why = _named_empty(("--out", args.out), ("--heldout-problems", args.heldout_problems),
                       ("--aux-problems", args.aux_problems))  # fmt: skip
    why = why or _cannot_write(out, "--out" if args.out else "the default --out")
    if why is None and out.suffix == ".json":  # the side-car's name: model and side-car would be one file
        why = f"--out {out}: .json is the model's side-car; give the model a .joblib path"
    if why is None and args.heldout_problems:
        why = _cannot_write(Path(args.heldout_problems), "--heldout-problems")
    if why:
        print(f"autoheur train: {why}", file=sys.stderr)
        return 2
    try:
        model = train(
            data, args.model, heldout_folds=args.heldout_folds, allow_stale_kernel=args.allow_stale_kernel,
            aux=args.aux or (), **({} if args.aux_rows is None else {"aux_rows": args.aux_rows or None}),
            heldout_problems=args.heldout_problems, aux_new_only=args.aux_new_only, aux_share=args.aux_share,
            rounds=args.rounds, aux_problems=args.aux_problems, pairs=args.pairs,
        )  # fmt: skip
    except (ValueError, OSError) as exc:  # OSError: a file of the dataset this user cannot read
        print(f"autoheur train: {exc}", file=sys.stderr)
        return 2
    replaced = _replaced(out)
    model.save(out)
    for row in model.meta["heldout"]:
        print(f"held-out ({row['subset']}, {row['n_problems']} problems): best-of-10 geomean "
              f"{row['eff_best10_geomean']:.4f}"
              f" P10 {row['eff_best10_p10']:.3f} min {row['eff_best10_min']:.3f}; top-1 geomean "
              f"{row['eff_top1_geomean']:.3f} P10 {row['eff_top1_p10']:.3f}; oracle in top 10 "
              f"{row['oracle_in_top10']:.1%}")  # fmt: skip
    print(f"saved {out} (fit {model.meta['fit_seconds']} s)" + (f"; it replaces {replaced}" if replaced else ""))
    if note := _lookup_note(out, model.meta):
        print(f"note: {note}")
    return 0


def _replaced(out: Path) -> str | None:
    """What a model saved at `out` writes over, said after the save (a shipped model is in git: `git restore`)."""
    if not out.exists():
        return None
    try:
        meta = json.loads(out.with_suffix(".json").read_text())
        return f"the model trained {meta['created_at']} on {meta['dataset']}"
    except (OSError, ValueError, KeyError, TypeError):  # no side-car, or not one of ours
        return f"the earlier {out.name}"


def _lookup_note(out: Path, meta: dict) -> str | None:
    """What a user must know for `predict` and the run time to take a model just saved at `out`: that its directory
    is not one the lookups search, or that another model of the same GPU there is taken first."""
    from autoheur.models.artifact import lookup_path, model_dirs

    device, family = meta.get("device", {}).get("name"), meta.get("family", "triton")
    use = (f"predict --model {out}" if family == "triton"
           else f"autoheur.inductor.enable(model=TrainedModel.load({str(out)!r}))")  # fmt: skip
    dirs = [d.resolve() for d in model_dirs() if d.is_dir()]
    if out.parent.resolve() not in dirs:
        where = " and ".join(str(d) for d in dirs) or "no directory that exists"
        return f"lookups search {where}, not {out.parent.resolve()}: use it with {use}, or put it in one of those"
    taken = lookup_path(device, family)
    if taken is not None and taken.resolve() != out.resolve():
        return (f"lookups for {device!r} take {taken}, not this model (they take the first directory searched that "
                f"has a model of the GPU, and there the one named for it, else the first by name): use this one with "
                f"{use}, or rename or move the other")  # fmt: skip
    return None


def cmd_eval(args: argparse.Namespace) -> int:
    from autoheur.models.eval_datasets import eval_datasets, model_names, write_eval_report

    models = model_names(args.models)
    aux = dict(aux_for=args.aux_for or (), aux_new_only=args.aux_new_only, aux_problems=args.aux_problems,
               fold_seed=args.fold_seed)  # fmt: skip
    why = _named_empty(("--report", args.report), ("--aux-problems", args.aux_problems))
    if why is None and args.report:
        why = _cannot_write(Path(args.report), "--report", directory=True)
    if why is None and args.report and (Path(args.report) / "report.md").exists():  # a kept record, written over
        why = f"--report {args.report} holds a report already (report.md): give a new directory, or remove it first"
    if why:
        print(f"autoheur eval: {why}", file=sys.stderr)
        return 2
    try:
        run = eval_datasets(
            args.data, models, _csv(args.splits), aux_share=args.aux_share, aux_rows=args.aux_rows, rounds=args.rounds,
            pairs=args.pairs,
            allow_stale_kernel=args.allow_stale_kernel, **aux,
        )  # fmt: skip
    except (ValueError, OSError) as exc:  # OSError: a file of a dataset this user cannot read
        print(f"autoheur eval: {exc}", file=sys.stderr)
        return 2
    cols = ["split", "subset", "model", "n_problems", "eff_best10_geomean", "eff_best10_p10", "eff_best10_min",
            "eff_top1_geomean", "eff_top1_p10", "oracle_in_top10", "ndcg10"]  # fmt: skip
    print(run.summary[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.report:
        command = "autoheur " + " ".join(sys.argv[1:])
        path = write_eval_report(run, args.report, models, data=args.data, command=command, **aux)
        print(f"report: {path}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    import time

    from autoheur.collect.shapes import problem_from_record
    from autoheur.device import INTERPRETER_NAME
    from autoheur.inference.tuner import check_settings
    from autoheur.kernels.validate import interpreting
    from autoheur.models.artifact import TrainedModel, feasible_fallback, model_for_device

    check_settings()  # as the run time: a bad AUTOHEUR_* knob refused whether or not this problem's path reads it

    fields = ("layout", "groups", "sizes", "total", "routing", "m", "n", "k", "dtype", "b_major", "a_major")
    rec = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    try:
        # refused by repr, as predict's other names are (--layout '2d3d ', --public) and an empty path (_named_empty):
        # '' was taken as not given (this host's GPU), 'h200 ' as an unknown GPU's name (no model, the fixed list)
        if args.device is not None and not args.device.strip():
            raise ValueError(f"--device {args.device!r} names no device: give one (h100, h200 or a GPU's name), or "
                             "leave --device out for this machine's GPU")  # fmt: skip
        if args.device is not None and args.device != args.device.strip():
            raise ValueError(f"--device {args.device!r} has spaces around it, which no GPU's name has: give "
                             f"{args.device.strip()!r}")  # fmt: skip
        if args.public:
            from autoheur.collect.workloads import public_problems

            if rec:  # the public problem is taken whole: a flag beside it would be silently dropped
                given = ", ".join("--" + k.replace("_", "-") for k in rec)
                raise ValueError(f"--public takes the problem whole; drop {given}, or describe the problem with the "
                                 "flags alone")  # fmt: skip
            named = {p.name: p for p in public_problems()}
            if args.public not in named:
                raise ValueError(f"--public {args.public!r}: one of {sorted(named)}")
            problem = named[args.public]
        else:
            if rec.get("layout") == "2d2d":  # the weight gradient's majors (x.t() column-major, dy row-major)
                rec = {"a_major": "m", "b_major": "n", **rec}
            problem = problem_from_record(rec, default_name="command line")
        if not problem.launches:  # as tune skips it: the run time returns the empty output before any tuning
            what = "rows" if problem.layout == "2d3d" else "columns"
            raise ValueError(
                f"{problem.layout} with no {what} (the sizes sum to 0) never launches the kernel: its output is "
                f"empty, there is no config to predict; give --sizes or --total with {what}"
            )
    except (ValueError, TypeError) as exc:
        print(f"autoheur predict: {exc}", file=sys.stderr)
        return 2
    spec = _device_spec(args.device)
    device_name = spec.name if spec is not None else args.device
    try:
        own = None
        if not (args.model or args.device) and interpreting():  # as the run-time tuner: interpreter data's model first
            own, how = model_for_device(INTERPRETER_NAME)
        if own is not None:
            model, device_name, how = own, INTERPRETER_NAME, f"in the interpreter, {how}"
        else:
            model, how = (
                (TrainedModel.load(args.model), f"model {args.model}")
                if args.model
                else model_for_device(device_name, spec=spec.to_dict() if spec is not None else None)
            )
        family = model.meta.get("family", "triton") if model is not None else "triton"
        if family != "triton":  # an Inductor-grid model ranks Inductor's template grid, not autoheur's kernel space
            raise ValueError(
                f"{args.model} is a model of the {family!r} family (torch.compile's template grid, used "
                "by autoheur.inductor.enable()); predict ranks autoheur's kernel: give a 'triton' model"
            )
    except (ValueError, FileNotFoundError, ImportError) as exc:  # ImportError: the model's library is not installed
        print(f"autoheur predict: {exc}", file=sys.stderr)
        return 2
    trained_on = model.meta["device"]["name"] if model is not None else None
    if args.model and not args.device and interpreting() and trained_on == INTERPRETER_NAME:
        device_name = INTERPRETER_NAME  # as the lookup above: in the interpreter, its data's model is this host's
    device = None  # the model's own device record
    if not args.model and model is not None and (trained_on != device_name or own is not None):
        device = {**model.device, **spec.to_dict()}  # borrowed, or the interpreter's: with this GPU's own, as the tuner
    if spec is None and model is None:
        how += f" ({device_name!r} is not this host's GPU: its architecture unknown, no model is borrowed for it)"
    if args.json and not args.model and trained_on != device_name:  # borrowed or the fixed list: said beside the JSON
        print(f"autoheur predict: {how}", file=sys.stderr)
    if args.model and trained_on != device_name:  # it ranks as on its own device: say so, not as if it were this one
        how = f"model {args.model}, trained on {trained_on}"
        print(f"autoheur predict: {args.model} was trained on {trained_on}, not {device_name}: its ranking is "
              f"{trained_on}'s (give --device '{trained_on}', or a model of {device_name})",
              file=sys.stderr)  # fmt: skip
    scorer = model.prepare_scoring() if model is not None else None  # not in predict_ms: once a process
    t0 = time.perf_counter()
    if model is None:
        # as the run-time tuner: the list's configs this problem can run on this GPU, where it is known
        listed = [c.config_id for c in feasible_fallback(problem.signature(), spec)]  # spec None: the GPU unknown
        top = [(cid, None) for cid in listed[: args.top]]
        confidence, outside = None, []
    else:
        top = [(c.config_id, s) for c, s in model.top_k(problem, args.top, device=device)]
        confidence = model.meta.get("heldout", [{}])[0].get("eff_best10_geomean") if model.meta.get("heldout") else None
        outside = model.extrapolation(problem, device)
    ms = (time.perf_counter() - t0) * 1e3
    result = {
        "problem": problem.name,
        "shape": {
            "layout": problem.layout,
            "groups": problem.groups,
            "sizes": list(problem.sizes),
            "m": problem.m,
            "n": problem.n,
            "k": problem.k,
            "dtype": problem.dtype,
            "a_major": problem.a_major,
            "b_major": problem.b_major,
        },  # fmt: skip
        "device": device_name,
        "source": how,
        "model_device": trained_on,
        "predict_ms": round(ms, 2),
        "scorer": scorer,
        "heldout_best10_geomean": confidence,
        "extrapolating": outside,
        "top": [{"config": c, "score": s} for c, s in top],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{problem.layout} {problem.dtype} groups={problem.groups} total={problem.total} m={problem.m} "
              f"n={problem.n} k={problem.k} (A {problem.a_major}-major, B {problem.b_major}-major) on {device_name}: "
              f"{how}, {ms:.2f} ms")  # fmt: skip
        if confidence is not None:
            where = "inside its training range" if not outside else "EXTRAPOLATING on " + "; ".join(outside)
            print(f"confidence: held-out best-of-10 geomean efficiency of this model {confidence:.4f}; this problem "
                  f"is {where}")  # fmt: skip
        for i, (c, s) in enumerate(top, 1):
            print(f"  {i:2d}. {c:28s} " + (f"score {s:8.3f}" if s is not None else "(fixed list)"))
        from autoheur.models.rankers import XGBRankerModel

        below = XGBRankerModel._BELOW  # how far the ranker shifts a config past its shortlist down
        if any(s is not None and s < -below / 2 for _, s in top):
            print(f"  (scores near {-below:.0f}: configs past the model's shortlist, ordered by its first trees only; "
                  f"{-3 * below:.0f}: configs no training problem had near its best, not scored)")  # fmt: skip
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from autoheur.collect.shapes import ShapesError, load_shapes
    from autoheur.collect.workloads import workload
    from autoheur.inference.tune import tune_problems

    try:
        if why := _workload_options_beside_shapes(args):
            raise ValueError(why)
        problems = load_shapes(args.shapes) if args.shapes else workload(args.workload, args.count, args.seed)
    except (ShapesError, ValueError, FileNotFoundError) as exc:
        print(f"autoheur tune: {exc}", file=sys.stderr)
        return 2
    rows, rc = [], 0
    try:
        for row in tune_problems(problems, args.top_k, args.compare_exhaustive):
            rows.append(row)
            if not args.json:
                print(_tune_line(row), flush=True)
    except ValueError as exc:  # a problem the kernel cannot run here, or a bad AUTOHEUR_* setting
        print(f"autoheur tune: {exc}", file=sys.stderr)
        rc = 2
    except RuntimeError as exc:  # no candidate of a problem compiled or ran: a failure, not a usage error
        print(f"autoheur tune: {exc}", file=sys.stderr)
        rc = 1
    if args.json:  # the problems tuned before a failure too, as the text output printed them
        print(json.dumps(rows, indent=2))
    return rc


def _tune_line(row: dict) -> str:
    if "skipped" in row:
        return f"{row['problem'][:44]:44s} skipped: {row['skipped']}"
    line = (f"{row['problem'][:44]:44s} {row['config']:28s} {row['ms']:.4f} ms  tuned in {row['tune_s']:.2f} s "
            f"({row['candidates']} candidates: {row['source']})")  # fmt: skip
    if "exhaustive_ms" in row:
        line += (f" | exhaustive {row['exhaustive_config']} {row['exhaustive_ms']:.4f} ms in "
                 f"{row['exhaustive_s']:.1f} s, efficiency {row['efficiency']:.3f}")  # fmt: skip
    return line


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count of configs)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (at least 1), got {n}")
    return n


def _int_range(lo: int, hi: int, span: str):
    """An argparse type: an integer from `lo` to `hi` - 1, refused by name (`span` says the range) outside it."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= n < hi:
            raise argparse.ArgumentTypeError(f"expected an integer from {span}, got {n}")
        return n

    return parse


# collect's and tune's --seed: 32 bits. The workloads derive their draws' seeds from it (a problem's: seed x 100003 +
# its index), which a seed of 64 bits overflows (torch's manual_seed: "Overflow when unpacking long long").
_seed = _int_range(0, 2**32, "0 to 2**32 - 1")
# A data pass's --seed, the one its dataset's inputs were drawn with: it draws no workload, so any seed a collection
# could take (CollectOptions', torch's manual_seed's range): a dataset collected through the Python API, or by a
# `collect` before its --seed was limited to 32 bits, may hold one past 32 bits.
_inputs_seed = _int_range(-(2**63), 2**64, "-2**63 to 2**64 - 1")


def _device_spec(arg: str | None):
    """The properties of the GPU `predict` is asked about, where known: a preset's, or this host's own GPU's (by
    default, or when named); None for another GPU named (no model is borrowed for it: its architecture is unknown)."""
    from autoheur.device import PRESETS, current_device_spec

    if arg and arg.lower() in PRESETS:  # h100, H100
        return PRESETS[arg.lower()]
    here = current_device_spec()
    return here if not arg or arg == here.name else None


def _pass_options(d: argparse.ArgumentParser) -> None:
    """The options `data retime`, `refine` and `polish` share: when to stop, compile workers, the inputs' seed."""
    d.add_argument("--time-limit", type=float, help="seconds after which no new problem is started")
    d.add_argument("--workers", type=int, help="precompile processes (default: all cores)")
    d.add_argument(
        "--seed", type=_inputs_seed, default=0, help="the inputs' seed: the one the dataset was collected with"
    )
    d.add_argument("--gpus", default="1", help="GPUs on this host, one worker each over disjoint problems, or 'all'")


def _near_best_parser(dsub, kind: str, help: str, best: str, defaults: tuple, fn) -> None:
    """The parser of `data refine` or `data polish`: the same options, each pass's defaults in its help."""
    within, top, reps = defaults
    d = dsub.add_parser(kind, help=help)
    d.add_argument("path", help="a dataset directory")
    d.add_argument("--within", type=float, help=f"ok configs within this factor of {best} (default {within})")
    d.add_argument("--top", type=int, help=f"at most this many per problem, fastest first (default {top})")
    d.add_argument("--reps", type=int, help=f"interleaved rounds: timed runs per config (default {reps})")
    _pass_options(d)
    d.set_defaults(fn=fn)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="autoheur", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("selftest", help="check the kernel family against the reference on small problems")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_selftest)

    p = sub.add_parser("space", help="describe the config space and its feasible part")
    p.add_argument("--device", choices=["h100", "h200"], help="a preset (default: the current GPU, else h100)")
    p.add_argument("--layout", default="2d3d", choices=["2d3d", "3d2d", "2d2d", "3d3d"])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--no-tma", action="store_true", help="a call whose group bases are not 16-byte aligned")
    p.set_defaults(fn=cmd_space)

    p = sub.add_parser("collect", help="time the whole config space over many problems into a dataset",
                       formatter_class=_DefaultsHelp)  # fmt: skip
    src = p.add_argument_group("problems")
    src.add_argument("--workload", default="default", choices=WORKLOAD_CHOICES, action=_Given)
    src.add_argument("--count", type=int, default=400, action=_Given,
                     help="problems in the workload (public: at most its 18)")  # fmt: skip
    src.add_argument("--layouts", default="2d3d", action=_Given,
                     help="comma-separated: 2d3d,3d2d,2d2d,3d3d (the samples of the default and sampled "
                          "workloads)")  # fmt: skip
    src.add_argument("--dtypes", default="bfloat16", action=_Given,
                     help="comma-separated: bfloat16,float16,float32 (as --layouts)")  # fmt: skip
    src.add_argument("--seed", type=_seed, default=0, help="the workload, the inputs and any config sample")
    src.add_argument("--shapes", help="collect exactly the problems of this .jsonl or .csv file instead")
    src.add_argument("--dry-run", action="store_true",
                     help="list the problems the run (of this --shard) collects, each once, and their roofline times; "
                     "collect none. Those already in --out are listed too")  # fmt: skip
    src.add_argument("--skip", metavar="PATH",
                     help="leave out the problems already in PATH: a dataset directory, or a file of problem ids "
                          "(`autoheur data ids DATASET > FILE`), to go on with a list on a machine without the "
                          "dataset. With --family inductor a problem is also matched by the problem Inductor times "
                          "for it (its offsets split evenly), which is what an Inductor dataset holds")  # fmt: skip
    src.add_argument("--only", metavar="PATH",
                     help="keep only the problems in PATH (as --skip reads and matches it; both may be given), e.g. "
                          "another GPU's dataset, to collect the problems of a list that it has")  # fmt: skip
    run = p.add_argument_group("run")
    run.add_argument("--out", help="dataset directory (default: data/<device-slug>)")
    run.add_argument("--new-dataset", action="store_true", help="move an existing dataset at --out aside, start anew")
    run.add_argument("--gpus", default="1", help="GPUs on this host, one worker each, or 'all'")
    run.add_argument("--shard", default="0/1", help="i/N: this machine's share of the problems")
    run.add_argument("--time-limit", type=float, help="seconds after which no new problem is started")
    run.add_argument("--workers", type=int, help="precompile processes (default: all cores)")
    run.add_argument("--family", default="triton", choices=["triton", "inductor"],
                     help="triton: autoheur's kernel over its whole space; inductor: Inductor's own grouped_mm "
                          "template over its grid, timed by Inductor's max-autotune (default dataset: "
                          "data/inductor-<device-slug>)")  # fmt: skip
    tm = p.add_argument_group("timing")
    tm.add_argument("--reps", type=int, default=5, help="timed runs per config that survives the first round")
    tm.add_argument("--abort-factor", type=float, help="censor configs this much slower than the best (default: 2)")
    tm.add_argument(
        "--configs", help="comma-separated config ids: time only these (where feasible); a trial, as --sample-configs"
    )
    tm.add_argument("--sample-configs", type=int,
                    help="time a fixed random sample of this many feasible configs (each compile key its own "
                         "sample): a trial. Its dataset records the sample, and a collection of the whole space (or "
                         "of another subset) into it is refused: give a trial an --out of its own")  # fmt: skip
    p.set_defaults(fn=cmd_collect)

    p = sub.add_parser("data", help="inspect and combine datasets")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    d = dsub.add_parser("info", help="rows, problems, devices, coverage and timing spread")
    d.add_argument("path", nargs="?", default="data", help="a dataset directory, or a folder of them")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_data_info)
    d = dsub.add_parser("ids", help="the dataset's finished problem ids, one per line (for collect --skip)")
    d.add_argument("path", help="a dataset directory")
    d.set_defaults(fn=cmd_data_ids)
    d = dsub.add_parser("merge", help="copy datasets of one device into one (refuses mismatches)")
    d.add_argument("sources", nargs="+")
    d.add_argument("--into", required=True)
    d.add_argument(
        "--finished",
        action="store_true",
        help="copy only the problems whose refine and polish passes are done (merge the rest after them)",
    )
    d.set_defaults(fn=cmd_data_merge)
    d = dsub.add_parser("retime", help="measure again the configs whose runs disagreed (GPU; resumable)")
    d.add_argument("path", help="a dataset directory")
    d.add_argument(
        "--spread-above", type=float, default=0.25, help="retime ok configs whose spread exceeds this (round 3's rule)"
    )
    d.add_argument("--reps", type=int, default=5, help="timed runs per config")
    _pass_options(d)
    d.set_defaults(fn=cmd_data_retime)
    # defaults in passes.REFINE_* / POLISH_*, not imported here (it imports torch); tests/collect/test_passes.py
    # checks that the help states them
    _near_best_parser(dsub, "refine", "measure each problem's near-best configs again, precisely (GPU; resumable)",
                      "the best", (1.15, 48, 20), cmd_data_refine)  # fmt: skip
    _near_best_parser(dsub, "polish", "measure the near-tied front again after the refine, to more rounds (GPU)",
                      "the refined best", (1.04, 16, 48), cmd_data_polish)  # fmt: skip
    d = dsub.add_parser("pack", help="move a finished collection's per-problem files (parts, retimes) into pack files")
    d.add_argument("path", help="a dataset directory")
    d.set_defaults(fn=cmd_data_pack)

    p = sub.add_parser("train", help="fit a ranker on a dataset and save it with its held-out figures")
    p.add_argument("--data", required=True, help="a dataset directory, e.g. data/nvidia-h100-80gb-hbm3")
    p.add_argument("--model", default="xgb_ranker", help="xgb_ranker (default), xgb_regressor, nearest, fixed_list ...")
    p.add_argument("--out", help="model file (default: <dataset dir name>.joblib in $AUTOHEUR_MODELS_DIR if set, "
                                 "else in the checkout's models/: where predict and the run time look)")  # fmt: skip
    p.add_argument("--heldout-folds", type=int, default=5, help="folds for the held-out figures (0: none)")
    p.add_argument("--heldout-problems", metavar="CSV",
                   help="also write each problem's held-out figures to this CSV (e.g. to name the problems behind "
                        "the min)")  # fmt: skip
    p.add_argument("--aux", action="append", metavar="DATA",
                   help="another device's dataset to train on as well, as queries of its own (repeatable; the "
                        "held-out folds leave out its rows of their test problems)")  # fmt: skip
    p.add_argument("--aux-rows", type=int, metavar="N",
                   help="rows an auxiliary problem keeps as it loads, its fastest N/4 and a sample of the rest "
                        "(default 512: models.data.AUX_ROWS; 0: every row, ~16 GB for the H100 set)")  # fmt: skip
    p.add_argument("--aux-new-only", action="store_true",
                   help="keep only the auxiliary problems this dataset lacks (not another device's copies of its "
                        "own problems)")  # fmt: skip
    p.add_argument("--aux-share", type=float, metavar="S",
                   help="an auxiliary problem's share of the training rows a fit samples per problem, in (0, 1] "
                        "(xgb_ranker; default 1: as many as an own problem's; 0.5 fits faster)")  # fmt: skip
    p.add_argument("--aux-problems", metavar="FILE",
                   help="keep only the auxiliary problems this file lists, one id a line (`autoheur data ids`), each "
                        "of which the auxiliary data must hold: a model's borrowed problems pinned as that data "
                        "grows")  # fmt: skip
    p.add_argument("--rounds", metavar="TREESxSTEP",
                   help="the boosted model's trees and step (learning rate), e.g. 350x0.13, the shipped H100 model's "
                        "(fit under 2 minutes); default: the model's own, 450x0.1 for xgb_ranker")  # fmt: skip
    p.add_argument("--pairs", metavar="METHOD:COUNT",
                   help="xgb_ranker's pair construction, mean:COUNT (partners a config) or topk:COUNT (each of a "
                        "problem's COUNT best configs by the model paired with every other), e.g. topk:16; default: "
                        "mean:8 for its pairwise fits")  # fmt: skip
    p.add_argument("--allow-stale-kernel", action="store_true",
                   help="use a dataset timed on another version of the kernel source (refused by default)")  # fmt: skip
    p.set_defaults(fn=cmd_train)

    p = sub.add_parser("eval", help="every model on every split, held-out figures side by side")
    p.add_argument("--data", action="append", required=True, help="dataset directory (repeat for cross-device)")
    p.add_argument("--models", default="all", help="comma-separated ranker names, or all")
    p.add_argument("--splits", default="group_kfold,lomo,cross_device",
                   help="comma-separated: group_kfold, lomo, cross_device; or one dataset's (h200:lomo) or one pair's "
                        "('h100->h200', quoted in a shell)")  # fmt: skip
    p.add_argument("--report", help="write per-problem CSVs and a markdown report with plots here")
    p.add_argument("--aux-for", action="append", metavar="NAME",
                   help="a dataset (by its short name, e.g. h200) whose within-device splits also train on the "
                        "other --data datasets, as `autoheur train --aux` does (repeatable)")  # fmt: skip
    p.add_argument("--aux-rows", type=int, metavar="N",
                   help="rows a problem keeps as it loads, of a dataset the splits only train on as auxiliary data "
                        "(e.g. --data H100 --data H200 --aux-for h200 --splits h200:lomo): as `autoheur train "
                        "--aux-rows` (default 512; 0: every row, which the list and nearest baselines "
                        "need)")  # fmt: skip
    p.add_argument("--aux-new-only", action="store_true",
                   help="with --aux-for: the auxiliary data keeps only the problems that dataset lacks, as `autoheur "
                        "train --aux-new-only`")  # fmt: skip
    p.add_argument("--aux-share", type=float, metavar="S",
                   help="with --aux-for: xgb_ranker's share of training rows for an auxiliary problem, as `autoheur "
                        "train --aux-share`")  # fmt: skip
    p.add_argument("--aux-problems", metavar="FILE",
                   help="with --aux-for: the auxiliary data keeps only the problems this file lists, as `autoheur "
                        "train --aux-problems`")  # fmt: skip
    p.add_argument("--fold-seed", type=int, default=0,
                   help="the seed of group_kfold's fold hash (default 0, the draw `autoheur train` reports; "
                        "another gives the same procedure on another split of the problems)")  # fmt: skip
    p.add_argument("--rounds", metavar="TREESxSTEP",
                   help="every boosted model's trees and step (xgb_ranker, xgb_regressor), as `autoheur train "
                        "--rounds`")  # fmt: skip
    p.add_argument("--pairs", metavar="METHOD:COUNT",
                   help="xgb_ranker's pair construction, as `autoheur train --pairs`")  # fmt: skip
    p.add_argument("--allow-stale-kernel", action="store_true",
                   help="use a dataset timed on another version of the kernel source (refused by default)")  # fmt: skip
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("predict", help="the top configs for one problem")
    p.add_argument("--public", help="a public problem by name (see autoheur collect --workload public --dry-run)")
    p.add_argument("--layout", help="2d3d (default) | 2d2d | 3d2d | 3d3d")
    p.add_argument("--groups", type=int)
    p.add_argument("--sizes", help="rows per group, comma- or space-separated")
    p.add_argument("--total", type=int, help="rows over all groups (with --routing)")
    p.add_argument("--routing", help="uniform | balanced_jitter | zipf")
    p.add_argument("--m", type=int)
    p.add_argument("--n", type=int)
    p.add_argument("--k", type=int)
    p.add_argument("--dtype", help="bfloat16 (default) | float16 | float32")
    p.add_argument("--b-major", dest="b_major", choices=["k", "n"],
                   help="k: B stored [G, N, K] and used transposed (MoE weights); n: stored [.., K, N] (the "
                        "backward's dA reads W so, the weight gradient its dy). Default: n for 2d2d (the weight "
                        "gradient's), else k")  # fmt: skip
    p.add_argument(
        "--a-major",
        dest="a_major",
        choices=["k", "m"],
        help="k: A row-major; m: column-major (the weight gradient's x.t()). Default: m for 2d2d, else k",
    )
    p.add_argument("--device", help="h100, h200, or a device name (default: this machine's GPU, else H100)")
    p.add_argument("--model", help="a model file (default: the shipped model of the device)")
    p.add_argument("--top", type=_positive_int, default=10,
                   help="how many configs to list (default 10; past the model's shortlist scores read about -10000 "
                        "or -30000, their order coarse)")  # fmt: skip
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_predict)

    p = sub.add_parser("tune", help="run-time tuning (predicted top-k) over a problem list, vs exhaustive")
    p.add_argument("--workload", default="public", choices=WORKLOAD_CHOICES, action=_Given)
    p.add_argument("--count", type=int, default=18, action=_Given)
    p.add_argument("--seed", type=_seed, default=0, help="the workload's draw", action=_Given)
    p.add_argument("--shapes", help="a .jsonl or .csv problem file (see autoheur collect --shapes)")
    p.add_argument("--top-k", type=_positive_int, default=10, help="predicted configs timed per problem (default 10)")
    p.add_argument("--compare-exhaustive", action="store_true", help="also time every feasible config")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_tune)
    return ap


def main(argv: list[str] | None = None) -> int:
    from autoheur import SettingError

    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except SettingError as exc:  # an AUTOHEUR_* knob read wherever it is used (some at import): one line, no traceback
        print(f"autoheur {args.cmd}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `autoheur data info ... | head`: the reader left; no traceback for it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's own flush at exit finds nowhere to fail
        return 0


if __name__ == "__main__":
    sys.exit(main())
