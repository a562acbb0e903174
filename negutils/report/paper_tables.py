"""The papers' tables beside ours (chapter 06): which of our methods answers which paper row,
our numbers in the papers' (benchmark, metric) vocabulary, and one row-by-column table per paper
table with a line per source (the paper, the organism, a real backbone when the ``gpu`` profile
has run)."""
from __future__ import annotations

import re

import pandas as pd

from ..core.results import RESULT_KEY, read_results
from ..methods.registry import METHODS, method_label, negfull_label
from .papers import paper_numbers

NEGFULL = "NegFull (best alpha)"  # the negbench-protocol NegFull alpha chosen on held-out negtrain NegMCQ

# paper row label -> our method (by registered id) on the same backbone. Rows naming other models (NegCLIP, DCSM,
# SigLIP, ...) are absent: nothing in the book runs them. KTN Table 3 is SigLIP2's ablation; its
# three steps (raw, projection, projection + rejection) are the ones chapter 04 runs.
ROW_METHOD = {row: (method_label(m) if m in METHODS else m) for row, m in {
    "CLIP": "vanilla", "CLIP (baseline)": "vanilla", "CLIP ViT-B/32": "vanilla",
    "CLIP (ViT-B/32 LAION-2B)": "vanilla", "Holistic (CLIP)": "vanilla", "SigLIP2 (raw)": "vanilla",
    "PeakPatch": "peakpatch_joint", "PeakPatch (joint)": "peakpatch_joint", "Hybrid": "peakpatch_joint",
    "PeakPatch (COCO in-domain)": "peakpatch_joint", "PeakPatch (w/o COCO)": "peakpatch_joint",
    "PeakPatch ViT-B/32": "peakpatch_joint",
    "ECN only": "ecn_only", "ECN": "ecn_only", "PeakPatch (ECN)": "ecn_only",
    "SCN only": "scn_only", "SCN": "scn_only", "w/o anchor": "no_anchor", "Detached SCN": "detached",
    "CLIP + NF": NEGFULL, "CLIP + NF (w/o COCO)": NEGFULL, "CLIP-NegFull": NEGFULL, "CLIP* (NegBench)": NEGFULL,
    "Holistic (CLIP-NegFull)": NEGFULL, "NegFull alpha=0": negfull_label(0), "NegFull alpha=1": negfull_label(1),
    "EC (ViT-B/32)": "ec", "KTN (ViT-B/32)": "ktn", "+ Proj (Dim 1)": "ktn_projection",
    "+ Ours (Dim 1+2)": "ktn", "LCSE (CLIP)": "lcse",
}.items()}

# The backbones the papers name, as the open_clip config names that are that backbone (any image size or
# activation variant). A paper row is the book's default, CLIP ViT-B/32, unless ``row_backbone`` finds one of
# these in it; the organism's line stands in for ViT-B/32 rows only, a real backbone's line under the rows of
# its own backbone only. Tags are not matched (a row rarely names its weights): each line is labelled by its own.
PAPER_BACKBONES = {
    "ViT-B/32": r"ViT-B-32(-quickgelu)?", "ViT-L/14": r"ViT-L-14(-336)?(-quickgelu)?",
    "ViT-H/14": r"ViT-H-14(-378)?(-quickgelu)?",
    "EVA-02 ViT-B/16": r"EVA02-B-16", "EVA-02 ViT-L/14": r"EVA02-L-14(-336)?",
    "SigLIP ViT-B/16": r"ViT-B-16-SigLIP(-256|-384|-512)?", "SigLIP2 ViT-B/32": r"ViT-B-32-SigLIP2-256",
    "SigLIP2 ViT-L/16": r"ViT-L-16-SigLIP2-(256|384|512)", "SigLIP2 So400m": r"ViT-SO400M-1[46]-SigLIP2(-\d+)?",
    "SigLIP 2": r"ViT-.+-SigLIP2(-\d+)?",     # LCSE names no size
}
DEFAULT_BACKBONE = "ViT-B/32"
# rows of other backbones: the method is the row's first word (KTN Table 2's "Vanilla (CLIP ViT-L/14)", PeakPatch
# Table 4's "PeakPatch SigLIP ViT-B/16", LCSE's "LCSE (SigLIP 2) (other backbone)")
BACKBONE_ROW_METHOD = {"Vanilla": "vanilla", "CLIP": "vanilla", "SigLIP": "vanilla", "SigLIP2": "vanilla",
                       "Holistic": "vanilla", "EC": "ec", "KTN": "ktn", "PeakPatch": "peakpatch_joint",
                       "LCSE": "lcse"}
