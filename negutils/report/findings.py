"""Each chapter's Findings box and the book's headline, read from the results the chapters wrote.

A chapter's last cell calls ``show_findings``: it reads the chapter's own results CSVs (the same
records chapter 06 and the verdict tables use), writes three to six sentences, each linked to the
section that shows its evidence, and glues them (myst-nb ``glue``) under the key ``findings``; the
chapter's first cell pastes that key, so the box opens the chapter although it is computed last.

No number in a box is typed: every one is printed from a results cell. ``numbers_not_in_results``
is the check, and a box that fails it is refused before it is shown: each number must be a
numeric cell of one of the chapter's results files (as written, or a fraction printed as a
percentage, at the printed precision), a number inside a text cell exactly as written there, the
count of one of a column's values, or a file's row count.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.results import read_results_file
from ..methods.peakpatch.retrieval_collapse import CENTRED, ECN_ALONE
from ..methods.registry import method_label
from .unified import leader_summary
from .verdicts import NOT_MEASURED, NOT_REPRODUCED, PARTLY, REPRODUCED, VERDICTS, read_verdicts

GLUE_KEY = "findings"       # what the chapters' first cell pastes with {glue:md}
VERDICT_CHAPTERS = ("02", "03", "04", "05", "07")   # the chapters that judge the papers' claims
MAX_CLAIMS_SHOWN = 2        # per kind (held, not held): the box stays within six lines

Reader = Callable[[str], pd.DataFrame]


@dataclass(frozen=True)
class Finding:
    """One sentence of a box (MyST, numbers already printed) and the section label it links to."""
    text: str
    section: str


class FindingsError(ValueError):
    pass


# --------------------------------------------------------------------------------------------
# Reading a chapter's results

def chapter_of(notebook: str) -> str:
    """The two-digit prefix that names a chapter's results files ("03" for "03_peakpatch")."""
    prefix = notebook.split("_", 1)[0]
    if not (len(prefix) == 2 and prefix.isdigit()):
        raise FindingsError(f"{notebook!r} is not a chapter name such as '03_peakpatch'")
    return prefix


def chapter_results(results_dir: Path, chapter: str) -> dict[str, pd.DataFrame]:
    """{name: table} of every ``<chapter>_*.csv`` in ``results_dir`` (the notebook timings the
    runner writes beside them are not the chapter's results). Each is read by the reader its kind
    has: a verdict table by ``read_verdicts``, any other by ``read_results_file``."""
    return {p.stem: _read_table(p) for p in sorted(Path(results_dir).glob(f"{chapter}_*.csv"))}


def _read_table(path: Path) -> pd.DataFrame:
    return read_verdicts(path) if path.stem.endswith("_verdicts") else read_results_file(path)


def _reader(results: Mapping[str, pd.DataFrame], chapter: str) -> Reader:
    def read(name: str) -> pd.DataFrame:
        if name not in results:
            raise FindingsError(f"chapter {chapter}'s findings need its results table {name!r}, which this run "
                                f"did not write (have {sorted(results)})")
        return results[name]
    return read


# --------------------------------------------------------------------------------------------
# The check: every number printed is in the results

_NUMBER = re.compile(r"\d+(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?")


def printed_numbers(text: str) -> list[str]:
    """The numbers in ``text`` as printed ("10,000" is one number; signs and units are not kept)."""
    return [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]


def admissible_numbers(results: Mapping[str, pd.DataFrame], max_decimals: int = 4) -> set[str]:
    """Every way a number of ``results`` may be printed: each numeric cell as is and times 100 (a
    fraction as a percentage) at 0 to ``max_decimals`` decimals; each number inside a text cell or
    a column name exactly as it is written there (it was printed once already); the count of each
    value of each column; each table's row count."""
    values: list[float] = []
    shown: set[str] = set()
    for frame in results.values():
        shown.add(str(len(frame)))
        for column in frame.columns:
            shown.update(printed_numbers(str(column)))
            series = frame[column]
            shown.update(str(n) for n in series.value_counts(dropna=True).to_numpy())
            numeric = pd.to_numeric(series, errors="coerce")
            values += numeric[np.isfinite(numeric)].astype(float).tolist()
            for text in series[numeric.isna() & series.notna()].astype(str):
                shown.update(printed_numbers(text))
    for v in set(np.abs(np.asarray(values, dtype=float)).tolist()):
        for decimals in range(max_decimals + 1):      # formatted as the boxes format them, not re-rounded
            shown.add(f"{v:.{decimals}f}")
            shown.add(f"{100 * v:.{decimals}f}")
    return shown


