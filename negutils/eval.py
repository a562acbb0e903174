"""``negbook eval``: any open_clip model on the book's negation benchmarks in one command, in
CLIP_benchmark's spirit (``clip_benchmark eval --model ... --pretrained ... --dataset ...``), with the
book's methods beside it: the output is a model x method x benchmark table, one JSON row per
(model, weights, method, split, task) in CLIP_benchmark's shape plus ``split`` and ``method``.

    negbook eval --model ViT-B-32 --pretrained openai --benchmark all --method vanilla ktn lcse \\
        --data-root /data/negbook --output results.jsonl
    python -m negutils.eval --model ViT-B-32 --checkpoint weights.pt --activation quickgelu \\
        --benchmark negbench-mcq --method vanilla peakpatch:artifacts/gpu/peakpatch/export/peakpatch-joint-negbench.pt
    negbook eval --model ViT-B-32 ViT-B-16 --pretrained openai laion2b_s34b_b88k --method vanilla ktn \\
        --skip-existing --output results.jsonl
    negbook eval --models models.csv --method vanilla ec --skip-existing --output results.jsonl

Several models: ``--model A B ...`` with one ``--pretrained`` tag or one ``--checkpoint`` file per
model, in the same order (``--activation``: one for every model, or one per model), or ``--models
FILE``, a CSV with the columns ``model,pretrained,checkpoint,activation`` (one row per model, its tag
or its checkpoint; activation may be empty). They are evaluated one after another on data read once,
and --output is rewritten whole after each model, so an interrupted run keeps the models done.
``--skip-existing`` keeps the rows already in --output and skips a model whose rows there are complete.

Data: ``--data-root`` is a folder laid out as ``data_recipes/published_layouts.py`` writes it
(``coco/``, ``voc/VOCdevkit/VOC2007``, ``negbench/``), or set ``COCO_IMAGE_ROOT``, ``VOC_ROOT`` and
``NEGBENCH_CSV_DIR`` as for the ``gpu`` profile. The evaluation is the chapters' own code
(``Session.benchmarks``, ``build_scorer``, ``evaluate_benchmarks``), so a row here equals the row
a chapter computes for the same model.

Every argument of every model is checked before any data or weights load (``check_arguments``); each
loaded model's report (tensors, activation and what decided it, source) is printed before it is scored,
and the first one's before the data is read (with --skip-existing and rows of a model already in
--output, the data is read first: it decides whether those rows are complete).
A checkpoint that records no activation (open_clip's training format) needs ``--activation``."""
from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .benchmarks.published import PUBLISHED_LAYOUT
from .benchmarks.suite import Benchmarks, evaluate_benchmarks
from .config import Profile, get_profile
from .core.cache import atomic_save
from .methods.lcse import Calibration, default_calibration
from .methods.lcse_analysis import calibration_set, fit_on_split
from .methods.peakpatch.export import load_peakpatch, read_export
from .methods.registry import build_scorer, method, scorer_dict
from .models import weights
from .models.backbone import Backbone, load_backbone
from .session import Session, data_key, load_splits, model_session
from .world.coco import CocoSplit

# benchmark name on the command line -> the suite's task names (FACTOR's are its splits)
BENCHMARKS = {"negbench-mcq": ("mcq",),
              "negbench-retrieval": ("retrieval", "retrieval_negated", "retrieval_negated_any"),
              "coco-confusion-2c": ("confusion_2c",), "coco-confusion-3c": ("confusion_3c",), "factor": ("factor",),
              "valse": ("valse_existence",)}
# benchmark name -> the ``Benchmarks`` frames its items come from
FRAMES = {"negbench-mcq": ("mcq",), "negbench-retrieval": ("retrieval_affirmative", "retrieval_negated"),
          "coco-confusion-2c": ("confusion_2c",), "coco-confusion-3c": ("confusion_3c",), "factor": ("factor",),
          "valse": ("existence",)}
# task -> the frame it scores: ``evaluate_benchmarks`` writes no row for a task whose frame is empty
TASK_FRAMES = {"mcq": "mcq", "retrieval": "retrieval_affirmative", "retrieval_negated": "retrieval_negated",
               "retrieval_negated_any": "retrieval_negated", "confusion_2c": "confusion_2c",
               "confusion_3c": "confusion_3c", "valse_existence": "existence"}
CAPTIONED = ("retrieval_affirmative", "retrieval_negated")      # built from the split's captions
METHODS = ("vanilla", "ec", "ktn", "lcse")
PEAKPATCH = "peakpatch:"        # peakpatch:FILE, a PeakPatch export (chapter 03 writes the joint model's)
FIT = "fit"
MODEL_COLUMNS = ("model", "pretrained", "checkpoint", "activation")     # --models FILE's header
# what identifies a result row: its model and weights, then its cell of the table
ROW_KEYS = ("model", "pretrained", "dataset", "split", "task", "method")


class UsageError(ValueError):
    """Arguments that cannot run as given, found before any data or weights load."""


class ModelFailed(RuntimeError):
    """One model of several failed; the error says which, and what --output holds."""


