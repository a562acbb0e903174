"""Execute the book's notebooks in order with papermill, then build the book from the copies.

    python -m negutils.run --profile cpu                 # what `make book` runs
    python -m negutils.run --profile smoke --book-out artifacts/smoke/book
    python -m negutils.run --profile gpu -p pretrained=openai -p backbone=ViT-B-32
    python -m negutils.run --profile gpu -p backbones=ViT-B-32:openai,ViT-L-14:openai,ViT-B-16-SigLIP:webli

Each notebook (``notebooks/NN_name.md``, jupytext MyST) is converted to ``.ipynb`` in a
staging copy of ``book/``, executed there with ``profile`` injected into its ``parameters``
cell, and the book is built from the executed copies (Jupyter Book does not re-execute).
Chapters run ``--jobs`` at a time (the profile's ``chapter_jobs`` by default): a chapter starts once
every chapter whose files it reads (``CHAPTER_NEEDS``) has finished. A failing notebook stops new
chapters from starting, lets the running ones finish, and names the notebook and the failing cell.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import pandas as pd

from .config import REPO_ROOT, Profile, get_profile, parse_backbones
from .core.cache import atomic_save, atomic_write_text
from .dry_run import dry_run_inputs
from .models.memo import READS_VARIABLE, WRITER_VARIABLE
from .report.findings import HEADLINE_FILE, RUN_PARAMETERS_VARIABLE, book_headline
from .report.performance import BENCH_RESULTS
from .schedule import (SHARED_CORES_ENVIRONMENT, chapter_needs, chapter_reads, chapters_to_start,
                       estimate_seconds, may_share_cores)

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
BOOK_DIR = REPO_ROOT / "book"
CHAPTER_DIR = "chapters"  # where _toc.yml expects the executed notebooks, relative to the book root


class NotebookFailed(RuntimeError):
    pass


def notebook_sources(only: list[str] | None = None) -> list[Path]:
    """The book's chapters in order, or only those named in ``only`` (None: all of them). An empty
    ``only`` is an error: ``--only`` given no names would otherwise run the whole book."""
    sources = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.md"))
    if only is not None and not only:
        raise ValueError(f"--only needs at least one chapter name; the chapters are {[s.stem for s in sources]}")
    if only:
        wanted = {Path(o).stem for o in only}
        unknown = wanted - {s.stem for s in sources}
        if unknown:
            raise ValueError(f"no notebook named {sorted(unknown)} in {NOTEBOOK_DIR}")
        sources = [s for s in sources if s.stem in wanted]
    return sources


def stage_book(stage: Path, keep_chapters: bool = False) -> Path:
    """A fresh copy of book/ (config, toc, pages) to receive the executed chapters. With
    ``keep_chapters`` the chapters executed earlier stay (an ``--only`` run replaces just its own)."""
    chapters = stage / CHAPTER_DIR
    kept = stage.parent / f".{stage.name}-chapters"
    if keep_chapters and chapters.exists():
        shutil.rmtree(kept, ignore_errors=True)
        chapters.rename(kept)
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(BOOK_DIR, stage, ignore=shutil.ignore_patterns("_build", CHAPTER_DIR))
    if keep_chapters and kept.exists():
        kept.rename(chapters)
    else:
        chapters.mkdir()
    return stage


def read_notebook(source: Path):
    """A MyST chapter as a notebook. Without an explicit format a header that lacks jupytext's
    version fields is read as plain markdown, and every code cell silently turns into text."""
    import jupytext  # the [book] extra: the library imports without it

    return jupytext.read(source, fmt="md:myst")


def _parameters_cell(notebook, name: str) -> list[ast.stmt]:
    """The statements of the notebook's cell tagged ``parameters``."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise NotebookFailed(f"notebook {name} has no code cell tagged 'parameters'; papermill could not inject the "
                             "profile")
    return ast.parse(cells[0].source).body


def declared_parameters(notebook, name: str = "") -> list[str]:
    """The names the notebook's ``parameters`` cell assigns, in order (what papermill may set)."""
    return list(parameter_types(notebook, name))


