"""PeakPatch's learning curve in training data (``negutils.methods.peakpatch.learning_curve``): chapter 03's
protocol at several negtrain sizes, the ECN alone, the SCN alone, the joint model and the detached SCN,
every benchmark value with its 95% bootstrap interval, beside the frozen model. Chapter 03 shows the
table this writes. It reads chapter 02's layers and chapter 03's design from the profile's results, so
run the book first (``make book``); the size equal to the world's negtrain reuses the book's own runs.

    .venv/bin/python bench/peakpatch_learning_curve.py [--sizes 2000 8000 32000 128000] [--profile cpu]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils import report  # noqa: E402
from negutils.diagnosis import load_layer_choice  # noqa: E402
from negutils.methods.peakpatch.learning_curve import COLUMNS, learning_curve  # noqa: E402
from negutils.methods.peakpatch.train import load_design  # noqa: E402
from negutils.session import open_session  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 32000, 128000],
                        help="negtrain images per point (the world's negtrain size is the book's own run)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--name", default="peakpatch_learning_curve", help="bench/results/<name>.csv")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    session = open_session(args.profile)
    prof = session.profile
    model, label = session.backbone.model_name, session.pretrained_label
    layers = load_layer_choice(prof, model, label)
    design = load_design(prof, model, label)
    results, items = learning_curve(session, sorted(set(args.sizes)), (layers.l_p, layers.l_a), design,
                                    prof.artifacts_dir() / "features", prof.artifacts_dir() / "peakpatch")
    table = report.unified_table(items, columns=COLUMNS, n_boot=args.bootstrap)
    images = results.drop_duplicates("method").set_index("method")["images"]
    table.insert(0, "negtrain images", table["method"].map(images))
    table.insert(0, "variant", table["method"].str.split(" @ ").str[0])
    table = table.assign(profile=prof.name, backbone=f"{model} ({label})",
                         **{"l_p": layers.l_p, "l_a": layers.l_a})
    write_result(table.drop(columns="method"), args.name, digits=2)
    print(f"{time.perf_counter() - started:.0f} s in all on {args.threads} threads")


if __name__ == "__main__":
    main()