def method_spec(text: str) -> str:
    """``--method``'s values: a training-free method's name, or ``peakpatch:FILE``."""
    if text in METHODS or (text.startswith(PEAKPATCH) and len(text) > len(PEAKPATCH)):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(METHODS)} or peakpatch:FILE")


def positive_int(text: str) -> int:
    """``--batch-size``'s value: a whole number of images, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1 (images per encoder batch)")
    return value


def calibration_spec(text: str) -> Calibration | str:
    """``--lcse-calibration``'s value: ``fit``, or LCSE's (mu, beta) as ``MU,BETA``. In
    p_c = sigm(beta (s_c - mu)), mu is the concept similarity (a cosine) where p_c = 1/2, so in
    [-1, 1]; beta is an inverse temperature that LCSE also divides by, so finite and positive."""
    if text == FIT:
        return FIT
    try:
        mu, beta = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MU,BETA (e.g. 0.22,30) or {FIT}") from None
    if not (math.isfinite(mu) and -1.0 <= mu <= 1.0):
        raise argparse.ArgumentTypeError(f"{text!r}: mu = {mu:g} is not a cosine similarity in [-1, 1] (the concept "
                                         "score at which LCSE's evidence p_c is 1/2)")
    if not (math.isfinite(beta) and beta > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: beta = {beta:g} is not a finite positive inverse temperature "
                                         "(p_c = sigm(beta (s_c - mu)), and LCSE divides its correction by beta)")
    return Calibration(mu, beta, "--lcse-calibration")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    paragraphs = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(prog="negbook eval", description=paragraphs[0],
                                     epilog=next(p for p in paragraphs if p.startswith("Several models")))
    parser.add_argument("--model", nargs="+", metavar="NAME",
                        help="an open_clip config name, e.g. ViT-B-32; several are evaluated one after another, "
                        "each with its own --pretrained tag or --checkpoint file, in the same order")
    weights_from = parser.add_mutually_exclusive_group()
    weights_from.add_argument("--pretrained", nargs="+", metavar="TAG",
                              help="an open_clip pretrained tag per --model, e.g. openai")
    weights_from.add_argument("--checkpoint", nargs="+", type=Path, metavar="FILE",
                              help="a local weights file per --model (every key is checked); its path is the rows' "
                              "pretrained")
    parser.add_argument("--activation", nargs="+", choices=list(weights.ACTIVATIONS),
                        help="the activation the weights were trained with, one for every model or one per model: "
                        "required for a --checkpoint that records none (quickgelu for weights descended from "
                        "OpenAI's CLIP); a tag, or a checkpoint that records it, decides, and a different "
                        "--activation is an error")
    parser.add_argument("--models", type=Path, metavar="FILE",
                        help=f"instead of --model, --pretrained/--checkpoint and --activation: a CSV with the header "
                        f"{','.join(MODEL_COLUMNS)} and one row per model, giving its pretrained tag or its "
                        "checkpoint file (relative to the current folder, as on the command line) and, where the "
                        "weights do not decide it, its activation")
    parser.add_argument("--benchmark", nargs="+", default=["all"], choices=[*BENCHMARKS, "all"],
                        help="benchmarks to score, each once; 'all' scores every one with items on the data (and "
                        "names those without), a named one without items is an error")
    parser.add_argument("--method", nargs="+", default=["vanilla"], type=method_spec,
                        help=f"{', '.join(METHODS)} or peakpatch:FILE (a PeakPatch export, which fits the one backbone "
                        "it was trained on: one model only); several allowed, each once")
    parser.add_argument("--lcse-calibration", metavar="MU,BETA|fit", type=calibration_spec,
                        help="LCSE's (mu, beta), mu in [-1, 1] and beta > 0 (one model only: they are a backbone's), "
                        "or 'fit': fitted for each model on the profile's calibration split (a held-out subset of "
                        "COCO train2017, as LCSE App. A; needs train2017 under $COCO_IMAGE_ROOT); default: the LCSE "
                        "paper's values for CLIP or SigLIP2 models")
    parser.add_argument("--data-root", type=Path, help="a folder with coco/, voc/ and negbench/ "
                        "(data_recipes/published_layouts.py's layout), for a profile of the coco dataset; "
                        "default: the environment variables")
    parser.add_argument("--profile", default="gpu", help="the profile whose benchmark settings and artifacts "
                        "folder are used (gpu; gpu-dryrun for the dry run's files)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--batch-size", type=positive_int, help="images per encoder batch (default: the chapters')")
    parser.add_argument("--accept-identical-options", action="store_true",
                        help="score questions whose options tokenise identically as ties (default: an error)")
    parser.add_argument("--output", type=Path, default=Path("results.jsonl"),
                        help="the JSONL file to write, rewritten whole after each model (an existing one is "
                        "replaced, unless it is an input or --skip-existing is given)")
    parser.add_argument("--skip-existing", action="store_true",
                        help="keep the rows already in --output (those of other models too) and skip a model whose "
                        "rows there are complete: one row for every requested method on every requested benchmark's "
                        "tasks on every split read; a model with some missing is evaluated again and its rows for "
                        "the requested methods and benchmarks replaced")
    args = parser.parse_args(argv)
    if args.models is not None:
        given = [flag for flag in ("model", "pretrained", "checkpoint", "activation") if getattr(args, flag)]
        if given:
            parser.error(f"--models lists each model with its weights and activation: drop "
                         f"{', '.join('--' + flag for flag in given)}, or drop --models")
    elif args.model is None:
        parser.error("the following arguments are required: --model (or --models FILE)")
    elif args.pretrained is None and args.checkpoint is None:
        parser.error("one of the arguments --pretrained --checkpoint is required")
    return args


@dataclass(frozen=True)
class ModelSpec:
    """One model of the run as given, and how an error names it."""
    model: str
    pretrained: str | None
    checkpoint: Path | None
    activation: str | None
    position: str = ""       # "" for the one-model command line; else e.g. "model 2 of 3", "--models FILE line 3"
    in_file: bool = False    # given in --models FILE: its flags are the file's columns

    @property
    def label(self) -> str:
        """The rows' ``pretrained``: the tag, or the checkpoint's path as given."""
        return str(self.checkpoint) if self.checkpoint is not None else self.pretrained

    @property
    def key(self) -> tuple[str, str]:
        """(model, pretrained): the rows of this model in --output."""
        return self.model, self.label

    @property
    def where(self) -> str:
        """How an error names this model among several, e.g. ``model 2 of 3 (ViT-B-32, --pretrained openai)``."""
        return f"{self.position} ({self.name})" if self.position else ""

    @property
    def name(self) -> str:
        """The model and its weights in words, e.g. ``ViT-B-32, --pretrained openai``."""
        return f"{self.model}, {self.flag('checkpoint' if self.checkpoint is not None else 'pretrained')} {self.label}"

    def flag(self, column: str) -> str:
        """How the command line named ``column``: ``--checkpoint``, or ``column checkpoint`` of --models."""
        return f"column {column}" if self.in_file else f"--{column}"

    def named(self, message: str) -> str:
        """``message`` about this model, prefixed with its position when there are several."""
        return f"{self.where}: {message}" if self.where else message


def model_specs(args: argparse.Namespace) -> list[ModelSpec]:
    """The models of the command line, each with its weights and activation, in order."""
    if args.models is not None:
        return read_models_file(args.models)
    n = len(args.model)
    tags, files = args.pretrained or [None] * n, args.checkpoint or [None] * n
    flag, given = ("--pretrained", args.pretrained) if args.pretrained is not None else ("--checkpoint", files)
    if len(given) != n:
        noun = ("tag" if flag == "--pretrained" else "file") + ("s" if len(given) > 1 else "")
        raise UsageError(f"{flag} gives {len(given)} {noun} for {n} "
                         f"--model ({' '.join(args.model)}): give one per model, in --model's order")
    activations = args.activation or [None]
    if len(activations) not in (1, n):
        raise UsageError(f"--activation gives {len(activations)} values for {n} --model: give one for every model, "
                         "or one per model in --model's order (or list the models in --models FILE, whose "
                         "activation column may be empty where the weights decide)")
    activations = activations * n if len(activations) == 1 else activations
    return [ModelSpec(*values, position=f"model {i} of {n}" if n > 1 else "")
            for i, values in enumerate(zip(args.model, tags, files, activations), 1)]


def read_models_file(path: Path) -> list[ModelSpec]:
    """--models FILE's rows, each checked for its form (a model, a tag or a checkpoint, a known activation)."""
    if not path.is_file():
        raise UsageError(f"--models {path} " + ("is a folder" if path.is_dir() else "does not exist")
                         + f": name a CSV with the header {','.join(MODEL_COLUMNS)}")
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = [name.strip() for name in reader.fieldnames or []]
            check_models_header(path, header)
            reader.fieldnames = header
            specs = [model_row(path, reader.line_num, record) for record in reader]
    except (csv.Error, UnicodeDecodeError) as err:
        raise UsageError(f"--models {path} is no CSV ({err})") from err
    if not specs:
        raise UsageError(f"--models {path} lists no model: add a row per model under its header")
    return specs


