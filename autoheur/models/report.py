"""The evaluation report: one markdown file (`report.md`) with PNG plots beside it, for `autoheur eval --report DIR`.

Made to be looked at: per split, a table of the models' summary figures, then CDFs of best-of-10 and top-1 efficiency
over problems, the default model's worst problems, and its efficiency by family; then feature importances and what
tuning costs. matplotlib is optional (the `report` extra): without it the report is tables only and says so.

Robust by design: a missing column skips the piece that needs it with a note in the report, an empty frame is a note,
and a plot that fails becomes a note; `write_report` only raises if the file cannot be written. A report written over
an earlier one removes the earlier one's plots that it did not draw again (e.g. run without matplotlib), so no plot of
another run is left beside its tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DEFAULT_MODEL = "xgb_ranker"
PLOTS_SKIPPED = (
    '_Plots skipped: matplotlib is not installed. Install it with `pip install -e ".[report]"` '
    "(or `pip install matplotlib`) and run again to get them._"
)

BEST10_XMIN = 0.8  # the best-of-10 CDF shows efficiencies 0.8..1.0, lower values drawn at 0.8
TOP1_XMIN = 0.5  # top-1 picks spread further, so its CDF starts lower
WORST_N = 30  # problems in the worst-problems bar chart
NAME_LEN = 40  # problem names are cut to this many characters in plot labels
TOP_FEATURES = 20  # features per importance plot

# Summary table columns: (summary column, header, decimals, as percent).
SUMMARY_COLUMNS = (
    ("n_problems", "problems", None, False),
    ("eff_best10_geomean", "best-of-10 geomean", 4, False),
    ("eff_best10_p10", "best-of-10 P10", 3, False),
    ("eff_best10_min", "best-of-10 min", 3, False),
    ("eff_top1_geomean", "top-1 geomean", 3, False),
    ("eff_top1_p10", "top-1 P10", 3, False),
    ("oracle_in_top10", "oracle in top-10", 1, True),
    ("ndcg10", "NDCG@10", 3, False),
    ("kendall_tau", "Kendall τ", 3, False),
)


def write_report(
    per_problem: pd.DataFrame | None,
    summary: pd.DataFrame | None,
    out_dir: str | Path,
    *,
    title: str,
    meta: Mapping[str, Any] | None,
    importances: Mapping[str, Mapping[str, float]] | None = None,
    tuning_cost: pd.DataFrame | None = None,
    models: Sequence[str] | None = None,
    importance_note: str | None = None,
) -> Path:
    """Write `report.md` and its PNGs into `out_dir` (created if needed); return the path of `report.md`.

    per_problem: one row per (split, fold, model, problem), the columns of `metrics.evaluate` plus split, fold, model,
        problem_name, family, device. summary: one row per (split, subset, model) with `metrics.summarize` figures.
    meta: shown as a table at the top; its "method" entry is the "How measured" paragraph instead.
    importances: model -> feature -> gain; the top 20 of each model are plotted. importance_note: what model and data
        they are of, printed under the section's heading.
    tuning_cost: rows of method, configs, est_seconds (all NaN: not shown, the estimate does not apply) and an
        optional note; its attrs["basis"], the estimate's assumptions in words, is printed under the table.
    models: the order of models in tables and legends (models not named follow in order of appearance); its first
        entry is the default model, drawn in bold. Without it: order of appearance, and the default is "xgb_ranker"
        when present, else the first model seen.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    earlier = _plots_of(out / "report.md")
    pp = per_problem if isinstance(per_problem, pd.DataFrame) else pd.DataFrame()
    sm = summary if isinstance(summary, pd.DataFrame) else pd.DataFrame()
    plt = _pyplot()
    ctx = _Context(out=out, plt=plt, models=_model_order(pp, sm, models))
    ctx.default = (models[0] if models else None) or (
        DEFAULT_MODEL if DEFAULT_MODEL in ctx.models else (ctx.models[0] if ctx.models else None)
    )

    lines: list[str] = [f"# {_cell(title) or 'Evaluation report'}", ""]
    lines += _meta_section(meta or {})
    if plt is None:
        lines += [PLOTS_SKIPPED, ""]
    if ctx.default is not None:
        lines += [f"Default model: **{_cell(ctx.default)}** (bold in tables, thick line in plots).", ""]

    splits = _splits(pp, sm)
    if not splits:
        lines += ["_No evaluation results: the per-problem and summary frames are empty._", ""]
    for split in splits:
        lines += _guard(f"split {split}", lambda split=split: _split_section(ctx, pp, sm, split))

    lines += _guard("feature importances", lambda: _importance_section(ctx, importances, importance_note))
    lines += _guard("tuning cost", lambda: _tuning_section(tuning_cost))

    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    for name in earlier - ctx.used_names:  # an earlier report's plots that this one did not draw again
        (out / name).unlink(missing_ok=True)
    return path


