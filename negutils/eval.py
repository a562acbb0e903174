"""``negbook eval``: any open_clip model on the book's negation benchmarks in one command, in
CLIP_benchmark's spirit (``clip_benchmark eval --model ... --pretrained ... --dataset ...``), with the
book's methods beside it: the output is a method x benchmark table, one JSON row per
(method, split, task) in CLIP_benchmark's shape plus ``split`` and ``method``.

    negbook eval --model ViT-B-32 --pretrained openai --benchmark all --method vanilla ktn lcse \\
        --data-root /data/negbook --output results.jsonl
    python -m negutils.eval --model ViT-B-32 --checkpoint weights.pt --activation quickgelu \\
        --benchmark negbench-mcq --method vanilla peakpatch:artifacts/gpu/peakpatch/export/peakpatch-joint-negbench.pt

Data: ``--data-root`` is a folder laid out as ``data_recipes/published_layouts.py`` writes it
(``coco/``, ``voc/VOCdevkit/VOC2007``, ``negbench/``), or set ``COCO_IMAGE_ROOT``, ``VOC_ROOT`` and
``NEGBENCH_CSV_DIR`` as for the ``gpu`` profile. The evaluation is the chapters' own code
(``Session.benchmarks``, ``build_scorer``, ``evaluate_benchmarks``), so a row here equals the row
a chapter computes for the same model.

Every argument is checked before any data or weights load (``check_arguments``); the loaded model's
report (tensors, activation and what decided it, source) is printed before the data is read.
A checkpoint that records no activation (open_clip's training format) needs ``--activation``."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
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
from .methods.registry import build_scorer, scorer_dict
from .models import weights
from .models.backbone import Backbone, load_backbone
from .session import Session, load_splits, model_session
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
CAPTIONED = ("retrieval_affirmative", "retrieval_negated")      # built from the split's captions
METHODS = ("vanilla", "ec", "ktn", "lcse")
PEAKPATCH = "peakpatch:"        # peakpatch:FILE, a PeakPatch export (chapter 03 writes the joint model's)
FIT = "fit"


class UsageError(ValueError):
    """Arguments that cannot run as given, found before any data or weights load."""


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
    parser = argparse.ArgumentParser(prog="negbook eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an open_clip config name, e.g. ViT-B-32")
    weights_from = parser.add_mutually_exclusive_group(required=True)
    weights_from.add_argument("--pretrained", help="an open_clip pretrained tag, e.g. openai")
    weights_from.add_argument("--checkpoint", type=Path, help="a local weights file (every key is checked)")
    parser.add_argument("--activation", choices=list(weights.ACTIVATIONS),
                        help="the activation the weights were trained with: required for a --checkpoint that "
                        "records none (quickgelu for weights descended from OpenAI's CLIP); a tag, or a checkpoint "
                        "that records it, decides, and a different --activation is an error")
    parser.add_argument("--benchmark", nargs="+", default=["all"], choices=[*BENCHMARKS, "all"],
                        help="benchmarks to score, each once; 'all' scores every one with items on the data (and "
                        "names those without), a named one without items is an error")
    parser.add_argument("--method", nargs="+", default=["vanilla"], type=method_spec,
                        help=f"{', '.join(METHODS)} or peakpatch:FILE (a PeakPatch export); several allowed, each once")
    parser.add_argument("--lcse-calibration", metavar="MU,BETA|fit", type=calibration_spec,
                        help="LCSE's (mu, beta), mu in [-1, 1] and beta > 0, or 'fit': fitted on the profile's "
                        "calibration split (a held-out subset of COCO train2017, as LCSE App. A; needs train2017 "
                        "under $COCO_IMAGE_ROOT); default: the LCSE paper's values for CLIP or SigLIP2 models")
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
                        help="the JSONL file to write (an existing one is replaced, unless it is an input)")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Plan:
    """What the checked arguments decide before anything loads."""
    profile: Profile
    environment: dict[str, str]      # the dataset variables --data-root stands for
    quick_gelu: bool | None          # load_backbone's: None lets --pretrained's tag decide


def check_arguments(args: argparse.Namespace) -> Plan:
    """Every check of the command line that needs neither data nor weights, run before either loads
    (argparse has checked each value's form): the profile and --data-root, repeated benchmarks or
    methods, the checkpoint and its activation, LCSE's calibration, PeakPatch exports, and --output."""
    profile = get_profile(args.profile, backbone=args.model, pretrained=args.pretrained)
    environment = data_environment(args.data_root, profile)
    refuse_repeats(args)
    quick_gelu = activation(args)
    if "lcse" in args.method and calibration(args.model, args.lcse_calibration) is None \
            and args.lcse_calibration != FIT:
        raise UsageError(f"LCSE has no published (mu, beta) for {args.model}: pass --lcse-calibration MU,BETA "
                         f"or {FIT}")
    for spec in args.method:
        if spec.startswith(PEAKPATCH):
            read_export(spec[len(PEAKPATCH):])
    check_output(args.output, input_files(args), data_folders({**os.environ, **environment}))
    return Plan(profile, environment, quick_gelu)


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


def activation(args: argparse.Namespace) -> bool | None:
    """``load_backbone``'s ``quick_gelu`` for these weights (``weights.command_line_activation``)."""
    if args.pretrained is not None and Path(args.pretrained).is_file():
        raise UsageError(f"--pretrained {args.pretrained} is a file: pass it as --checkpoint "
                         "(--pretrained takes an open_clip tag)")
    if args.checkpoint is not None and not args.checkpoint.exists():
        raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
    return weights.command_line_activation(args.model, args.pretrained, args.checkpoint, args.activation)


def input_files(args: argparse.Namespace) -> dict[str, Path]:
    """{how the command line names it: path} of every file the evaluation reads besides the data."""
    files = {"the --checkpoint": args.checkpoint} if args.checkpoint is not None else {}
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


def eval_session(profile: Profile, backbone: Backbone, label: str, splits: tuple[str, ...]) -> Session:
    """``open_session``'s session of a real model, on a backbone loaded (and reported) before any data:
    ``open_session`` loads its own after the splits. ``model_session`` keys it as the chapters' sessions
    are, so the benchmark caches are theirs."""
    return model_session(profile, load_splits(profile, splits), backbone, label)


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


def evaluate(args: argparse.Namespace, plan: Plan) -> list[dict]:
    """Every requested method on every requested benchmark of every split the data has: result rows."""
    lcse_calibration = calibration(args.model, args.lcse_calibration)
    fit = "lcse" in args.method and args.lcse_calibration == FIT
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    backbone = load_backbone(args.model, args.pretrained, checkpoint=args.checkpoint, quick_gelu=plan.quick_gelu,
                             device=device)
    print(f"negbook eval: loaded {backbone.report}")       # what runs, before any data is read
    label = str(args.checkpoint or args.pretrained)
    splits = ("val", "ood") if os.environ.get("VOC_ROOT") else ("val",)
    session = eval_session(plan.profile, backbone, label, splits + (("pretrain",) if fit else ()))
    bench = session.benchmarks(splits, accept_identical_options=args.accept_identical_options)
    scored = benchmarks_to_score(bench, session.splits, args.benchmark)      # before fitting or scoring anything
    if fit:
        lcse_calibration = fitted_calibration(session, args.batch_size)
    if "lcse" in args.method:
        print(f"negbook eval: LCSE (mu, beta) = ({lcse_calibration.mu:g}, {lcse_calibration.beta:g}) from "
              f"{lcse_calibration.source}")
    rows = []
    for scorer in scorers(session, args.method, lcse_calibration, args.batch_size).values():
        for split, benchmarks in bench.items():
            for name in tqdm(scored[split], desc=f"{scorer.name} on {split}"):
                tasks = set(BENCHMARKS[name])
                if name == "factor":
                    tasks = {f"factor_{s}" for s in benchmarks.factor["split"].unique()}
                for row in evaluate_benchmarks(scorer, benchmarks, session.splits[split], plan.profile.dataset,
                                               args.model, label, tasks=tasks):
                    rows.append({**row, "method": row["metrics"].pop("method")})      # the chapters' label
                    if isinstance(getattr(scorer, "calibration", None), Calibration):
                        rows[-1]["lcse_calibration"] = vars(lcse_calibration)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        plan = check_arguments(args)           # before any data or weights load
        os.environ.update(plan.environment)
        rows = evaluate(args, plan)
    except (FileNotFoundError, RuntimeError, ValueError) as err:
        print(f"negbook eval: error: {err}", file=sys.stderr)
        return 1
    atomic_save(args.output, lambda tmp: tmp.write_text("".join(json.dumps(row) + "\n" for row in rows)))
    print(f"negbook eval: {len(rows)} rows written to {args.output}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """The ``negbook`` console script: ``negbook eval ...``."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "eval":
        print("usage: negbook eval --model NAME (--pretrained TAG | --checkpoint FILE) [options]; "
              "negbook eval --help for them", file=sys.stderr)
        return 2
    return main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