# rows set beside any line by design: KTN Table 3 is SigLIP2's ablation, its steps the ones chapter 04 runs
ANY_BACKBONE_ROWS = ("SigLIP2 (raw)", "+ Proj (Dim 1)", "+ Ours (Dim 1+2)")


def row_backbone(row: str) -> str | None:
    """The paper backbone (a ``PAPER_BACKBONES`` key) a row names, longest name first; None for a row
    that names none (the paper's default CLIP ViT-B/32) or one set beside every line."""
    if row in ANY_BACKBONE_ROWS:
        return None
    for name in sorted(PAPER_BACKBONES, key=len, reverse=True):
        if re.search(rf"(^|[ (]){re.escape(name)}($|[ )])", row):
            return name
    return None


def row_method(row: str) -> str | None:
    """Our method (its label) that answers a paper row: ``ROW_METHOD``'s, else, for a row naming another
    backbone, the method its first word names."""
    if row in ROW_METHOD:
        return ROW_METHOD[row]
    backbone = row_backbone(row)
    if backbone is None or backbone == DEFAULT_BACKBONE:
        return None
    method = BACKBONE_ROW_METHOD.get(row.split(" ", 1)[0])
    return method_label(method) if method else None


def serves(row: str, model: str | None) -> bool:
    """Whether a line of ``model`` (an open_clip config name; None for the organism) stands under ``row``:
    rows set beside every line, the organism under ViT-B/32's rows, a real backbone under its own."""
    if row in ANY_BACKBONE_ROWS:
        return True
    backbone = row_backbone(row) or DEFAULT_BACKBONE
    if model is None:
        return backbone == DEFAULT_BACKBONE
    return re.fullmatch(PAPER_BACKBONES[backbone], model) is not None
# paper rows of trained methods named by their training data: a line of ours stands under one only when our
# methods learned from the same kind of data (``training_domain``)
TRAINING_DOMAIN = {"PeakPatch (COCO in-domain)": "in-domain", "PeakPatch (w/o COCO)": "w/o COCO",
                   "CLIP + NF (w/o COCO)": "w/o COCO"}
# benchmarks that are analyses of one model (chapter 02's collapse measures, LCSE's strata): their
# paper rows are labelled by condition, not by method
ANALYSES = ("collapse", "factor_strata", "factor_nested")
# other models that appear as rows of those analyses (LCSE Table 1): not conditions, and not ours
OTHER_MODELS = {"NegCLIP", "CoN-CLIP", "NegCLIP-NegFull", "NegationCLIP"}

# paper benchmark -> (our split, our task). Several paper benchmarks can share one of our tasks:
# the organism has one affirmative retrieval set where PeakPatch reports NegBench's and COCO 5K.
OUR_TASK = {
    "negbench_mcq_coco": ("val", "mcq"), "negbench_mcq_voc": ("ood", "mcq"),
    "negbench_retrieval_coco": ("val", "retrieval"), "retrieval_coco_5k": ("val", "retrieval"),
    "negbench_retrieval_negated_coco": ("val", "retrieval_negated"),
    "coco_confusion_2c": ("val", "confusion_2c"), "coco_confusion_3c": ("val", "confusion_3c"),
    "factor_operator": ("val", "factor_operator"), "retention_coco": ("val", "retention"),
    "valse_existence": ("val", "valse_existence"),
}
ANTI_MONOTONE = ("accuracy[NOT]", "accuracy[NEITHER]", "accuracy[BUT-NOT]")