def _plots_of(report: Path) -> set[str]:
    """The PNGs a report in `report` links to (written beside it): the files a new report there replaces. Only those:
    other files in the directory are never touched."""
    try:
        text = report.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return {n for n in re.findall(r"!\[[^\]]*\]\(([^)/\\]+\.png)\)", text) if not n.startswith(".")}


class _Context:
    def __init__(self, out: Path, plt: Any, models: list[str]):
        self.out = out
        self.plt = plt
        self.models = models
        self.default: str | None = None
        self.used_names: set[str] = set()

    def png_name(self, stem: str) -> str:
        """A file name not used yet in this report."""
        base = _slug(stem)
        name, i = f"{base}.png", 2
        while name in self.used_names:
            name, i = f"{base}-{i}.png", i + 1
        self.used_names.add(name)
        return name

    def color(self, model: str) -> Any:
        if model == "random":
            return "0.55"
        i = self.models.index(model) if model in self.models else len(self.models)
        return self.plt.get_cmap("tab10")(i % 10)


# ---------------------------------------------------------------------------------------------------------- helpers


def _pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend, or None when matplotlib cannot be imported."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _guard(what: str, make) -> list[str]:
    """The lines `make()` returns, or a note when it raised: one broken piece must not lose the whole report."""
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - the report is best effort by design
        return [f"_Skipped {what}: {type(e).__name__}: {_cell(str(e))}_", ""]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(s)).strip("-").lower() or "x"