def check_models_header(path: Path, header: list[str]) -> None:
    expected = f"expected the header {','.join(MODEL_COLUMNS)} (pretrained or checkpoint may be left out)"
    unknown = [name for name in header if name not in MODEL_COLUMNS]
    repeated = sorted({name for name in header if header.count(name) > 1})
    if unknown or repeated:
        why = f"unknown column {', '.join(map(repr, unknown))}" if unknown else f"column {', '.join(repeated)} twice"
        raise UsageError(f"--models {path} line 1 has {why}: {expected}")
    if "model" not in header or not {"pretrained", "checkpoint"} & set(header):
        raise UsageError(f"--models {path} line 1 has no column " + ("model" if "model" not in header else
                         "pretrained or checkpoint") + f": {expected}")


def model_row(path: Path, line: int, record: dict) -> ModelSpec:
    """One row of --models FILE (``line``: where it ends in the file)."""
    if None in record:
        raise UsageError(f"--models {path} line {line} has {len(record) - 1 + len(record[None])} fields, its header "
                         f"{len(record) - 1}: quote a value that holds a comma")
    value = {column: (record.get(column) or "").strip() for column in MODEL_COLUMNS}
    where = f"--models {path} line {line}"
    if not value["model"]:
        raise UsageError(f"{where}: column model is empty: name an open_clip config, e.g. ViT-B-32")
    if bool(value["pretrained"]) == bool(value["checkpoint"]):
        raise UsageError(f"{where} ({value['model']}): give column pretrained (an open_clip tag) or column checkpoint "
                         f"(a weights file), {'not both' if value['pretrained'] else 'one of them'}")
    if value["activation"] and value["activation"] not in weights.ACTIVATIONS:
        raise UsageError(f"{where} ({value['model']}): column activation {value['activation']!r}: expected "
                         f"{' or '.join(weights.ACTIVATIONS)}, or empty where the weights decide")
    return ModelSpec(value["model"], value["pretrained"] or None, Path(value["checkpoint"]) if value["checkpoint"]
                     else None, value["activation"] or None, where, in_file=True)