@dataclass(frozen=True)
class ParameterType:
    """What a ``parameters`` cell declares a parameter to hold: a ``kind`` (bool, int, float or str),
    or None too where ``optional``."""
    kind: type
    optional: bool = False

    def __str__(self) -> str:
        text = "bool (true/false/1/0/yes/no, any case)" if self.kind is bool else self.kind.__name__
        return text + (" or None" if self.optional else "")

    def convert(self, value):
        """``value`` as this type: text (what ``-p`` gives) is parsed, any other value must already be one
        (an int stands for a float); where ``optional``, the text None is None. Raises ValueError."""
        if self.optional and (value is None or value == "None"):
            return None
        if isinstance(value, str) and self.kind is not str:
            value = self._parse(value)
        elif self.kind is float and type(value) is int:
            value = float(value)
        if type(value) is not self.kind:      # type, not isinstance: a bool is no int here
            raise ValueError(f"{value!r} is no {self.kind.__name__}")
        if self.kind is float and not math.isfinite(value):
            raise ValueError(f"{value!r} is not finite")
        return value

    def _parse(self, text: str):
        if self.kind is bool:
            if text.strip().lower() not in BOOL_TEXT:
                raise ValueError(f"{text!r} is none of {sorted(BOOL_TEXT)}")
            return BOOL_TEXT[text.strip().lower()]
        return self.kind(text)


PARAMETER_KINDS = {"bool": bool, "int": int, "float": float, "str": str}
BOOL_TEXT = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
# an annotation the runner reads: ``T``, or ``T | None``, ``None | T``, ``Optional[T]`` for a None default
ANNOTATIONS = ((r"(\w+)", False), (r"(\w+)\|None", True), (r"None\|(\w+)", True), (r"Optional\[(\w+)\]", True))


def parameter_types(notebook, name: str = "") -> dict[str, ParameterType]:
    """{parameter: its type} as the notebook's ``parameters`` cell declares them, in order: the annotation's
    type where there is one, else the default's (a None default: str or None)."""
    types = {}
    for statement in _parameters_cell(notebook, name):
        if isinstance(statement, ast.Assign):
            targets, annotation = statement.targets, None
        elif isinstance(statement, ast.AnnAssign):
            targets, annotation = [statement.target], statement.annotation
        else:
            continue
        for target in (t for t in targets if isinstance(t, ast.Name)):
            types[target.id] = _declared_type(statement.value, annotation, f"{name}'s parameter {target.id}")
    return types


def _declared_type(default: ast.expr | None, annotation: ast.expr | None, where: str) -> ParameterType:
    """The type an assignment in a parameters cell declares; ``where`` names it in the error."""
    none_default = isinstance(default, ast.Constant) and default.value is None
    if annotation is not None:
        text = ast.unparse(annotation).replace(" ", "")
        kind, optional = next(((m.group(1), optional) for pattern, optional in ANNOTATIONS
                               if (m := re.fullmatch(pattern, text))), (text, False))
    elif none_default:
        kind, optional = "str", True
    else:
        try:
            kind, optional = type(ast.literal_eval(default)).__name__, False
        except (ValueError, TypeError, SyntaxError):
            kind, optional = "an expression", False
    if kind not in PARAMETER_KINDS:
        raise NotebookFailed(f"notebook {where} is declared as {ast.unparse(annotation or default)}: the runner "
                             f"sets parameters of type {', '.join(PARAMETER_KINDS)} (a None default may be annotated "
                             "as one of them, e.g. `int | None`)")
    return ParameterType(PARAMETER_KINDS[kind], optional or none_default)


def chapter_parameter_types(sources: list[Path]) -> dict[str, dict[str, ParameterType]]:
    """{chapter: {parameter: type}} of the chapters in ``sources``."""
    return {source.stem: parameter_types(read_notebook(source), source.name) for source in sources}


def typed_parameters(parameters: dict, declared: dict[str, dict[str, ParameterType]]) -> dict:
    """``parameters`` converted to the types the chapters' ``parameters`` cells declare (``declared``, from
    ``chapter_parameter_types``). Every parameter must be declared by at least one of them: papermill only
    warns about an unknown name and runs with the defaults, so a typo (``-p profle=gpu``) would silently run
    the default profile. And text must become the declared type: ``-p full_sweep=false`` injected as the
    string "false" is true in the chapter."""
    names = {name for types in declared.values() for name in types}
    unknown = sorted(set(parameters) - names)
    if unknown:
        raise ValueError(f"parameter(s) {unknown} are declared by no notebook run here; the notebooks declare "
                         f"{sorted(names)}")
    return {name: _typed(name, value, declared) for name, value in parameters.items()}