# the tables chapter 06 sets beside ours, in reading order
BOOK_TABLES = [("NegBench", "Sec. 5 (summary)"), ("NegBench", "Fig. 4a (summary)"),
               ("NegBench", "Table 1 alpha ablation (summary)"),
               *[("PeakPatch", f"Table {n}") for n in (1, 2, 4, 5, 6, 12, 13)],
               *[("KTN", f"Table {n}") for n in (1, 2, 3)], *[("LCSE", f"Table {n}") for n in (1, 2, 3, 4, 5)]]


def best_negfull(selection: pd.DataFrame, protocol: str = "negbench") -> str | None:
    """The NegFull method chosen for ``protocol`` in chapter 03's alpha selection
    (``03_negfull_alphas``: one row per protocol and alpha with its held-out NegMCQ accuracy and
    ``chosen``). The choice never looks at a benchmark."""
    rows = selection[(selection["protocol"] == protocol) & selection["chosen"].astype(bool)]
    return None if rows.empty else str(rows["method"].iloc[0])


def our_values(results: pd.DataFrame, near_ties: pd.DataFrame | None = None, strata: pd.DataFrame | None = None,
               collapse: pd.DataFrame | None = None, negfull: str | None = None) -> pd.DataFrame:
    """Long frame (method, benchmark, metric, value) in the papers' vocabulary, values as fractions;
    the NegFull method named ``negfull`` (chapter 03's held-out choice, ``best_negfull``) appears a
    second time as ``NEGFULL`` (the papers' "CLIP + NF").
    ``results``: chapters 03-05's results frames stacked; ``near_ties``, ``strata`` and ``collapse``:
    chapters 03, 05 and 02's near-tie, evidence-strata and beside-paper tables (in %, or the paper's unit)."""
    split = results["split"]
    rows = []
    metrics = [c for c in results.columns if c not in RESULT_KEY]
    for benchmark, (split_name, task) in OUR_TASK.items():
        block = results[(split == split_name) & (results["task"] == task)].drop_duplicates("method")
        for record in block.to_dict("records"):
            for metric in metrics:
                value = record.get(metric)
                if isinstance(value, (int, float)) and pd.notna(value):
                    rows.append((record["method"], benchmark, metric, float(value)))
            if task == "factor_operator" and all(pd.notna(record.get(m)) for m in ANTI_MONOTONE):
                rows.append((record["method"], benchmark, "anti_monotone_accuracy",
                             sum(record[m] for m in ANTI_MONOTONE) / len(ANTI_MONOTONE)))
    if near_ties is not None:
        tie_column = next(c for c in near_ties.columns if c.startswith("near-tie"))
        rows += [(m, "negbench_mcq_coco_near_tie", "accuracy", v / 100)
                 for m, v in zip(near_ties["method"], near_ties[tie_column])]
    if strata is not None:
        for r in strata.to_dict("records"):
            for ours, paper in (("holistic", "holistic"), ("LCSE", "lcse")):
                if pd.notna(r.get(ours)):
                    rows.append((None, "factor_strata", f"{paper}[{r['min concept AUC']}]", r[ours] / 100))
    if collapse is not None:
        value_column = collapse.columns[-1]
        for r in collapse.to_dict("records"):
            scale = 100 if r["unit"] == "percent" else 1
            rows.append((None, r["benchmark"], r["metric"], r[value_column] / scale))
    if negfull is not None:
        rows += [(NEGFULL, b, m, v) for method, b, m, v in rows if method == negfull]
    nested = results[(split == "val") & (results["task"] == "factor_nested")].drop_duplicates("method")
    for method, paper_metric in ((method_label("vanilla"), "holistic"), (method_label("lcse"), "lcse")):
        hit = nested[nested["method"] == method]
        if len(hit):
            rows.append((None, "factor_nested", paper_metric, float(hit["accuracy"].iloc[0])))
    return pd.DataFrame(rows, columns=["method", "benchmark", "metric", "value"]).drop_duplicates(
        ["method", "benchmark", "metric"])


def training_domain(profile) -> str:
    """What the profile's trained methods learned from, as PeakPatch Table 2 names it: "w/o COCO" for
    NegBench's released CC12M sets, "in-domain" for images of the evaluation's own source (COCO
    train2017, the world's negtrain), read from chapter 03's ``03_training_data``."""
    source = read_results(profile, "03_training_data")["source"].iloc[0]
    return "w/o COCO" if source.startswith("NegBench's released") else "in-domain"


