"""Two cores, one run or two: samples per second of a training with torch on 2 threads in one
process, on 1 thread, and as two 1-thread processes side by side (their sum), for the organism's
pretraining steps and for a PeakPatch run on chapter 03's cached features. When two 1-thread runs
together beat one 2-thread run, independent trainings go faster side by side than one after the
other (``negutils.core.workers``: chapter 03's PeakPatch runs).

    .venv/bin/python bench/thread_scaling.py [--profile cpu] [--steps 30] [--epochs 2]

Writes bench/results/thread_scaling.csv. Needs the profile's world and chapter 03's feature cache.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def one_run(profile: str, steps: int, threads: int) -> float:
    """Pretraining samples/s of ``steps`` steps on ``threads`` torch threads (the step loop only)."""
    import torch

    torch.set_num_threads(threads)
    from negutils.config import get_profile
    from negutils.models.pretrain import pretrain
    from negutils.session import load_splits

    prof = get_profile(profile)
    config = dataclasses.replace(prof.pretrain, samples=steps * prof.pretrain.batch_size, evaluations=0)
    split = load_splits(prof, ("pretrain",), progress=False)["pretrain"]
    with tempfile.TemporaryDirectory() as tmp:
        return pretrain(split, config, Path(tmp) / "model.pt", progress=False).samples_per_second


def one_peakpatch_run(profile: str, epochs: int, threads: int) -> float:
    """Samples/s of the joint PeakPatch model trained ``epochs`` epochs on ``threads`` torch threads
    (the training's own thread setting bypassed, so the comparison is of threads alone)."""
    from dataclasses import replace

    import torch

    from negutils.diagnosis import load_layer_choice
    from negutils.methods import (DEFAULT_PROTOCOL, PeakPatchConfig, TextFeatures, extract_text_features,
                                  prepare_negation_data)
    from negutils.methods.peakpatch import train
    from negutils.session import open_session

    session = open_session(profile, progress=False)
    prof, layers = session.profile, load_layer_choice(session.profile)
    root = prof.artifacts_dir() / "features"
    data = prepare_negation_data(session.backbone, session.splits["negtrain"], session.features_key, root,
                                 progress=False)
    features = TextFeatures(extract_text_features(session.backbone, data.captions, layers.l_p, layers.l_a, root,
                                                  session.features_key, progress=False))
    config = replace(PeakPatchConfig.from_settings(prof.peakpatch, protocol=DEFAULT_PROTOCOL), epochs=epochs)
    torch.set_num_threads(threads)
    _, history = train._train(features, data, config, progress=False)
    return float(history["samples/s"].dropna().median())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-work", choices=("pretrain", "peakpatch"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_threads:
        run = one_run(args.profile, args.steps, args.child_threads) if args.child_work == "pretrain" else \
            one_peakpatch_run(args.profile, args.epochs, args.child_threads)
        print(json.dumps(run))
        return 0
    tables = []
    for work, label in (("pretrain", f"{args.profile} organism pretraining, {args.steps} steps"),
                        ("peakpatch", f"{args.profile} PeakPatch joint, {args.epochs} epochs on cached features")):
        command = [sys.executable, __file__, "--profile", args.profile, "--steps", str(args.steps),
                   "--epochs", str(args.epochs), "--child-work", work, "--child-threads"]

        def measured(threads: int, processes: int) -> float:
            running = [subprocess.Popen(command + [str(threads)], stdout=subprocess.PIPE, text=True)
                       for _ in range(processes)]
            return sum(json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in running)

        rows = [{"setting": "1 process, 2 threads", "samples/s": measured(2, 1)},
                {"setting": "1 process, 1 thread", "samples/s": measured(1, 1)},
                {"setting": "2 processes, 1 thread each (sum)", "samples/s": measured(1, 2)}]
        table = pd.DataFrame(rows)
        table["x 1 process, 2 threads"] = table["samples/s"] / table["samples/s"].iloc[0]
        table.insert(0, "work", label)
        tables.append(table)
    write_result(pd.concat(tables, ignore_index=True), "thread_scaling", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