def _typed(name: str, value, declared: dict[str, dict[str, ParameterType]]):
    """``value`` as the one type every chapter declaring ``name`` gives it."""
    chapters_of = defaultdict(list)
    for chapter, types in declared.items():
        if name in types:
            chapters_of[types[name]].append(chapter)
    if len(chapters_of) > 1:
        raise ValueError(f"parameter {name} is declared with different types, so no one value suits every chapter: "
                         + "; ".join(f"{kind} by {', '.join(chapters)}" for kind, chapters in chapters_of.items()))
    [(kind, chapters)] = chapters_of.items()
    try:
        return kind.convert(value)
    except ValueError as err:
        raise ValueError(f"parameter {name}={value!r} is not of type {kind}, which chapter{'s' * (len(chapters) > 1)} "
                         f"{', '.join(chapters)} declare{'s' * (len(chapters) == 1)} for it ({err})") from None


# the parameters the runner sets itself, and the flag that sets each: a -p for one of them must agree
RUNNER_SET = {"profile": "--profile"}


def notebook_parameters(profile: str, parameters: dict, sources: list[Path]) -> dict:
    """What the chapters in ``sources`` are given: ``parameters`` (``-p``) as their declared types, beside
    the ones the runner sets itself. Raises before anything runs on a bad one."""
    declared = chapter_parameter_types(sources)
    runner = typed_parameters({"profile": profile}, declared)
    given = typed_parameters(parameters, declared)
    for name in sorted(runner.keys() & given.keys()):
        if given[name] != runner[name]:
            # a -p profile would run one profile's notebooks on another's staging and artifacts
            raise ValueError(f"parameter {name}={parameters[name]!r} disagrees with {RUNNER_SET[name]} "
                             f"{runner[name]}: the runner sets {name} from {RUNNER_SET[name]}, give it there")
    return {**runner, **given}


def execute_notebook(source: Path, output: Path, parameters: dict, cwd: Path = NOTEBOOK_DIR,
                     progress: bool = True) -> float:
    """Convert a MyST notebook and execute it with papermill (a per-cell progress bar), injecting
    only the ``parameters`` its parameters cell declares; returns wall seconds."""
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    notebook = read_notebook(source)
    declared = declared_parameters(notebook, source.name)
    parameters = {k: v for k, v in parameters.items() if k in declared}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    output.parent.mkdir(parents=True, exist_ok=True)
    unexecuted = output.with_suffix(".input.ipynb")
    jupytext.write(notebook, unexecuted, fmt="ipynb")
    start = time.perf_counter()
    try:
        papermill.execute_notebook(str(unexecuted), str(output), parameters=parameters, kernel_name="python3",
                                   cwd=str(cwd), progress_bar={"desc": source.stem} if progress else False,
                                   log_output=False)
    except PapermillExecutionError as err:
        raise NotebookFailed(
            f"notebook {source.name} failed in cell {err.cell_index} (execution count {err.exec_count}): "
            f"{err.ename}: {err.evalue}\n  the partly executed copy is {output}") from err
    finally:
        unexecuted.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    hide_injected_parameters(output)
    return seconds


INJECTED_TAG = "injected-parameters"    # papermill's tag on the cell it adds after ``parameters``
HIDDEN_TAG = "remove-cell"              # myst-nb renders neither the input nor the output of such a cell


def hide_injected_parameters(notebook_path: Path) -> None:
    """Tag papermill's injected-parameters cell so the book does not render it: the page would show
    the setting twice, once in the chapter's own ``parameters`` cell and once as papermill's
    ``# Parameters`` block. The executed notebook keeps the cell (it records what the run was given);
    the chapter's findings box names the profile and the other parameters the run was given."""
    import nbformat  # the [book] extra, like papermill: the library imports without it

    notebook = nbformat.read(notebook_path, as_version=4)
    changed = False
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if INJECTED_TAG in tags and HIDDEN_TAG not in tags:
            cell.metadata["tags"] = [*tags, HIDDEN_TAG]
            changed = True
    if changed:
        atomic_save(notebook_path, lambda p: nbformat.write(notebook, p))