@dataclass(frozen=True)
class ModelPlan:
    """One model's checked arguments."""
    spec: ModelSpec
    profile: Profile
    quick_gelu: bool | None          # load_backbone's: None lets --pretrained's tag decide


@dataclass(frozen=True)
class Plan:
    """What the checked arguments decide before anything loads."""
    profile: Profile                 # the first model's: the data's settings are every model's
    environment: dict[str, str]      # the dataset variables --data-root stands for
    models: tuple[ModelPlan, ...]
    methods: dict[str, str]          # --method's value -> its rows' method
    existing: tuple[dict, ...]       # --skip-existing: the rows already in --output


def check_arguments(args: argparse.Namespace) -> Plan:
    """Every check of the command line that needs neither data nor weights, run before either loads
    (argparse has checked each value's form): the profile and --data-root, repeated benchmarks or
    methods, every model's weights and activation (and no model twice), LCSE's calibration, PeakPatch
    exports, --output, and with --skip-existing the rows already in it."""
    specs = model_specs(args)
    environment = data_environment(args.data_root, get_profile(args.profile))
    refuse_repeats(args)
    refuse_for_several(args, len(specs))
    models = tuple(check_model(spec, args, several=len(specs) > 1) for spec in specs)
    refuse_repeated_models(specs)
    methods = method_names(args.method)
    check_output(args.output, input_files(args, specs), data_folders({**os.environ, **environment}))
    existing = tuple(read_existing(args.output)) if args.skip_existing and args.output.exists() else ()
    return Plan(models[0].profile, environment, models, methods, existing)


def refuse_for_several(args: argparse.Namespace, n: int) -> None:
    """What belongs to one backbone cannot be given to several: LCSE's (mu, beta) and a PeakPatch export."""
    if n == 1:
        return
    if isinstance(args.lcse_calibration, Calibration):
        raise UsageError(f"--lcse-calibration {args.lcse_calibration.mu:g},{args.lcse_calibration.beta:g} is one "
                         f"backbone's (mu, beta), and {n} models are given: pass --lcse-calibration {FIT} (fitted "
                         "for each model), leave it out (the paper's values, for the models it calibrated), or "
                         "evaluate each model on its own")
    exports = [spec for spec in args.method if spec.startswith(PEAKPATCH)]
    if exports:
        raise UsageError(f"--method {exports[0]}: a PeakPatch export fits the one backbone it was trained on, and {n} "
                         "models are given: evaluate it with its own model alone")


def check_model(spec: ModelSpec, args: argparse.Namespace, several: bool) -> ModelPlan:
    """One model's weights, activation and LCSE calibration, named by its position when there are several."""
    profile = get_profile(args.profile, backbone=spec.model, pretrained=spec.pretrained)
    quick_gelu = activation(spec)
    if "lcse" in args.method and calibration(spec.model, args.lcse_calibration) is None \
            and args.lcse_calibration != FIT:
        fixed = "" if several else " MU,BETA or"          # one (mu, beta) is one backbone's
        raise UsageError(spec.named(f"LCSE has no published (mu, beta) for {spec.model}: pass --lcse-calibration"
                                    f"{fixed} {FIT}"))
    return ModelPlan(spec, profile, quick_gelu)


def activation(spec: ModelSpec) -> bool | None:
    """``load_backbone``'s ``quick_gelu`` for these weights (``weights.command_line_activation``)."""
    if spec.pretrained is not None and Path(spec.pretrained).is_file():
        raise UsageError(spec.named(f"{spec.flag('pretrained')} {spec.pretrained} is a file: pass it as "
                                    f"{spec.flag('checkpoint')} ({spec.flag('pretrained')} takes an open_clip tag)"))
    if spec.checkpoint is not None and not spec.checkpoint.exists():
        raise FileNotFoundError(spec.named(f"{spec.flag('checkpoint')} {spec.checkpoint} does not exist"))
    try:
        return weights.command_line_activation(spec.model, spec.pretrained, spec.checkpoint, spec.activation)
    except ValueError as err:
        if not spec.where:
            raise
        columns = " (in --models, --checkpoint and --activation are the row's columns)" if spec.in_file else ""
        raise UsageError(spec.named(f"{err}{columns}")) from err


