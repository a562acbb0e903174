"""Candidate organisms at equal wall time: each trains on the cpu world's pretrain split for the
same number of minutes (samples set from its own measured throughput), then is scored on the
whole `val` split the way chapter 00 scores the organism: mean detection AUC per concept,
zero-shot accuracy on one-object images, and affirmative text-to-image R@5. The held-out R@5
at the last two evaluations says whether a candidate was still learning.

    .venv/bin/python bench/organism_probe.py [--minutes 2] [--candidates resnet ...] [--out organism_probe]

Every candidate keeps open_clip, the CLIP BPE tokenizer and a 12-layer text tower; they differ in
the image tower, the text width, batch size and learning rate. The table is what the choice of
the book's organism is read from (the targets, ``diagnosis.recognition.ORGANISM_TARGETS``: AUC >=
0.85, accuracy >= 80%, R@5 >= 45%); ``<out>_curve.csv`` holds each candidate's held-out recall
against training minutes.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.diagnosis import object_recognition
from negutils.diagnosis.recognition import ORGANISM_TARGETS  # noqa: E402
from negutils.models.pretrain import PretrainConfig, backbone_retrieval_recall, pretrain  # noqa: E402
from negutils.models.pretrain import load_pretrained  # noqa: E402
from negutils.session import get_profile, load_splits  # noqa: E402

# name -> (open_clip config, what else differs from the book's PretrainConfig)
CANDIDATES = {
    "vit-p8 (the book's before issue 17)": ("negbook-organism", {}),
    "vit-p8 lr 1e-3 bs 64": ("negbook-organism", {"lr": 1e-3, "batch_size": 64}),
    "resnet": ("negbook-organism-rn", {}),
    "resnet lr 1e-3": ("negbook-organism-rn", {"lr": 1e-3}),
    "resnet lr 1e-3 bs 64": ("negbook-organism-rn", {"lr": 1e-3, "batch_size": 64}),
    "resnet width 64": ("negbook-organism-rn64", {}),
    "resnet text width 128": ("negbook-organism-rn-t128", {}),
    "resnet bs 64": ("negbook-organism-rn", {"batch_size": 64}),
}


def throughput(split, config: PretrainConfig, steps: int, out: Path) -> float:
    """Training samples/s of ``config`` over ``steps`` steps (after one warm-up step)."""
    warm = dataclasses.replace(config, samples=(steps + 1) * config.batch_size, evaluations=0)
    result = pretrain(split, warm, out, progress=False)
    seconds = result.history["seconds"]
    return steps * config.batch_size / float(seconds.iloc[-1] - seconds.iloc[0])


def probe(name: str, model_name: str, changes: dict, splits: dict, base: PretrainConfig, minutes: float,
          workdir: Path) -> tuple[dict, pd.DataFrame]:
    config = dataclasses.replace(base, model_name=model_name, evaluations=4, **changes)
    rate = throughput(splits["pretrain"], config, 10, workdir / "warm.pt")
    samples = int(rate * 60 * minutes) // config.batch_size * config.batch_size
    config = dataclasses.replace(config, samples=samples)
    result = pretrain(splits["pretrain"], config, workdir / f"{model_name}.pt", val=splits["val"])
    backbone = load_pretrained(result)
    _, recognition = object_recognition(backbone, splits["val"])
    recall = backbone_retrieval_recall(backbone, splits["val"])
    last, previous = result.evaluations["t2i_R@5"].iloc[-1], result.evaluations["t2i_R@5"].iloc[-2]
    minutes = result.evaluations["samples"] / result.samples_per_second / 60
    curve = result.evaluations.assign(candidate=name, minutes=minutes)
    return {"candidate": name, "open_clip config": model_name, "batch": config.batch_size, "lr": config.lr,
            "parameters (M)": sum(p.numel() for p in backbone.model.parameters()) / 1e6,
            "samples/s": result.samples_per_second, "train minutes": result.seconds / 60, "samples": samples,
            "mean detection AUC": recognition["mean detection AUC"],
            "zero-shot accuracy": recognition["zero-shot accuracy"], "t2i_R@5": recall["t2i_R@5"],
            "held-out R@5 rise over the last quarter": last - previous,
            "targets met": sum(int((recognition | recall)[k] >= v) for k, v in ORGANISM_TARGETS.items())}, curve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="training wall time per candidate")
    parser.add_argument("--candidates", nargs="*", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--out", default="organism_probe", help="the table's name under bench/results/")
    args = parser.parse_args(argv)
    profile = get_profile("cpu")
    splits = load_splits(profile, ("pretrain", "val"))
    rows, curves = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.candidates:
            start = time.perf_counter()
            row, curve = probe(name, *CANDIDATES[name], splits, profile.pretrain, args.minutes, Path(tmp))
            rows.append(row)
            curves.append(curve)
            print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
            # after each candidate, so nothing measured is lost; the curve is held-out R@5 against minutes
            write_result(pd.DataFrame(rows), args.out, digits=3)
            write_result(pd.concat(curves, ignore_index=True), f"{args.out}_curve", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