def build_book(stage: Path, book_out: Path) -> Path:
    """``jupyter-book build`` in nitpicky mode (every cross-reference must resolve) with warnings as
    errors; returns the HTML index."""
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(stage),
           "--path-output", str(book_out), "-n", "-W", "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise RuntimeError(f"jupyter-book build of {stage} failed (exit {proc.returncode}):\n{tail}")
    index = book_out / "_build" / "html" / "index.html"
    if not index.exists():
        raise RuntimeError(f"jupyter-book reported success but {index} is missing")
    return index


def _parse_parameter(text: str) -> tuple[str, str]:
    """A ``-p name=value`` as (name, the value's text): the text becomes the type the chapters declare
    (``typed_parameters``), not whatever Python literal it happens to read as."""
    if "=" not in text:
        raise ValueError(f"parameter {text!r} must look like name=value")
    name, raw = text.split("=", 1)
    return name.strip(), raw


def _record_times(times_csv: Path, times: list[dict], keep_others: bool) -> None:
    """This run's notebook times; an ``--only`` run keeps the other chapters' earlier times."""
    frame = pd.DataFrame(times)
    if keep_others and times_csv.exists():
        earlier = pd.read_csv(times_csv)
        frame = pd.concat([earlier[~earlier["notebook"].isin(frame["notebook"])], frame]).sort_values("notebook")
    atomic_save(times_csv, lambda p: frame.to_csv(p, index=False))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def progress_line(finished: str, seconds: float, elapsed: float, remaining: list[str],
                  last_times: dict[str, float], basis: str = "their last recorded times",
                  running: dict[str, float] | None = None, jobs: int = 1) -> str:
    """The line printed after each chapter: its time, the run's elapsed time and an estimate for
    the chapters still to run (``remaining`` waiting, ``running`` {chapter: seconds so far}) from
    ``last_times``, read from ``basis``, replaying the run's schedule ``jobs`` at a time; it names
    the chapters never timed."""
    running = running or {}
    left = sorted([*remaining, *running])
    line = f"[negbook] {finished} done in {_minutes(seconds)}; elapsed {_minutes(elapsed)}"
    if not left:
        return line + "; all chapters executed"
    line += f"; {len(left)} to go" + (f" ({', '.join(sorted(running))} running)" if running else "")
    unknown = [n for n in left if n not in last_times]
    if len(unknown) == len(left):       # a first run: an estimate of "0 s" would be a plausible wrong number
        return line + ", none timed before, so no estimate yet"
    rest = estimate_seconds(remaining, running, last_times, chapter_needs([finished, *left]), jobs)
    line += f", about {_minutes(rest)} by {basis}"
    if unknown:
        line += f" (no recorded time for {', '.join(unknown)}, so at least that)"
    return line


def last_recorded_times(times_csv: Path) -> dict[str, float]:
    """{notebook: seconds} of the last run recorded in ``times_csv`` (empty when there is none)."""
    if not times_csv.exists():
        return {}
    frame = pd.read_csv(times_csv)
    return dict(zip(frame["notebook"], frame["seconds"].astype(float)))


def measured_times(profile: str) -> dict[str, float]:
    """{notebook: seconds} of the profile's run committed in ``bench/results/main_job_notebooks.csv``
    (a fresh clone's estimate before it has timed anything itself; empty when there is none)."""
    path = BENCH_RESULTS / "main_job_notebooks.csv"
    if not path.exists():
        return {}
    frame = pd.read_csv(path)
    frame = frame[frame["profile"] == profile]
    return dict(zip(frame["notebook"], frame["seconds"].astype(float)))


# chapters a backbone list (``-p backbones``) runs once per backbone; the others (chapter 06's tables across
# backbones, chapter 07's organisms, the appendix) run once, after every backbone's chapters
PER_BACKBONE_CHAPTERS = ("00_world_and_backbone", "01_data_construction", "02_representational_collapse",
                         "03_peakpatch", "04_ktn", "05_lcse")
BACKBONE_PARAMETERS = ("backbone", "pretrained", "checkpoint")