def table2_pairs(negfull: str | None, domain: str) -> list[tuple[str, str, str]]:
    """(our method, table, row) pairs for PeakPatch Table 2's negated retrieval: CLIP's row (Table 10's)
    and the trained rows ``TRAINING_DOMAIN`` gives ``domain`` (``training_domain``), CLIP + NF's answered
    by ``negfull``, the NegFull alpha chosen in chapter 03. Table 2 has no in-domain CLIP + NF row."""
    pairs = [(ROW_METHOD["CLIP"], "Table 10", "CLIP")]
    for row, kind in TRAINING_DOMAIN.items():
        method = negfull if ROW_METHOD[row] == NEGFULL else ROW_METHOD[row]
        if kind == domain and method is not None:
            pairs.append((method, "Table 2", row))
    return pairs


def beside_table(paper: str, table: str, ours: dict[str, pd.DataFrame],
                 domains: dict[str, str] | None = None, models: dict[str, str | None] | None = None) -> pd.DataFrame:
    """One paper table as rows x columns with, under each paper row that one of our methods
    answers, a line per source in ``ours`` ({label: our_values frame}). Columns keep the paper's
    order; our lines are in the paper's unit. Rows nothing of ours answers keep only the paper line.
    A row named by its training data (``TRAINING_DOMAIN``) gets a source's line only when
    ``domains`` ({label: training_domain}, default "in-domain") says it learned from the same kind.
    A row naming a backbone gets only the lines of that backbone (``serves``; ``models``: {label: open_clip
    config name, None for the organism, the default})."""
    numbers = paper_numbers()
    numbers = numbers[(numbers["paper"] == paper) & (numbers["table"] == table)]
    if numbers.empty:
        raise ValueError(f"no numbers for {paper} {table} in paper_numbers.csv")
    columns = list(dict.fromkeys(numbers["column"]))
    lines = []
    for row, group in numbers.groupby("row", sort=False):
        lines.append({"row": row, "source": "paper", "method": "", **dict(zip(group["column"], group["value"]))})
        method = row_method(row)
        in_analysis = group["benchmark"].isin(ANALYSES).all()
        condition = in_analysis and row not in ROW_METHOD and row not in OTHER_MODELS
        if method is None and not condition:
            continue
        for label, values in ours.items():
            if not serves(row, (models or {}).get(label)):
                continue
            if row in TRAINING_DOMAIN and TRAINING_DOMAIN[row] != (domains or {}).get(label, "in-domain"):
                continue
            # the analyses are of the vanilla model; their values carry no method
            analysed = in_analysis and (condition or method == method_label("vanilla"))
            lookup = values[values["method"].isna()] if analysed else values[values["method"] == method]
            lookup = lookup.set_index(["benchmark", "metric"])["value"]
            cells = {}
            for r in group.itertuples():
                if (r.benchmark, r.metric) in lookup.index:
                    cells[r.column] = lookup[(r.benchmark, r.metric)] * (100 if r.unit == "percent" else 1)
            if cells:
                lines.append({"row": row, "source": label, "method": method or "", **cells})
    return pd.DataFrame(lines).reindex(columns=["row", "source", "method", *columns])


def differences(table: pd.DataFrame) -> pd.DataFrame:
    """Ours minus the paper, cell by cell, on our lines (NaN elsewhere)."""
    value_columns = [c for c in table.columns if c not in ("row", "source", "method")]
    paper = table[table["source"] == "paper"].set_index("row")[value_columns]
    delta = table[value_columns].copy() * float("nan")
    for i, r in table.iterrows():
        if r["source"] != "paper":
            delta.loc[i] = r[value_columns].astype(float) - paper.loc[r["row"]].astype(float)
    return delta


