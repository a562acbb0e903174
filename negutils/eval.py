"""``negbook eval``: any open_clip model on the book's negation benchmarks in one command, in
CLIP_benchmark's spirit (``clip_benchmark eval --model ... --pretrained ... --dataset ...``), with the
book's methods beside it: the output is a method x benchmark table, one JSON row per
(method, split, task) in CLIP_benchmark's shape plus ``split`` and ``method``.

    negbook eval --model ViT-B-32 --pretrained openai --benchmark all --method vanilla ktn lcse \\
        --data-root /data/negbook --output results.jsonl
    python -m negutils.eval --model ViT-B-32 --checkpoint weights.pt --benchmark negbench-mcq \\
        --method vanilla peakpatch:artifacts/gpu/peakpatch/export/peakpatch-joint-negbench.pt

Data: ``--data-root`` is a folder laid out as ``data_recipes/published_layouts.py`` writes it
(``coco/``, ``voc/VOCdevkit/VOC2007``, ``negbench/``), or set ``COCO_IMAGE_ROOT``, ``VOC_ROOT`` and
``NEGBENCH_CSV_DIR`` as for the ``gpu`` profile. The evaluation is the chapters' own code
(``Session.benchmarks``, ``build_scorer``, ``evaluate_benchmarks``), so a row here equals the row
a chapter computes for the same model."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tqdm.auto import tqdm

from .benchmarks.published import PUBLISHED_LAYOUT
from .benchmarks.suite import evaluate_benchmarks
from .core.cache import atomic_save
from .config import get_profile
from .methods.lcse import Calibration, default_calibration
from .methods.lcse_analysis import calibration_set, fit_on_split
from .methods.peakpatch.export import load_peakpatch, read_export
from .methods.registry import build_scorer, scorer_dict
from .session import open_session

# benchmark name on the command line -> the suite's task names (FACTOR's are its splits)
BENCHMARKS = {"negbench-mcq": ("mcq",),
              "negbench-retrieval": ("retrieval", "retrieval_negated", "retrieval_negated_any"),
              "coco-confusion-2c": ("confusion_2c",), "coco-confusion-3c": ("confusion_3c",), "factor": ("factor",),
              "valse": ("valse_existence",)}
METHODS = ("vanilla", "ec", "ktn", "lcse")
PEAKPATCH = "peakpatch:"        # peakpatch:FILE, a PeakPatch export (chapter 03 writes the joint model's)


def method_spec(text: str) -> str:
    """``--method``'s values: a training-free method's name, or ``peakpatch:FILE``."""
    if text in METHODS or (text.startswith(PEAKPATCH) and len(text) > len(PEAKPATCH)):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(METHODS)} or peakpatch:FILE")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="negbook eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an open_clip config name, e.g. ViT-B-32")
    weights = parser.add_mutually_exclusive_group(required=True)
    weights.add_argument("--pretrained", help="an open_clip pretrained tag, e.g. openai")
    weights.add_argument("--checkpoint", type=Path, help="a local weights file (every key is checked)")
    parser.add_argument("--benchmark", nargs="+", default=["all"], choices=[*BENCHMARKS, "all"])
    parser.add_argument("--method", nargs="+", default=["vanilla"], type=method_spec,
                        help=f"{', '.join(METHODS)} or peakpatch:FILE (a PeakPatch export); several allowed")
    parser.add_argument("--lcse-calibration", metavar="MU,BETA|fit",
                        help="LCSE's (mu, beta), or 'fit': fitted on the profile's calibration split (a held-out "
                        "subset of COCO train2017, as LCSE App. A; needs train2017 under $COCO_IMAGE_ROOT); "
                        "default: the LCSE paper's values for CLIP or SigLIP2 models")
    parser.add_argument("--data-root", type=Path, help="a folder with coco/, voc/ and negbench/ "
                        "(data_recipes/published_layouts.py's layout); default: the environment variables")
    parser.add_argument("--profile", default="gpu", help="the profile whose benchmark settings and artifacts "
                        "folder are used (gpu; gpu-dryrun for the dry run's files)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--batch-size", type=int, help="images per encoder batch (default: the chapters')")
    parser.add_argument("--accept-identical-options", action="store_true",
                        help="score questions whose options tokenise identically as ties (default: an error)")
    parser.add_argument("--output", type=Path, default=Path("results.jsonl"))
    return parser.parse_args(argv)


def data_environment(root: Path | None) -> dict[str, str]:
    """The dataset variables ``--data-root`` stands for (those already set win); a root without COCO is an error."""
    if root is None:
        return {}
    if not (root / PUBLISHED_LAYOUT["COCO_IMAGE_ROOT"] / "annotations" / "instances_val2017.json").exists():
        raise FileNotFoundError(f"--data-root {root} has no coco/annotations/instances_val2017.json: write the "
                                "layout with data_recipes/published_layouts.py, or data_recipes/coco2017.py --root "
                                f"{root / 'coco'}")
    return {variable: str(root / sub) for variable, sub in PUBLISHED_LAYOUT.items()
            if variable not in os.environ and (root / sub).exists()}


FIT = "fit"


def calibration(model: str, text: str | None) -> Calibration | None:
    """LCSE's (mu, beta): ``--lcse-calibration MU,BETA``, else the paper's for a real backbone; None for
    ``fit`` (fitted once the calibration split is read) and for the book's own organisms without it."""
    if text == FIT:
        return None
    if text:
        try:
            mu, beta = (float(x) for x in text.split(","))
        except ValueError as err:
            raise ValueError(f"--lcse-calibration {text!r}: expected MU,BETA (e.g. 0.22,30) or {FIT}") from err
        return Calibration(mu, beta, "--lcse-calibration")
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