def backbone_runs(prof: Profile, parameters: dict) -> list[Profile]:
    """The profile once per backbone the run covers, in order (the first is the one whose pages the book
    shows): ``-p backbones=A,B`` (``parameters["backbones"]``, removed from ``parameters``), else the
    profile's ``backbones``, else one backbone from ``-p backbone/pretrained/checkpoint`` or the profile's
    own. A backbone list and a single ``-p backbone`` at once is an error: which one would run?"""
    specs = parse_backbones(parameters.pop("backbones", None) or prof.backbones)
    single = {k: parameters[k] for k in BACKBONE_PARAMETERS if parameters.get(k) is not None}
    if specs and single:
        raise ValueError(f"-p backbones names each backbone's weights; drop -p {', -p '.join(sorted(single))} "
                         f"(or write it into the list, e.g. backbones={specs[0]})")
    if not specs:
        return [dataclasses.replace(prof, **single)]
    for name in BACKBONE_PARAMETERS:
        parameters.pop(name, None)
    return [prof.with_backbone(spec) for spec in specs]


def backbone_parameters(prof: Profile) -> dict:
    """The notebook parameters that open ``prof``'s backbone (None leaves a chapter's default)."""
    return {"backbone": prof.backbone, "pretrained": prof.pretrained, "checkpoint": prof.checkpoint}


def run(profile: str, only: list[str] | None = None, parameters: dict | None = None,
        book_out: Path | None = None, build: bool = True, jobs: int | None = None) -> dict:
    """Execute the profile's chapters (``only`` these), ``jobs`` at a time (the profile's
    ``chapter_jobs`` by default), then build the book unless ``build`` is False. With several
    backbones (``backbone_runs``), the ``PER_BACKBONE_CHAPTERS`` run first for each backbone after the
    first, each under its own ``run_dir``, then the first backbone's run with every chapter and the book."""
    prof = get_profile(profile)
    jobs = prof.chapter_jobs if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1 (got {jobs})")
    parameters = dict(parameters or {})
    runs = backbone_runs(prof, parameters)
    params = notebook_parameters(profile, parameters, notebook_sources(only))   # before anything is staged
    for other in runs[1:]:
        chapters = [s.stem for s in notebook_sources(only) if s.stem in PER_BACKBONE_CHAPTERS]
        if chapters:
            print(f"[negbook] backbone {other.backbone_label()}: {', '.join(chapters)} into {other.run_dir()}",
                  flush=True)
            _run_backbone(other, chapters, params, None, build=False, jobs=jobs)
    return _run_backbone(runs[0], only, params, book_out, build, jobs)


def _run_backbone(prof: Profile, only: list[str] | None, params: dict, book_out: Path | None, build: bool,
                  jobs: int) -> dict:
    """One backbone's run: its chapters staged and executed under its ``run_dir``, then the book."""
    params = {**params, **{k: v for k, v in backbone_parameters(prof).items() if v is not None}}
    environment = {}
    if prof.dry_run:            # the kernels inherit the environment that points them at the dry run's files
        environment, inputs = dry_run_inputs(prof)
        params = {**params, **inputs}
        prof = dataclasses.replace(prof, checkpoint=inputs["checkpoint"])
        print(f"[negbook] dry run of the real path: {prof.backbone} from {inputs['checkpoint']}"
              + (f", the released NegFull from {inputs['negfull_checkpoint']}" if "negfull_checkpoint" in inputs
                 else "") + "; " + ", ".join(f"{k}={v}" for k, v in environment.items()), flush=True)
    stage = stage_book(prof.run_dir() / "book_src", keep_chapters=bool(only))
    # the chapters' findings boxes name what the run was given, since the page hides papermill's cell
    environment[RUN_PARAMETERS_VARIABLE] = json.dumps({k: v for k, v in params.items() if k != "profile"},
                                                      sort_keys=True, default=str)
    with _environment(environment):
        return _execute(prof, only, params, stage, book_out, build, jobs)


@contextlib.contextmanager
def _environment(variables: dict[str, str]):
    """``variables`` set in os.environ (which papermill's kernels inherit) for the block, then restored."""
    before = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _execute_with(environment: dict[str, str], source: Path, output: Path, parameters: dict) -> float:
    """``execute_notebook`` in a worker process, its kernel started under ``environment``."""
    with _environment(environment):
        return execute_notebook(source, output, parameters)