def numbers_not_in_results(text: str, results: Mapping[str, pd.DataFrame]) -> list[str]:
    """The numbers printed in ``text`` that no cell, value count or row count of ``results`` gives."""
    shown = admissible_numbers(results)
    return [t for t in printed_numbers(text) if t not in shown]


# --------------------------------------------------------------------------------------------
# The chapters' findings

def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


_MARKUP = re.compile(r"([\\`*_$\[\]<>{}|])")


def _plain(text) -> str:
    """A results cell as literal text in MyST: markup characters ("*", "_", "$", braces...) escaped,
    so a claim such as "beta_c-(q)" or a bracketed interval prints as written."""
    return _MARKUP.sub(r"\\\1", str(text))


def _world(read: Reader) -> list[Finding]:
    retrieval = read("00_zero_shot_retrieval")
    val = retrieval[retrieval["split"] == "val"]
    trained, untrained = val[val["pretrained"] != "untrained"].iloc[0], val[val["pretrained"] == "untrained"].iloc[0]
    recognition = read("00_object_recognition")
    seen = recognition[recognition["pretrained"] != "untrained"].iloc[0]
    targets = read("00_organism_targets")
    met = int(targets["met"].fillna(False).astype(bool).sum())
    cosines = read("00_negation_cosines")
    negated = cosines[cosines["pair"] == "a X vs no X"]["cosine"]
    other = cosines[cosines["pair"] == "a X vs a Y"]["cosine"]
    lifted = trained["t2i_R@5"] >= 5 * max(untrained["t2i_R@5"], trained["chance_R@5"])
    lines = [
        Finding(f"{'Pretraining lifts retrieval' if lifted else 'Pretraining barely lifts retrieval'}: an "
                f"affirmative caption finds its image in the top 5 of {trained['gallery']:.0f} for "
                f"{_pct(trained['t2i_R@5'])} of `val` (untrained {_pct(untrained['t2i_R@5'])}, chance "
                f"{_pct(trained['chance_R@5'])}).", "ch00-zero-shot"),
        Finding(f"Object recognition: mean detection AUC {seen['mean detection AUC']:.3f}, zero-shot accuracy "
                f"{_pct(seen['zero-shot accuracy'])} on one-object images against chance "
                f"{_pct(seen['chance accuracy'])}; {met} of {len(targets)} of the targets set for a CLIP stand-in "
                "are met.", "ch00-like-clip"),
    ]
    if len(negated) and len(other):
        lines.append(Finding(
            f"Negation, a first look: \"a photo of a X\" and \"a photo of no X\" have cosines from "
            f"{negated.min():.3f} to {negated.max():.3f} across {len(negated)} categories; two different "
            f"categories reach at most {other.max():.3f}.", "ch00-first-look"))
    return lines


def _data(read: Reader) -> list[Finding]:
    sizes = read("01_benchmark_sizes").set_index("benchmark")
    vanilla = read("01_vanilla")
    val = vanilla[(vanilla["split"] == "val") & (vanilla["pretrained"] != "untrained")].set_index("task")
    papers = read("01_vanilla_vs_papers")
    mcq_paper = papers[(papers["metric"] == "accuracy") & papers["benchmark"].str.startswith("negbench_mcq")]
    lines = [
        Finding(f"Built: {sizes.loc['mcq', 'val']:.0f} MCQ-Neg questions on `val` and "
                f"{sizes.loc['mcq', 'ood']:.0f} on `ood`, {sizes.loc['retrieval_negated', 'val']:.0f} negated "
                f"retrieval queries, {sizes.loc['confusion_2c', 'val']:.0f} COCO-Confusion 2C galleries and "
                f"{sizes.loc['factor', 'val']:.0f} FACTOR samples.", "ch01-built"),
        Finding(f"The vanilla backbone answers {_pct(val.loc['mcq', 'accuracy'])} of MCQ-Neg on `val`: "
                f"{_pct(val.loc['mcq', 'positive_accuracy'])} of affirmative-answer questions but "
                f"{_pct(val.loc['mcq', 'negative_accuracy'])} of negated ones.", "ch01-vanilla"),
        Finding(f"Negated retrieval R@5 is {_pct(val.loc['retrieval_negated', 'R@5'])} against "
                f"{_pct(val.loc['retrieval', 'R@5'])} for affirmative queries.", "ch01-vanilla"),
    ]
    if len(mcq_paper):
        row = mcq_paper.iloc[0]
        lines.append(Finding(f"On NegBench MCQ the papers' CLIP scores {row['paper value']:.1f}% ({row['paper']} "
                             f"{row['table']}), this backbone {row['organism']:.1f}%.", "ch01-beside-papers"))
    return lines