def _cell(v: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def _is_missing(v: Any) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _fmt(v: Any, decimals: int | None, percent: bool = False) -> str:
    if _is_missing(v):
        return "n/a"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return _cell(v)
    if percent:
        return f"{100 * x:.{decimals or 1}f}%"
    if decimals is None:
        return str(int(x)) if x == int(x) else f"{x:.3f}"
    return f"{x:.{decimals}f}"


def _seconds(s: Any) -> str:
    if _is_missing(s):
        return "n/a"
    s = float(s)
    if s < 120:
        return f"{s:.1f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], bold: Sequence[bool] | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for i, row in enumerate(rows):
        cells = [f"**{c}**" if bold and bold[i] and c else c for c in row]
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def _ordered_unique(values) -> list:
    return list(dict.fromkeys(v for v in values if not _is_missing(v)))


def _model_order(pp: pd.DataFrame, sm: pd.DataFrame, models: Sequence[str] | None) -> list[str]:
    seen = list(models or [])
    for df in (sm, pp):
        if "model" in df.columns:
            seen += [str(m) for m in _ordered_unique(df["model"])]
    return list(dict.fromkeys(seen))


def _splits(pp: pd.DataFrame, sm: pd.DataFrame) -> list[str]:
    seen: list[str] = []
    for df in (sm, pp):
        if "split" in df.columns:
            seen += [str(s) for s in _ordered_unique(df["split"])]
    return list(dict.fromkeys(seen))


def _rows_of(df: pd.DataFrame, split: str) -> pd.DataFrame:
    if df.empty or "split" not in df.columns:
        return df.iloc[0:0]
    return df[df["split"].astype(str) == split]


def _missing(df: pd.DataFrame, cols: Sequence[str]) -> list[str]:
    return [c for c in cols if c not in df.columns]


def _values(df: pd.DataFrame, col: str) -> np.ndarray:
    v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
    return v[np.isfinite(v)]


def _save(ctx: _Context, fig, stem: str, alt: str) -> list[str]:
    name = ctx.png_name(stem)
    fig.savefig(ctx.out / name, dpi=110, bbox_inches="tight")
    ctx.plt.close(fig)
    return [f"![{alt}]({name})", ""]


def _plot(ctx: _Context, what: str, make) -> list[str]:
    """Lines of a plot, closing any figure left open when it failed."""
    if ctx.plt is None:
        return []
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - a failed plot is a note, not a lost report
        ctx.plt.close("all")
        return [f"_Plot skipped ({what}): {type(e).__name__}: {_cell(str(e))}_", ""]


# ---------------------------------------------------------------------------------------------------------- sections


def _meta_section(meta: Mapping[str, Any]) -> list[str]:
    rows = [[_cell(k), _cell(v)] for k, v in meta.items() if k != "method"]
    lines = _table(["", "value"], rows) if rows else ["_No run metadata given._", ""]
    method = str(meta.get("method", "") or "").strip()
    lines += ["## How measured", "", method or "_Not described._", ""]
    return lines


def _split_section(ctx: _Context, pp_all: pd.DataFrame, sm_all: pd.DataFrame, split: str) -> list[str]:
    pp = _rows_of(pp_all, split)
    sm = _rows_of(sm_all, split)
    lines = [f"## Split: {_cell(split)}", ""]
    if not pp.empty:
        parts = []
        if "fold" in pp.columns:
            parts.append(f"{pp['fold'].nunique()} fold(s)")
        if "problem_id" in pp.columns:
            parts.append(f"{pp['problem_id'].nunique()} problems")
        if "model" in pp.columns:
            parts.append(f"{pp['model'].nunique()} models")
        if parts:
            lines += [", ".join(parts) + ".", ""]
    lines += _guard("at-a-glance line", lambda: _glance(ctx, pp))
    lines += _guard("summary tables", lambda: _summary_tables(ctx, sm))
    lines += _guard("same-figures note", lambda: _same_note(ctx, pp))
    lines += _guard("plots", lambda: _split_plots(ctx, pp, split))
    return lines


def _same_curves(ctx: _Context, pp: pd.DataFrame, col: str) -> dict[str, str]:
    """model -> the earlier model (in ctx.models order) whose `col` values are the same on every problem of the split:
    one CDF line would hide the other."""
    if pp.empty or _missing(pp, ["model", col]):
        return {}
    key = [c for c in ("fold", "problem_id") if c in pp.columns]
    if not key:
        return {}
    curves: dict[str, pd.Series] = {}
    for model in ctx.models:
        d = pp[pp["model"].astype(str) == model]
        if not d.empty:
            curves[model] = pd.to_numeric(d[col], errors="coerce").set_axis(
                pd.MultiIndex.from_frame(d[key].astype(str))
            )
    same = {}
    for i, model in enumerate(curves):
        for earlier in list(curves)[:i]:
            a, b = curves[model].sort_index(), curves[earlier].sort_index()
            if earlier not in same and a.index.equals(b.index) and a.equals(b):
                same[model] = earlier
                break
    return same


def _same_note(ctx: _Context, pp: pd.DataFrame) -> list[str]:
    """A line for each pair of models whose top-1 or best-of-10 figures are the same on every problem."""
    lines = []
    for col, label in (("eff_best10", "best-of-10"), ("eff_top1", "top-1")):
        for model, earlier in _same_curves(ctx, pp, col).items():
            why = ""
            if col == "eff_top1" and {model, earlier} == {"fixed_list", "fixed_best"}:
                why = (
                    " by construction where every config is a row of every problem: the greedy list's first pick is "
                    "then the config of the best geomean efficiency, fixed_best's own"
                )
            drawn = f"; in the {label} CDF its line is drawn dotted over {_cell(earlier)}'s" if ctx.plt else ""
            lines += [f"_{_cell(model)}'s {label} figures are {_cell(earlier)}'s on every problem{why}{drawn}._", ""]
    return lines


def _glance(ctx: _Context, pp: pd.DataFrame) -> list[str]:
    """One sentence on the default model's best-of-10 efficiency: the median, the share near the oracle, the worst."""
    if pp.empty or ctx.default is None or _missing(pp, ["model", "eff_best10"]):
        return []
    d = pp[pp["model"].astype(str) == ctx.default]
    eff = pd.to_numeric(d["eff_best10"], errors="coerce")
    ok = eff.notna()
    if not ok.any():
        return []
    v = eff[ok].to_numpy()
    worst = eff[ok].idxmin()
    name_col = "problem_name" if "problem_name" in d.columns else "problem_id" if "problem_id" in d.columns else None
    worst_txt = f" ({_cell(d.loc[worst, name_col])})" if name_col else ""
    return [
        f"At a glance, **{_cell(ctx.default)}** best-of-10: median {np.median(v):.4f}, "
        f"{np.mean(v >= 0.99):.0%} of {len(v)} problems within 1% of the oracle, {np.mean(v >= 0.95):.0%} within 5%, "
        f"worst {v.min():.3f}{worst_txt}.",
        "",
    ]


def _summary_tables(ctx: _Context, sm: pd.DataFrame) -> list[str]:
    if sm.empty:
        return ["_No summary rows for this split._", ""]
    if "model" not in sm.columns:
        return ["_Summary tables skipped: the summary has no `model` column._", ""]
    cols = [c for c in SUMMARY_COLUMNS if c[0] in sm.columns]
    lines: list[str] = []
    absent = [c[0] for c in SUMMARY_COLUMNS if c[0] not in sm.columns]
    if absent:
        lines += [f"_Not in the summary, left out: {', '.join(f'`{c}`' for c in absent)}._", ""]
    if "subset" in sm.columns:
        subsets = [str(s) for s in _ordered_unique(sm["subset"])]
        subsets = (["all"] if "all" in subsets else []) + [s for s in subsets if s != "all"]
    else:
        subsets = [None]
    order = {m: i for i, m in enumerate(ctx.models)}
    for subset in subsets:
        rows = sm if subset is None else sm[sm["subset"].astype(str) == subset]
        rows = rows.assign(_o=rows["model"].astype(str).map(order)).sort_values("_o", kind="stable")
        if subset is not None and "n_problems" in rows.columns and (pd.to_numeric(rows["n_problems"]) == 0).all():
            lines += [f"**Subset: {_cell(subset)}**: 0 problems (none of this split's problems is in it).", ""]
            continue
        if subset is not None:
            lines += [f"**Subset: {_cell(subset)}**", ""]
        body = [[_cell(r["model"])] + [_fmt(r[c], d, p) for c, _, d, p in cols] for _, r in rows.iterrows()]
        bold = [str(m) == ctx.default for m in rows["model"]]
        lines += _table(["model"] + [h for _, h, _, _ in cols], body, bold)
    return lines


def _split_plots(ctx: _Context, pp: pd.DataFrame, split: str) -> list[str]:
    if ctx.plt is None:
        return []
    if pp.empty:
        return ["_No per-problem rows for this split: no plots._", ""]
    if "model" not in pp.columns:
        return ["_Plots skipped: the per-problem frame has no `model` column._", ""]
    lines: list[str] = []
    for col, label, xmin in (("eff_best10", "best-of-10", BEST10_XMIN), ("eff_top1", "top-1", TOP1_XMIN)):
        if col not in pp.columns:
            lines += [f"_CDF of {label} efficiency skipped: no `{col}` column._", ""]
            continue
        lines += _plot(ctx, f"{label} CDF", lambda c=col, lb=label, x=xmin: _cdf_plot(ctx, pp, split, c, lb, x))
    if ctx.default is None:
        return lines
    d = pp[pp["model"].astype(str) == ctx.default]
    if d.empty:
        return lines + [f"_No per-problem rows of {_cell(ctx.default)} in this split: no per-problem plots._", ""]
    if "eff_best10" not in d.columns:
        return lines + ["_Per-problem plots skipped: no `eff_best10` column._", ""]
    lines += _plot(ctx, "worst problems", lambda: _worst_plot(ctx, d, split))
    if "family" in d.columns:
        lines += _plot(ctx, "by family", lambda: _family_plot(ctx, d, split))
    else:
        lines += ["_Efficiency by family skipped: no `family` column._", ""]
    return lines


def _cdf_plot(ctx: _Context, pp: pd.DataFrame, split: str, col: str, label: str, xmin: float) -> list[str]:
    plt = ctx.plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = 0
    same = _same_curves(ctx, pp, col)  # a line the same as an earlier one: dotted on top of it, and said so
    for model in ctx.models:
        v = _values(pp[pp["model"].astype(str) == model], col)
        if not len(v):
            continue
        x = np.sort(np.clip(v, xmin, 1.0))
        y = np.arange(1, len(x) + 1) / len(x)
        is_default = model == ctx.default
        ax.step(
            np.r_[xmin, x, 1.0],
            np.r_[0.0, y, 1.0],
            where="post",
            color=ctx.color(model),
            lw=2.6 if is_default else 1.3,
            ls=":" if model in same else "-" if is_default or model.startswith("xgb") else "--",
            label=f"{model} (n={len(v)})" + (f", the same as {same[model]}" if model in same else ""),
            zorder=4 if model in same else 3 if is_default else 2,
        )
        drawn += 1
    if not drawn:
        plt.close(fig)
        return [f"_CDF of {label} efficiency skipped: no finite `{col}` values._", ""]
    ax.set_xlim(xmin, 1.0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"{label} efficiency (oracle time / picked time; values below {xmin} drawn at {xmin})")
    ax.set_ylabel("fraction of problems at or below")
    ax.set_title(f"{split}: {label} efficiency, CDF over problems (further right and lower is better)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return _save(ctx, fig, f"{split}-cdf-{col}", f"{split}: CDF of {label} efficiency")


def _worst_plot(ctx: _Context, d: pd.DataFrame, split: str) -> list[str]:
    plt = ctx.plt
    d = d.assign(_b10=pd.to_numeric(d["eff_best10"], errors="coerce"))
    d = d[d["_b10"].notna()]
    if d.empty:
        return ["_Worst-problems plot skipped: no finite `eff_best10` values._", ""]
    has_top1 = "eff_top1" in d.columns
    if has_top1:
        d = d.assign(_t1=pd.to_numeric(d["eff_top1"], errors="coerce"))
    worst = d.sort_values(["_b10", "_t1"] if has_top1 else ["_b10"], kind="stable").head(WORST_N)
    name_col = (
        "problem_name" if "problem_name" in worst.columns else "problem_id" if "problem_id" in worst.columns else None
    )
    names = [str(n) for n in worst[name_col]] if name_col else [str(i) for i in worst.index]
    names = [n if len(n) <= NAME_LEN else n[: NAME_LEN - 1] + "…" for n in names]
    if "fold" in worst.columns and len(set(names)) < len(names):
        names = [f"{n} [{f}]" for n, f in zip(names, worst["fold"], strict=True)]
    n = len(worst)
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.28 * n))
    y = np.arange(n)
    h = 0.4 if has_top1 else 0.7
    b10 = worst["_b10"].to_numpy(dtype=float)
    ax.barh(y - (h / 2 if has_top1 else 0), b10, height=h, color="tab:blue", label="best-of-10")
    for yi, v in zip(y - (h / 2 if has_top1 else 0), b10, strict=True):  # the value, inside the bar's end
        ax.text(
            max(v - 0.01, 0.01),
            yi,
            f"{v:.3f}",
            va="center",
            ha="right" if v > 0.1 else "left",
            fontsize=6,
            color="white" if v > 0.1 else "black",
        )
    if has_top1:
        ax.barh(y + h / 2, worst["_t1"].fillna(0), height=h, color="tab:orange", label="top-1")
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()  # the worst on top
    ax.set_xlim(0, 1.0)
    ax.axvline(0.95, color="0.4", lw=0.8, ls=":")
    ax.set_xlabel("efficiency (oracle time / picked time)")
    ax.set_title(f"{split}: {ctx.default}, the {n} worst of {len(d)} problems by best-of-10")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return _save(ctx, fig, f"{split}-worst-{ctx.default}", f"{split}: worst problems of {ctx.default}")