def _execute(prof, only, params: dict, stage: Path, book_out: Path | None, build: bool, jobs: int) -> dict:
    profile, results = prof.name, prof.results_dir()
    times = []
    times_csv = results / "notebook_times.csv"
    sources = {s.stem: s for s in notebook_sources(only)}
    last_times, basis, when = last_recorded_times(times_csv), "their last recorded times", "last time"
    if not last_times:          # a fresh clone: the committed measurement of a whole run, said so
        last_times, basis, when = measured_times(profile), "bench/results/main_job_notebooks.csv's run", \
            "in the committed measurement"
    needs, book = chapter_needs(list(sources)), [s.stem for s in notebook_sources()]
    sharing = may_share_cores(needs, jobs)
    shared_environment = {k: v for k, v in SHARED_CORES_ENVIRONMENT.items() if k not in os.environ}
    waiting, done, running, failures = sorted(sources), set(), {}, []
    started = time.perf_counter()
    # each chapter's papermill runs in a worker process, so its kernel starts under its own environment;
    # forked (a spawned worker re-imports this module first, delaying the first chapter): the workers only
    # drive kernels
    with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
        while True:
            for stem in [] if failures else chapters_to_start(waiting, done, jobs - len(running), needs, last_times):
                waiting.remove(stem)
                last = f", {_minutes(last_times[stem])} {when}" if stem in last_times else ""
                beside = f", beside {', '.join(n for n, _ in running.values())}" if running else ""
                print(f"[negbook] executing {sources[stem].name} (profile {profile}{last}{beside})", flush=True)
                # the chapter's name on what it writes to the shared memos, and whose entries it reads (models.memo)
                reads = ",".join(sorted(chapter_reads(stem, book)))
                environment = {WRITER_VARIABLE: stem, READS_VARIABLE: reads,
                               **(shared_environment if stem in sharing else {})}
                output = stage / CHAPTER_DIR / f"{stem}.ipynb"
                future = pool.submit(_execute_with, environment, sources[stem], output, params)
                running[future] = (stem, time.perf_counter())
            if not running:
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: running[f][0]):
                stem, _ = running.pop(future)
                try:
                    seconds = future.result()
                except NotebookFailed as err:
                    failures.append(err)
                    continue
                done.add(stem)
                times.append({"profile": profile, "notebook": stem, "seconds": round(seconds, 2)})
                now = time.perf_counter()
                print(progress_line(stem, seconds, now - started, waiting, last_times, basis,
                                    running={n: now - t for n, t in running.values()}, jobs=jobs), flush=True)
                # after every notebook, so a later chapter (the performance appendix) sees this run's times
                _record_times(times_csv, sorted(times, key=lambda t: t["notebook"]), keep_others=bool(only))
    if failures:
        skipped = f"; not started: {', '.join(waiting)}" if waiting else ""
        raise NotebookFailed("\n".join(str(f) for f in failures) + skipped) from failures[0]
    out = {"stage": stage, "times": times}
    # the intro page's headline, from every chapter's results this profile has (an --only run included)
    atomic_write_text(stage / HEADLINE_FILE, book_headline(get_profile(profile).results_dir(), profile))
    if build:
        book_out = Path(book_out) if book_out else (BOOK_DIR if profile == "cpu" else prof.artifacts_dir() / "book")
        out["index"] = build_book(stage, book_out)
        print(f"[negbook] book: {out['index']}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m negutils.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu", help="smoke | cpu | gpu | gpu-dryrun (default cpu)")
    parser.add_argument("--only", nargs="*", help="run only these notebooks (names without .md)")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="a notebook parameter, as the type its chapters' parameters cell declares "
                        "(repeatable; the profile is --profile's)")
    parser.add_argument("--book-out", type=Path, help="folder that receives _build/html "
                        "(default: book/ for cpu, artifacts/<profile>/book otherwise)")
    parser.add_argument("--no-book", action="store_true", help="execute the notebooks but do not build the book")
    parser.add_argument("--jobs", type=int, help="chapters run at the same time where their dependencies allow "
                        "(default: the profile's chapter_jobs, 2 on CPU profiles, 1 on gpu)")
    args = parser.parse_args(argv)
    try:
        run(args.profile, args.only, dict(_parse_parameter(p) for p in args.parameter), args.book_out,
            build=not args.no_book, jobs=args.jobs)
    except (NotebookFailed, RuntimeError, ValueError) as err:
        print(f"[negbook] error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