def _verdicts(read: Reader, chapter: str, other_lines: int = 0) -> list[Finding]:
    """The tally and the first claims held and not held, ``other_lines`` fewer claims when the box
    carries that many lines of its own; a box with room for a few claims shows the held and the failed
    alike (half each, the held first), so a claim that failed is never crowded out by two that held."""
    verdicts = read(f"{chapter}_verdicts")
    counts = verdicts["verdict"].value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v, 0))
    lines = [Finding(f"Of the {len(verdicts)} claims tested on this backbone: {tally}.", f"ch{chapter}-verdicts")]
    held = verdicts[verdicts["verdict"] == REPRODUCED].head(MAX_CLAIMS_SHOWN)
    order = {NOT_REPRODUCED: 0, PARTLY: 1, NOT_MEASURED: 2}
    failed = verdicts[verdicts["verdict"].isin(order)].sort_values(
        "verdict", key=lambda v: v.map(order), kind="stable").head(MAX_CLAIMS_SHOWN)
    room = 2 * MAX_CLAIMS_SHOWN - other_lines
    n_held = min(len(held), room - min(len(failed), room // 2))
    for _, claim in pd.concat([held.head(n_held), failed.head(room - n_held)]).iterrows():
        section = claim.get("section")
        if not isinstance(section, str) or not section:
            section = f"ch{chapter}-verdicts"
        lines.append(Finding(f"*{claim['verdict'].capitalize()}:* {_plain(claim['claim'])} (ours: "
                             f"{_plain(claim['ours'])}; paper: {_plain(claim['paper'])}).", section))
    return lines


def _training_data(read: Reader) -> list[Finding]:
    data = read("03_training_data").set_index("part")
    images = data["images"].max()
    return [Finding(f"PeakPatch and NegFull trained on {_plain(data['source'].iloc[0])} ({images} images with "
                    f"training data: {data.loc['NegCap captions (true)', 'rows']} NegCap captions, "
                    f"{data.loc['NegMCQ questions', 'rows']} NegMCQ questions).", "ch03-data")]


def _formation(read: Reader) -> list[Finding]:
    """Chapter 02's LCD through pretraining, when the run had snapshots (the organism; a real backbone's
    run writes no ``02_lcd_formation``)."""
    try:
        formed = read("02_lcd_formation").sort_values("step")
    except FindingsError:
        return []
    first, last = formed.iloc[0], formed.iloc[-1]
    interior = formed[formed["interior peak"].astype(bool)]
    return [Finding(f"Through pretraining (steps {int(first['step'])} to {int(last['step'])}), D_LCD's peak moves "
                    f"from layer {int(first['D_LCD peak layer'])} to layer {int(last['D_LCD peak layer'])}; an "
                    f"interior peak appears at {len(interior)} of {len(formed)} snapshots.", "ch02-formation")]


def _retrieval_collapse(read: Reader) -> list[Finding]:
    """What chapter 03 measured about the joint model's retrieval (its held-out ties are in the chapter)."""
    lines = []
    parts = read("03_retrieval_without_delta").set_index("scorer")
    decomposition = read("03_delta_decomposition")
    model = method_label("peakpatch_joint")
    joint = decomposition[decomposition["method"] == model]
    if len(joint) and ECN_ALONE in parts.index:
        alone = parts.loc[ECN_ALONE]
        centred = (f"; with Delta s centred per image, R@5 {parts.loc[CENTRED, 'R@5']:.1f}"
                   if CENTRED in parts.index else "")
        lines.append(Finding(f"{_plain(model)} retrieves at R@5 {parts.loc[model, 'R@5']:.1f} with its Delta s and "
                             f"{alone['R@5']:.1f} with its ECN alone; the image part is "
                             f"{100 * joint['image share'].iloc[0]:.1f}% of Delta s's variance on the gallery"
                             f"{centred}{_contrast(read)}.", "ch03-retrieval-collapse"))
    return lines


def _contrast(read: Reader) -> str:
    """The best design chapter 03 did not keep, trained at the full budget: a clause for the collapse line."""
    try:
        contrast = read("03_design_contrast")
    except FindingsError:
        return ""
    if len(contrast) < 2:
        return ""
    other = contrast.iloc[1]
    return (f"; {_plain(other['model'])} retrieves at R@5 {other['R@5']:.1f} for MCQ {other['MCQ val']:.1f} "
            f"(the kept design {contrast.iloc[0]['MCQ val']:.1f})")


def _tables(read: Reader) -> list[Finding]:
    leads = read("06_leaders")
    settled = leads[leads["settled"].fillna(False).astype(bool)]
    verb = "has" if len(settled) == 1 else "have"
    lines = [Finding(f"{len(settled)} of {len(leads)} benchmarks {verb} a settled leader (the paired bootstrap "
                     "interval of its lead over the runner-up excludes 0).", "ch06-leaders")]
    # retention (rho) is measured against vanilla's own rankings: its lead says least, so it comes last
    settled = pd.concat([settled[settled["benchmark"] != "rho"], settled[settled["benchmark"] == "rho"]])
    for _, r in settled.head(MAX_CLAIMS_SHOWN + 1).iterrows():
        lines.append(Finding(f"{_plain(r['benchmark'])}: {_plain(r['best'])} leads at {r['value']:g} "
                             f"{_plain(r['interval'])}, {r['lead']:g} {_plain(r['lead interval'])} ahead of "
                             f"{_plain(r['runner-up'])}.", "ch06-leaders"))
    unified = read("06_unified")
    mcq = unified[unified["benchmark"] == "MCQ val"].set_index("method")["value"]
    if "vanilla" in mcq.index and len(mcq) > 1:
        best = mcq.drop("vanilla")
        lines.append(Finding(f"On MCQ val the best method is {_plain(best.idxmax())} at {best.max():.1f}%, against "
                             f"vanilla's {mcq['vanilla']:.1f}%.", "ch06-unified"))
    return lines


def _performance(read: Reader, profile: str) -> list[Finding]:
    ratios = read("90_ratios")
    lines = []
    times = read("90_notebook_times")
    times = times[times["profile"] == profile]
    if len(times):
        slowest = times.loc[times["seconds"].idxmax()]
        lines.append(Finding(f"The slowest chapter of this profile's last run is `{slowest['notebook']}` at "
                             f"{slowest['seconds']:.0f} s.", "ch90-times"))
    for area, section in (("training", "ch90-training"), ("feature cache", "ch90-feature-cache")):
        rows = ratios[ratios["area"] == area]
        if len(rows):
            first = rows.iloc[0]
            lines.append(Finding(f"{area.capitalize()}: {_plain(first['measure'])}, ratio {first['ratio']:.3g} "
                                 f"({_plain(first['ratio of'])}).", section))
    latency = ratios[ratios["area"] == "query latency"]
    if len(latency):
        # the largest gallery measured, the costliest run of each training-free method on it
        sizes = latency["measure"].str.extract(r"([\d,]+) images")[0].str.replace(",", "").astype(int)
        largest = latency[sizes == sizes.max()]
        worst = largest.groupby(largest["measure"].str.split(" vs ").str[0])["ratio"].max()
        costs = ", ".join(f"{method} {ratio:.2f}" for method, ratio in worst.items())
        lines.append(Finding(f"At {sizes.max():,} images a training-free query costs at most (times holistic "
                             f"cosine scoring): {costs}.", "ch90-latency"))
    return lines


def _lines_then_verdicts(chapter: str, *parts: Callable[[Reader], list[Finding]]) -> Callable[[Reader, str], list]:
    """A verdict chapter's box that opens with its own lines (``parts``), then as many claims as room is left."""
    def box(read: Reader, profile: str) -> list[Finding]:
        lines = [finding for part in parts for finding in part(read)]
        return lines + _verdicts(read, chapter, other_lines=len(lines))
    return box


# chapter -> (its results, the profile's name) -> the box's sentences
CHAPTER_FINDINGS: dict[str, Callable[[Reader, str], list[Finding]]] = {
    "00": lambda read, profile: _world(read), "01": lambda read, profile: _data(read),
    **{c: (lambda read, profile, c=c: _verdicts(read, c)) for c in VERDICT_CHAPTERS},
    "02": _lines_then_verdicts("02", _formation),
    "03": _lines_then_verdicts("03", _training_data, _retrieval_collapse),
    "06": lambda read, profile: _tables(read), "90": _performance,
}


def chapter_findings(notebook: str, results: Mapping[str, pd.DataFrame], profile: str = "cpu") -> list[Finding]:
    """The sentences of ``notebook``'s box, read from ``results`` (``chapter_results``) of ``profile``."""
    chapter = chapter_of(notebook)
    if chapter not in CHAPTER_FINDINGS:
        raise FindingsError(f"no findings are defined for chapter {notebook!r} (known: {sorted(CHAPTER_FINDINGS)})")
    return CHAPTER_FINDINGS[chapter](_reader(results, chapter), profile)


# --------------------------------------------------------------------------------------------
# Rendering

SMOKE_NOTE = ("*Smoke run:* every size is cut so that each cell runs in seconds; these numbers test the code "
              "path, not the papers' claims.")
# the runner's parameters beyond the profile, as JSON, for the box to name (the page hides papermill's cell)
RUN_PARAMETERS_VARIABLE = "NEGBOOK_RUN_PARAMETERS"


def run_parameters() -> dict:
    """The parameters ``python -m negutils.run`` gave this run besides the profile (empty when the
    notebook runs without the runner)."""
    raw = os.environ.get(RUN_PARAMETERS_VARIABLE, "")
    if not raw:
        return {}
    try:
        return dict(json.loads(raw))
    except (ValueError, TypeError) as err:
        raise FindingsError(f"{RUN_PARAMETERS_VARIABLE} is not a JSON object of parameters: {raw[:80]!r}") from err


def _parameter_text(name: str, value) -> str:
    shown = Path(value).name if isinstance(value, str) and os.sep in value else value   # a file by its name
    return f"`{name}={shown}`"


def findings_markdown(findings: list[Finding], profile: str, smoke: bool = False, myst: bool = True,
                      parameters: Mapping | None = None) -> str:
    """The box: a MyST ``admonition`` whose lines link to their sections (``myst``), or plain
    Markdown for a notebook front end that does not know MyST roles. The last line names the
    profile and any other ``parameters`` the run was given."""
    def link(f: Finding) -> str:
        return f" ({{ref}}`details <{f.section}>`)" if myst else ""
    items = [f"- {f.text}{link(f)}" for f in findings]
    given = ", ".join(_parameter_text(k, v) for k, v in sorted((parameters or {}).items()))
    given = f" Run with {given}." if given else ""
    items.append(f"- {SMOKE_NOTE}{given}" if smoke else f"- *Run:* profile `{profile}`; every number above is read "
                 f"from this run's results files.{given}")
    if not myst:
        return "**Findings**\n\n" + "\n".join(items)
    return "```{admonition} Findings\n:class: tip findings\n\n" + "\n".join(items) + "\n```"


def checked_findings(notebook: str, results: Mapping[str, pd.DataFrame], profile: str = "cpu") -> list[Finding]:
    """``chapter_findings`` after the check that each number printed is in ``results``."""
    findings = chapter_findings(notebook, results, profile)
    if not 2 <= len(findings) <= 5:
        raise FindingsError(f"chapter {notebook}'s findings have {len(findings)} lines; a box holds 2 to 5 "
                            "(and the run line)")
    stray = numbers_not_in_results(" ".join(f.text for f in findings), results)
    if stray:
        raise FindingsError(f"chapter {notebook}'s findings print numbers that are in none of its results "
                            f"files: {stray}")
    return findings


def show_findings(notebook: str, profile) -> list[Finding]:
    """The chapter's last cell: glue its box for the first cell to paste, and show it here too (in
    JupyterLab, where the pasted box is not rendered). ``profile`` is the run's ``Profile``."""
    from IPython.display import Markdown, display   # in a kernel only: the package imports without IPython

    results = chapter_results(profile.results_dir(), chapter_of(notebook))
    findings = checked_findings(notebook, results, profile.name)
    smoke = profile.name == "smoke"
    given = run_parameters()
    glue_markdown(GLUE_KEY, findings_markdown(findings, profile.name, smoke, parameters=given))
    display(Markdown(findings_markdown(findings, profile.name, smoke, myst=False, parameters=given)))
    return findings


GLUE_MIME_PREFIX = "application/papermill.record/"     # where myst-nb looks for glued, undisplayed data


def glue_markdown(name: str, markdown: str) -> None:
    """What ``myst_nb.glue(name, Markdown(markdown), display=False)`` records, written without
    importing myst_nb: its glue module imports nbformat, which every chapter would wait for. The
    output is the Markdown's mime bundle under myst-nb's prefix, with the ``scrapbook`` metadata the
    book build reads it back by (tests/test_findings.py compares the two)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import Markdown, display

    bundle, metadata = format_display_data(Markdown(markdown))
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_MIME_PREFIX}
    display({GLUE_MIME_PREFIX + mime: value for mime, value in bundle.items()}, raw=True, metadata=metadata)


# --------------------------------------------------------------------------------------------
# The book's headline, on the intro page

PAPERS = ("NegBench", "PeakPatch", "KTN", "LCSE")
HEADLINE_FILE = "_headline.md"      # in the staged book; the intro page includes it


def verdicts_by_paper(results_dir: Path) -> pd.DataFrame:
    """Verdict counts per paper over every chapter's verdict table: a claim counts for each of the
    four papers its ``source`` names (a claim citing NegBench and PeakPatch counts for both)."""
    paths = [Path(results_dir) / f"{c}_verdicts.csv" for c in VERDICT_CHAPTERS]
    tables = [read_verdicts(p) for p in paths if p.exists()]
    claims = pd.concat(tables) if tables else pd.DataFrame({"source": [], "verdict": []}, dtype=str)
    rows = []
    for paper in PAPERS:
        counts = claims.loc[claims["source"].str.contains(paper, regex=False), "verdict"].value_counts()
        rows.append({"paper": paper, "claims": int(counts.sum()), **{v: int(counts.get(v, 0)) for v in VERDICTS}})
    return pd.DataFrame(rows)


def book_headline(results_dir: Path, profile: str) -> str:
    """The intro page's headline as MyST: who leads each benchmark of the unified table (chapter 06)
    and the verdict counts per paper, from the results in ``results_dir``; says what is missing
    when the chapters that write them have not run."""
    results_dir = Path(results_dir)
    leaders_csv = results_dir / "06_leaders.csv"
    verdict_files = [c for c in VERDICT_CHAPTERS if (results_dir / f"{c}_verdicts.csv").exists()]
    if not leaders_csv.exists() or not verdict_files:
        return ("The headline (who leads each benchmark, and how many of each paper's claims hold) is computed "
                "from chapters 02 to 07's results, which this build does not have yet: run `make book`.")
    leads = read_results_file(leaders_csv)
    lines = [f"**The headline of this build** (profile `{profile}`; every number is read from the chapters' "
             "results).", "",
             "Who leads each benchmark of the unified method x benchmark table "
             "({doc}`chapter 06 <chapters/06_benchmark_tables>`), with its 95% bootstrap interval; a lead is "
             "*settled* when the paired interval of its margin over the runner-up excludes 0:", "",
             "| benchmark | leader | value [95% interval] | runner-up | settled |", "| --- | --- | --- | --- | --- |"]
    for _, r in leads.iterrows():
        said = leader_summary(r)
        lines.append(f"| {_plain(r['benchmark'])} | {_plain(said['leader'])} | {r['value']:g} "
                     f"{_plain(r['interval'])} | {_plain(said['runner-up'])} | {said['settled']} |")
    by_paper = verdicts_by_paper(results_dir)
    lines += ["", "How many of each paper's claims hold on this backbone (chapters 02 to 05, and chapter 07's test "
              "of their shared causal claim, {doc}`the negation rate <chapters/07_negation_rate>`):", "",
              "| paper | claims | " + " | ".join(VERDICTS) + " |", "| --- | --- |" + " --- |" * len(VERDICTS)]
    for _, r in by_paper.iterrows():
        lines.append(f"| {r['paper']} | {r['claims']} | " + " | ".join(str(r[v]) for v in VERDICTS) + " |")
    missing = sorted(set(VERDICT_CHAPTERS) - set(verdict_files))
    if missing:
        lines += ["", f"Chapters {', '.join(missing)} have not run in this build, so their claims are not counted."]
    return "\n".join(lines) + "\n"