def _family_plot(ctx: _Context, d: pd.DataFrame, split: str) -> list[str]:
    plt = ctx.plt
    d = d.assign(_b10=pd.to_numeric(d["eff_best10"], errors="coerce"), _fam=d["family"].fillna("(none)").astype(str))
    d = d[d["_b10"].notna()]
    if d.empty:
        return ["_Efficiency by family skipped: no finite `eff_best10` values._", ""]
    groups = {f: g["_b10"].to_numpy() for f, g in d.groupby("_fam", sort=False)}
    fams = sorted(groups, key=lambda f: (np.median(groups[f]), f))  # worst median on top
    data = [groups[f] for f in fams]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.4 * len(fams)))
    pos = np.arange(1, len(fams) + 1)
    try:  # matplotlib >= 3.10 (vert= is deprecated from 3.11)
        ax.boxplot(data, positions=pos, orientation="horizontal", widths=0.6, showfliers=False)
    except TypeError:
        ax.boxplot(data, positions=pos, vert=False, widths=0.6, showfliers=False)
    rng = np.random.default_rng(0)
    for p, v in zip(pos, data, strict=True):
        ax.scatter(v, p + rng.uniform(-0.15, 0.15, len(v)), s=8, alpha=0.5, color="tab:blue", zorder=3)
    ax.set_yticks(pos)
    ax.set_yticklabels([f"{f} (n={len(groups[f])})" for f in fams], fontsize=8)
    ax.invert_yaxis()
    lo = min(BEST10_XMIN, float(np.min(d["_b10"])))
    ax.set_xlim(max(0.0, lo - 0.02), 1.005)
    ax.set_xlabel("best-of-10 efficiency")
    ax.set_title(f"{split}: {ctx.default}, best-of-10 efficiency by family")
    ax.grid(axis="x", alpha=0.3)
    return _save(ctx, fig, f"{split}-family-{ctx.default}", f"{split}: best-of-10 efficiency by family")