def refuse_repeated_models(specs: list[ModelSpec]) -> None:
    """A model given twice with the same weights (a tag, or one file however spelt) would be scored twice."""
    seen: dict[tuple, ModelSpec] = {}
    for spec in specs:
        weights_id = spec.pretrained if spec.checkpoint is None else spec.checkpoint.resolve()
        first = seen.setdefault((spec.model, spec.checkpoint is None, weights_id), spec)
        if first is not spec:
            raise UsageError(f"{spec.where} repeats {first.position}: the same model and weights would be "
                             "scored twice; give each once")


def method_names(specs: list[str]) -> dict[str, str]:
    """{--method's value: the ``method`` of its rows}: the registry's name, or the one a PeakPatch export
    records (reading each export checks it)."""
    names = {spec: read_export(spec[len(PEAKPATCH):])["name"] if spec.startswith(PEAKPATCH) else method(spec).name
             for spec in specs}
    for spec, name in names.items():
        same = [other for other, n in names.items() if n == name]
        if len(same) > 1:
            raise UsageError(f"--method {' and '.join(same)} both write rows named {name!r}: the table would merge "
                             "them; pass one")
    return names


def data_environment(root: Path | None, profile: Profile) -> dict[str, str]:
    """The dataset variables ``--data-root`` stands for (those already set win); a root without COCO, or
    one given to a profile that does not read COCO, is an error."""
    if root is None:
        return {}
    if profile.dataset != "coco":
        raise UsageError(f"--data-root {root} is for a profile of the coco dataset; --profile {profile.name} "
                         f"reads the {profile.dataset!r} dataset and would ignore it: pass --profile gpu (or "
                         "gpu-dryrun) with --data-root, or drop --data-root")
    if not (root / PUBLISHED_LAYOUT["COCO_IMAGE_ROOT"] / "annotations" / "instances_val2017.json").exists():
        raise FileNotFoundError(f"--data-root {root} has no coco/annotations/instances_val2017.json: write the "
                                "layout with data_recipes/published_layouts.py, or data_recipes/coco2017.py --root "
                                f"{root / 'coco'}")
    return {variable: str(root / sub) for variable, sub in PUBLISHED_LAYOUT.items()
            if variable not in os.environ and (root / sub).exists()}


def refuse_repeats(args: argparse.Namespace) -> None:
    """A benchmark or method named twice would be scored, and written, twice."""
    def key(spec: str) -> str:     # one export spelt two ways is one method
        return PEAKPATCH + str(Path(spec[len(PEAKPATCH):]).resolve()) if spec.startswith(PEAKPATCH) else spec

    for flag, values in (("--benchmark", args.benchmark), ("--method", args.method)):
        keys = [key(v) for v in values]
        repeated = sorted({v for v, k in zip(values, keys) if keys.count(k) > 1})
        if repeated:
            raise UsageError(f"{flag} names {', '.join(repeated)} more than once: name each once")
    if "all" in args.benchmark and len(args.benchmark) > 1:
        raise UsageError(f"--benchmark all already includes {', '.join(b for b in args.benchmark if b != 'all')}: "
                         "pass all, or the benchmarks by name")


def input_files(args: argparse.Namespace, specs: list[ModelSpec]) -> dict[str, Path]:
    """{how the command line names it: path} of every file the evaluation reads besides the data."""
    files = {f"the {spec.flag('checkpoint')}" + (f" of {spec.where}" if spec.where else ""): spec.checkpoint
             for spec in specs if spec.checkpoint is not None}
    if args.models is not None:
        files["the --models file"] = args.models
    files.update({f"the PeakPatch export of --method {spec}": Path(spec[len(PEAKPATCH):])
                  for spec in args.method if spec.startswith(PEAKPATCH)})
    return files


def data_folders(environment: dict[str, str]) -> dict[str, Path]:
    """{variable: folder} of the datasets the evaluation reads."""
    return {variable: Path(environment[variable]) for variable in PUBLISHED_LAYOUT if environment.get(variable)}


def check_output(output: Path, inputs: dict[str, Path], data: dict[str, Path]) -> None:
    """--output must be a file that can be written, and no input: an existing results file is replaced
    (a re-run), but the checkpoint, an export or any existing file of the data never is."""
    if output.is_dir():
        raise UsageError(f"--output {output} is a folder: name the JSONL file to write, "
                         f"e.g. {output / 'results.jsonl'}")
    folder = output.parent
    if not folder.is_dir():
        raise UsageError(f"--output {output}: its folder {folder} does not exist"
                         + (" (it is a file)" if folder.exists() else ""))
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise UsageError(f"--output {output}: no file can be written in {folder} ({err.strerror})") from err
    if not output.exists():
        return
    for what, path in inputs.items():
        if path.exists() and os.path.samefile(output, path):
            raise UsageError(f"--output {output} is {what}: writing the results would overwrite it")
    for variable, root in data.items():
        if output.resolve().is_relative_to(Path(root).resolve()):
            raise UsageError(f"--output {output} is a file of the data in ${variable} ({root}): writing the results "
                             "would overwrite it")