def highlight_differences(table: pd.DataFrame, close: float = 5.0, far: float = 15.0):
    """A pandas Styler: our cells green within ``close`` points of the paper, amber up to ``far``,
    red beyond; paper lines plain."""
    delta = differences(table)

    def colour(d):
        if pd.isna(d):
            return ""
        return ("background-color: #d8f0d8" if abs(d) <= close else
                "background-color: #fbe3b0" if abs(d) <= far else "background-color: #f6c6c6")

    value_columns = list(delta.columns)
    styles = pd.DataFrame("", index=table.index, columns=table.columns)
    styles[value_columns] = delta.apply(lambda col: col.map(colour))
    # correlations and fractions (every value <= 1) keep 3 decimals, percentages 1
    formats = {c: ("{:.3f}" if table[c].dropna().abs().le(1).all() else "{:.1f}") for c in value_columns}
    return table.style.apply(lambda _: styles, axis=None).format(formats, na_rep="").hide(axis="index")


def agreement_summary(tables: dict[tuple[str, str], pd.DataFrame], close: float = 5.0,
                      far: float = 15.0) -> pd.DataFrame:
    """Per paper table and source: how many of our cells sit within ``close`` points of the paper,
    within ``far``, or beyond, and the median absolute difference."""
    rows = []
    for (paper, table), frame in tables.items():
        delta = differences(frame)
        for source in frame.loc[frame["source"] != "paper", "source"].unique():
            d = delta[frame["source"] == source].to_numpy().ravel()
            d = abs(d[~pd.isna(d)])
            if len(d):
                rows.append({"paper": paper, "table": table, "source": source, "cells": len(d),
                             f"within {close:g}": int((d <= close).sum()),
                             f"within {far:g}": int(((d > close) & (d <= far)).sum()),
                             f"beyond {far:g}": int((d > far).sum()), "median |diff|": float(pd.Series(d).median())})
    return pd.DataFrame(rows)


RESULT_TABLES = ("03_results", "04_results", "05_results")


def line_label(profile) -> str:
    """How a profile's line is named beside the papers' rows: by its backbone (``ViT-L-14/openai``), with the
    profile's name but on the ``gpu`` profile (``ViT-B-32 (gpu-dryrun)``, ``organism (cpu)``)."""
    label = profile.backbone_label()
    return label if profile.name == "gpu" and profile.backbone is not None else f"{label} ({profile.name})"


def result_profiles(profiles) -> list:
    """Every backbone run of each profile in ``profiles`` (``Profile.backbone_runs``) whose chapters 03-05
    have results here, in order."""
    return [run for profile in profiles for run in profile.backbone_runs() if has_results(run)]


def has_results(profile) -> bool:
    """Whether chapters 03-05 have run for ``profile`` (its backbone) on this machine."""
    folder = profile.results_dir()
    return all((folder / f"{name}.csv").exists() for name in RESULT_TABLES)


def load_ours(profile) -> pd.DataFrame:
    """``our_values`` from the results chapters 02-05 wrote for ``profile``."""

    results = pd.concat([read_results(profile, name) for name in RESULT_TABLES], ignore_index=True)
    return our_values(results, near_ties=read_results(profile, "03_near_ties"),
                      strata=read_results(profile, "05_evidence_strata"),
                      collapse=read_results(profile, "02_beside_paper"),
                      negfull=best_negfull(read_results(profile, "03_negfull_alphas")))


def ablation_table(results: pd.DataFrame, paper_rows: dict[str, str]) -> pd.DataFrame:
    """PeakPatch Table 5's layout (MCQ Neg, MCQ Avg, negated-retrieval R@5 on val, in %) for each
    method, with the paper's row beside it; ``paper_rows`` maps our method name to the paper's."""

    table5 = paper_numbers().query("table == 'Table 5'")
    paper = {row: dict(zip(group["column"], group["value"])) for row, group in table5.groupby("row")}
    rows = []
    for method, paper_row in paper_rows.items():
        mine = results[results["method"] == method]
        mcq = mine[(mine["task"] == "mcq") & (mine["split"] == "val")].iloc[0]
        ret = mine[mine["task"] == "retrieval_negated"].iloc[0]
        rows.append({"variant": method, "MCQ Neg": 100 * mcq["negative_accuracy"], "MCQ Avg": 100 * mcq["accuracy"],
                     "Ret R@5": 100 * ret["R@5"],
                     **{f"paper {k}": v for k, v in paper.get(paper_row, {}).items()}})
    return pd.DataFrame(rows).round(1)