def _importance_section(
    ctx: _Context, importances: Mapping[str, Mapping[str, float]] | None, note: str | None = None
) -> list[str]:
    if importances is None:
        return []
    lines = ["## Feature importances", ""]
    if note:
        lines += [note.strip(), ""]
    if not importances:
        return lines + ["_No feature importances given._", ""]
    for model, imp in importances.items():
        s = pd.to_numeric(pd.Series(dict(imp or {}), dtype=object), errors="coerce").dropna()
        if s.empty:
            lines += [f"_{_cell(model)}: no importances._", ""]
            continue
        n_features = len(s)
        top = s.sort_values(ascending=False, kind="stable").head(TOP_FEATURES)
        share = top / s.sum() if s.sum() > 0 else top * np.nan
        if ctx.plt is None:
            lines += [f"**{_cell(model)}** (top {len(top)} of {len(s)} features by gain)", ""]
            rows = [[_cell(f), _fmt(v, 3), _fmt(sh, 1, True)] for f, v, sh in zip(top.index, top, share, strict=True)]
            lines += _table(["feature", "gain", "share"], rows)
        else:
            lines += _plot(
                ctx, f"importances of {model}", lambda m=model, t=top, n=n_features: _importance_plot(ctx, m, t, n)
            )
    return lines


def _importance_plot(ctx: _Context, model: str, top: pd.Series, n_features: int) -> list[str]:
    plt = ctx.plt
    fig, ax = plt.subplots(figsize=(7.5, 1.0 + 0.3 * len(top)))
    y = np.arange(len(top))
    ax.barh(y, top.to_numpy(dtype=float), color=ctx.color(model))
    ax.set_yticks(y)
    ax.set_yticklabels([str(f) for f in top.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("gain")
    ax.set_title(f"{model}: top {len(top)} of {n_features} features by gain")
    ax.grid(axis="x", alpha=0.3)
    return _save(ctx, fig, f"importance-{model}", f"feature importances of {model}")


def _tuning_section(tuning_cost: pd.DataFrame | None) -> list[str]:
    if tuning_cost is None:
        return []
    lines = ["## Tuning cost", ""]
    if not isinstance(tuning_cost, pd.DataFrame) or tuning_cost.empty:
        return lines + ["_No tuning cost rows._", ""]
    absent = _missing(tuning_cost, ["method", "configs", "est_seconds"])
    if absent:
        return lines + [f"_Tuning cost table skipped: missing {', '.join(f'`{c}`' for c in absent)}._", ""]
    has_note = "note" in tuning_cost.columns
    seconds = not pd.to_numeric(tuning_cost["est_seconds"], errors="coerce").isna().all()  # else: does not apply
    rows = []
    for _, r in tuning_cost.iterrows():
        row = [_cell(r["method"]), _count(r["configs"])]
        if seconds:
            row += [_fmt(r["est_seconds"], 1), _seconds(r["est_seconds"])]
        if has_note:
            row.append("" if _is_missing(r["note"]) else _cell(r["note"]))
        rows.append(row)
    header = ["method", "configs"] + (["est. seconds", "est. time"] if seconds else []) + (["note"] if has_note else [])
    basis = str(tuning_cost.attrs.get("basis", "") or "").strip()
    return lines + _table(header, rows) + ([basis, ""] if basis else [])


def _count(v: Any) -> str:
    """A count of configs: whole, or a mean of counts to one decimal (never 52.171 configs)."""
    if _is_missing(v):
        return "n/a"
    x = float(v)
    return str(int(x)) if x == int(x) else f"{x:.1f}"


__all__ = ["write_report", "PLOTS_SKIPPED", "DEFAULT_MODEL"]