def calibration(model: str, value: Calibration | str | None) -> Calibration | None:
    """LCSE's (mu, beta): ``--lcse-calibration MU,BETA``, else the paper's for a real backbone; None for
    ``fit`` (fitted once the calibration split is read) and for the book's own organisms without it."""
    if value == FIT:
        return None
    if isinstance(value, Calibration):
        return value
    return None if model.startswith("negbook-") else default_calibration(model)


def fitted_calibration(session, batch_size: int | None) -> Calibration:
    """(mu, beta) fitted as chapter 05 fits them: pairwise operator tests of the session's ``pretrain``
    split (COCO train2017's calibration subset on the ``coco`` dataset), the grid maximum."""
    size = {} if batch_size is None else {"batch_size": batch_size}
    split = session.splits["pretrain"]
    tests = calibration_set(split, session.profile.training_free.calibration_samples)
    fit, _ = fit_on_split(build_scorer("vanilla", session.backbone, **size), session.backbone.encode_text, tests, split)
    return Calibration(fit.mu, fit.beta, f"{fit.source}, on {len(tests)} tests of {session.split_source('pretrain')}")


def read_existing(output: Path) -> list[dict]:
    """--output's rows, for --skip-existing: each a JSON object naming its model, weights and cell of the
    table (``ROW_KEYS``), no cell twice; anything else is an error naming the line, before anything loads."""
    keep = "--skip-existing keeps the rows already there: correct or delete that line, or drop --skip-existing to " \
           "replace the file"
    rows: list[dict] = []
    first: dict[tuple, int] = {}            # a row's key -> the line that first gave it
    for number, line in enumerate(output.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        where = f"--output {output} line {number}"
        try:
            row = json.loads(line)
        except ValueError as err:          # not JSON, or not UTF-8
            raise UsageError(f"{where} is not JSON ({err}); {keep}") from err
        if not isinstance(row, dict):
            raise UsageError(f"{where} is a JSON {type(row).__name__}, not a result row (an object); {keep}")
        missing = [key for key in ROW_KEYS if not isinstance(row.get(key), str)]
        if missing:
            raise UsageError(f"{where} is not a result row of negbook eval: no {', '.join(missing)} (a row names "
                             f"{', '.join(ROW_KEYS)}); {keep}")
        key = tuple(row[k] for k in ROW_KEYS)
        if key in first:
            raise UsageError(f"{where} repeats line {first[key]}'s " + ", ".join(f"{k} {v}" for k, v in
                             zip(ROW_KEYS, key)) + f": one cell of the table with two values; {keep}")
        first[key] = number
        rows.append(row)
    return rows


def cell(row: dict) -> tuple[str, str, str, str]:
    """A row's cell of a model's table: (dataset, split, task, method)."""
    return row["dataset"], row["split"], row["task"], row["method"]


class Results:
    """--output's rows by (model, pretrained), in the order first written, rewritten whole (atomically)
    whenever a model's rows change, so the file on disk is always a whole table."""

    def __init__(self, output: Path, rows: tuple[dict, ...] = ()):
        self.output = output
        self.rows: dict[tuple[str, str], list[dict]] = {}
        for row in rows:
            self.rows.setdefault((row["model"], row["pretrained"]), []).append(row)

    def cells(self, key: tuple[str, str]) -> set[tuple]:
        return {cell(row) for row in self.rows.get(key, [])}

    def replace(self, key: tuple[str, str], rows: list[dict]) -> int:
        """``rows`` of model ``key`` in place of its rows of the same cells (its others are kept); the
        file is written at once. Returns the number of rows in it."""
        new = {cell(row) for row in rows}
        self.rows[key] = [row for row in self.rows.get(key, []) if cell(row) not in new] + rows
        table = [row for model_rows in self.rows.values() for row in model_rows]
        atomic_save(self.output, lambda tmp: tmp.write_text("".join(json.dumps(row) + "\n" for row in table)))
        return len(table)


def scorers(session, methods: list[str], lcse_calibration: Calibration | None, batch_size: int | None) -> dict:
    """The chapters' scorers (chapter 04's EC and KTN, chapter 05's LCSE, chapter 03's PeakPatch from
    its export) on the session's backbone."""
    backbone, encode = session.backbone, session.backbone.encode_text
    size = {} if batch_size is None else {"batch_size": batch_size}
    vanilla = build_scorer("vanilla", backbone, **size)
    vocabulary = list(session.splits["val"].categories)
    built = {"vanilla": lambda: vanilla, "ec": lambda: build_scorer("ec", vanilla, encode),
             "ktn": lambda: build_scorer("ktn", build_scorer("vanilla", backbone, flip_average=True, **size),
                                         encode, vocabulary),
             "lcse": lambda: build_scorer("lcse", vanilla, encode, lcse_calibration)}
    return scorer_dict(*(load_peakpatch(m[len(PEAKPATCH):], backbone, image_scorer=vanilla, **size)
                         if m.startswith(PEAKPATCH) else built[m]() for m in methods))


# why a book-built benchmark can come out empty, beyond "too few images"
BUILDER_HINTS = {"confusion_2c": " (a gallery needs the profile's m_min images with the pair's first concept, "
                                 "with and without the second)",
                 "confusion_3c": " (a gallery needs the profile's m_min images holding all three concepts)"}


def why_empty(frame: str, bench: Benchmarks, split: CocoSplit) -> tuple[str, bool]:
    """Why ``bench``'s ``frame`` has no rows, and whether that is a broken input (a published file
    without rows, COCO val2017 without captions) rather than data without what the builder needs."""
    if frame in bench.files:
        return f"{bench.file(frame)} has no rows", True
    if frame in CAPTIONED and not any(split.captions):
        if split.name == "val":
            return "the split has no captions (on COCO: annotations/captions_val2017.json is missing or empty)", True
        return "the split has no captions (VOC2007 has none)", False
    return f"the book's builder finds none in its {len(split)} images{BUILDER_HINTS.get(frame, '')}", False


def benchmarks_to_score(bench: dict[str, Benchmarks], splits: dict[str, CocoSplit],
                        requested: list[str]) -> dict[str, list[str]]:
    """{split: the requested benchmarks with items there}, run after the benchmarks are built and before
    any scoring. An empty benchmark is printed as a note, and is an error when its input is broken
    (``why_empty``) or when it was named (not ``all``) and has items on no split: its rows would be
    missing from the output without a word."""
    names = list(BENCHMARKS) if "all" in requested else requested
    plan: dict[str, list[str]] = {s: [] for s in bench}
    errors, notes = [], []
    for name in names:
        empty = []
        for s, b in bench.items():
            frames = [f for f in FRAMES[name] if not len(getattr(b, f))]
            empty += [(s, f, *why_empty(f, b, splits[s])) for f in frames]
            if len(frames) < len(FRAMES[name]):
                plan[s].append(name)
        unscored = "all" not in requested and not any(name in scored for scored in plan.values())
        for s, frame, why, broken in empty:
            (errors if broken or unscored else notes).append(f"{name} on split {s} is empty ({frame}): {why}")
    for note in notes:
        print(f"negbook eval: note: {note}; not scored there")
    if errors:
        raise ValueError("; ".join(errors) + "; nothing was scored")
    return plan


def benchmark_splits() -> tuple[str, ...]:
    """The splits scored: COCO val2017, and VOC2007 test when $VOC_ROOT is set."""
    return ("val", "ood") if os.environ.get("VOC_ROOT") else ("val",)


def data_session(profile: Profile, splits: dict[str, CocoSplit]) -> Session:
    """A session of the data alone, for the benchmarks every model is scored on: keyed as
    ``model_session`` keys each model's session, so the benchmarks read here are the ones each model's
    session reports its tokenisation on (``Session.tokenised``)."""
    return Session(profile, splits, None, "", data_key(profile, splits))


def tasks_of(name: str, bench: Benchmarks) -> set[str]:
    """The tasks benchmark ``name`` writes rows for on ``bench``: those whose items are there."""
    if name == "factor":
        return {f"factor_{s}" for s in bench.factor["split"].unique()}
    return {task for task in BENCHMARKS[name] if len(getattr(bench, TASK_FRAMES[task]))}


@dataclass(frozen=True)
class Data:
    """What every model is scored on, read once: the splits, and on each the requested benchmarks with
    items there and the tasks each writes."""
    splits: dict[str, CocoSplit]
    bench: dict[str, Benchmarks]               # split -> its benchmarks, without a backbone's tokenisation
    tasks: dict[str, dict[str, set[str]]]      # split -> {benchmark: its tasks}

    def cells(self, dataset: str, methods) -> set[tuple]:
        """The (dataset, split, task, method) of every row a model's evaluation writes: a complete model's."""
        return {(dataset, split, task, name) for name in methods for split, benchmarks in self.tasks.items()
                for tasks in benchmarks.values() for task in tasks}


def read_data(args: argparse.Namespace, plan: Plan) -> Data:
    """The splits (COCO train2017's calibration subset too for LCSE's fit) and the benchmarks to score,
    checked for items before any model is scored (``benchmarks_to_score``)."""
    names = benchmark_splits()
    fit = "lcse" in args.method and args.lcse_calibration == FIT
    splits = load_splits(plan.profile, names + (("pretrain",) if fit else ()))
    bench = data_session(plan.profile, splits).read_benchmarks(names)
    scored = benchmarks_to_score(bench, splits, args.benchmark)
    return Data(splits, bench, {s: {name: tasks_of(name, bench[s]) for name in scored[s]} for s in scored})


def score_model(args: argparse.Namespace, model: ModelPlan, backbone: Backbone, data: Data) -> list[dict]:
    """Every requested method of one loaded model on every benchmark of ``data``: its result rows."""
    spec, profile = model.spec, model.profile
    session = model_session(profile, data.splits, backbone, spec.label)
    bench = session.tokenised({s: data.bench[s] for s in data.tasks}, args.accept_identical_options)
    lcse_calibration = calibration(spec.model, args.lcse_calibration)
    if "lcse" in args.method and args.lcse_calibration == FIT:
        lcse_calibration = fitted_calibration(session, args.batch_size)
    if "lcse" in args.method:
        print(f"negbook eval: LCSE (mu, beta) = ({lcse_calibration.mu:g}, {lcse_calibration.beta:g}) from "
              f"{lcse_calibration.source}")
    rows = []
    for scorer in scorers(session, args.method, lcse_calibration, args.batch_size).values():
        for split, benchmarks in data.tasks.items():
            for name in tqdm(list(benchmarks), desc=f"{scorer.name} on {split}"):
                for row in evaluate_benchmarks(scorer, bench[split], session.splits[split], profile.dataset,
                                               spec.model, spec.label, tasks=benchmarks[name]):
                    rows.append({**row, "method": row["metrics"].pop("method")})      # the chapters' label
                    if isinstance(getattr(scorer, "calibration", None), Calibration):
                        rows[-1]["lcse_calibration"] = vars(lcse_calibration)
    return rows


def complete(args: argparse.Namespace, plan: Plan, spec: ModelSpec, results: Results, data: Data) -> bool:
    """Whether --output already holds every row this run would write for ``spec`` (--skip-existing)."""
    wanted = data.cells(plan.profile.dataset, plan.methods.values())
    missing = sorted(wanted - results.cells(spec.key))
    if not missing:
        print(f"negbook eval: {spec.where or spec.name}: its {len(wanted)} rows in {args.output} are complete; "
              "skipped")
        return True
    example = ", ".join(f"{method} {split} {task}" for _, split, task, method in missing[:3])
    print(f"negbook eval: {spec.where or spec.name}: {len(missing)} of its {len(wanted)} rows are missing from "
          f"{args.output} ({example}{', ...' if len(missing) > 3 else ''}); evaluating it again")
    return False


def evaluate(args: argparse.Namespace, plan: Plan) -> None:
    """Every model in turn, loaded, scored, written to --output and released; the data are read once
    (after the first model loads, or before, to decide whether --skip-existing's rows are complete).
    A model that fails stops the run; the rows of the models before it are in --output."""
    results = Results(args.output, plan.existing)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    data, evaluated = None, 0
    for position, model in enumerate(plan.models):
        spec = model.spec
        if args.skip_existing and spec.key in results.rows:
            data = data or read_data(args, plan)
            if complete(args, plan, spec, results, data):
                continue
        with named_failure(model, position, args.output):
            backbone = load_backbone(spec.model, spec.pretrained, checkpoint=spec.checkpoint,
                                     quick_gelu=model.quick_gelu, device=device)
        print(f"negbook eval: loaded {backbone.report}")       # what runs, before any data is read
        data = data or read_data(args, plan)                    # its errors are the data's, no model's
        with named_failure(model, position, args.output):
            rows = score_model(args, model, backbone, data)
        del backbone
        release()
        total = results.replace(spec.key, rows)
        evaluated += 1
        print(f"negbook eval: {len(rows)} rows written to {args.output}" + (f" for {spec.where}" if spec.where else "")
              + (f" ({total} in the file)" if total != len(rows) else ""))
    if not evaluated:
        print(f"negbook eval: every model's rows in {args.output} are complete: nothing evaluated")


@contextmanager
def named_failure(model: ModelPlan, position: int, output: Path):
    """A model's error, when there are several, names the model and what --output holds: the rows of
    the ``position`` models before it."""
    try:
        yield
    except (FileNotFoundError, RuntimeError, ValueError) as err:
        spec = model.spec
        if not spec.where:
            raise
        kept = f"{output} holds the rows of the {position} model{'s' if position > 1 else ''} before it " \
               "(--skip-existing goes on from there)" if position else "nothing was written"
        raise ModelFailed(f"{spec.where}: {err}; {kept}") from err


def release() -> None:
    """Free a scored model's memory before the next one loads (its last references were just dropped)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        plan = check_arguments(args)           # before any data or weights load
        os.environ.update(plan.environment)
        evaluate(args, plan)
    except (FileNotFoundError, RuntimeError, ValueError) as err:
        print(f"negbook eval: error: {err}", file=sys.stderr)
        return 1
    return 0


def cli(argv: list[str] | None = None) -> int:
    """The ``negbook`` console script: ``negbook eval ...``."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "eval":
        print("usage: negbook eval (--model NAME ... (--pretrained TAG ... | --checkpoint FILE ...) | --models FILE) "
              "[options]; negbook eval --help for them", file=sys.stderr)
        return 2
    return main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