def evaluate(args: argparse.Namespace) -> list[dict]:
    """Every requested method on every requested benchmark of every split the data has: result rows."""
    profile = get_profile(args.profile)
    lcse_calibration = calibration(args.model, args.lcse_calibration)
    fit = "lcse" in args.method and args.lcse_calibration == FIT
    if "lcse" in args.method and lcse_calibration is None and not fit:     # before any data or weights are loaded
        raise ValueError(f"LCSE has no published (mu, beta) for {args.model}: pass --lcse-calibration MU,BETA "
                         f"or {FIT}")
    for spec in args.method:                                   # a bad export is refused before the data is read
        if spec.startswith(PEAKPATCH):
            read_export(spec[len(PEAKPATCH):])
    checkpoint = None if args.checkpoint is None else str(args.checkpoint)
    splits = ("val", "ood") if os.environ.get("VOC_ROOT") else ("val",)
    session = open_session(profile.name, args.model, args.pretrained, checkpoint, args.device,
                           splits=splits + (("pretrain",) if fit else ()))
    if fit:
        lcse_calibration = fitted_calibration(session, args.batch_size)
    if "lcse" in args.method:
        print(f"negbook eval: LCSE (mu, beta) = ({lcse_calibration.mu:g}, {lcse_calibration.beta:g}) from "
              f"{lcse_calibration.source}")
    names = list(BENCHMARKS) if "all" in args.benchmark else args.benchmark
    bench = session.benchmarks(splits, accept_identical_options=args.accept_identical_options)
    label = str(args.checkpoint or args.pretrained)
    rows = []
    for scorer in scorers(session, args.method, lcse_calibration, args.batch_size).values():
        for split, benchmarks in bench.items():
            for name in tqdm(names, desc=f"{scorer.name} on {split}"):
                tasks = set(BENCHMARKS[name])
                if name == "factor":
                    tasks = {f"factor_{s}" for s in benchmarks.factor["split"].unique()}
                for row in evaluate_benchmarks(scorer, benchmarks, session.splits[split], profile.dataset,
                                               args.model, label, tasks=tasks):
                    rows.append({**row, "method": row["metrics"].pop("method")})      # the chapters' label
                    if isinstance(getattr(scorer, "calibration", None), Calibration):
                        rows[-1]["lcse_calibration"] = vars(lcse_calibration)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        os.environ.update(data_environment(args.data_root))
        if args.checkpoint is not None and not args.checkpoint.exists():
            raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
        rows = evaluate(args)
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
