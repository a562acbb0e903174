"""PeakPatch's SCN scored for every image against every caption (``SCN.pairwise``, what retrieval and
COCO-Confusion run with the joint, SCN-only, no-anchor and detached variants): whole columns of images
a chunk of captions at a time, against tiles of ``rows`` images, at the cpu organism's width (d = 256)
on its val gallery (2,000 images) and at ViT-B/32's (512). Random weights and unit vectors stand in:
the cost depends on the shapes only. Each row says whether the tiled values equal the whole columns'
bit for bit on this CPU.

    .venv/bin/python bench/scn_pairwise.py [--captions 256] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.methods.peakpatch.model import SCN  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captions", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for dim, images in ((256, 2000), (512, 2000)):
        generator = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        scn = SCN(dim).eval()
        text, peak = (F.normalize(torch.randn(args.captions, dim, generator=generator), dim=-1) for _ in range(2))
        gallery = F.normalize(torch.randn(images, dim, generator=generator), dim=-1)
        tilings = {"whole columns": images, "tiles of 256 images": 256, "tiles of 128 images": 128}
        best, values = {name: float("inf") for name in tilings}, {}
        with torch.no_grad():
            for _ in range(args.repeats):          # the tilings take turns, so a slow spell slows each alike
                for name, tile in tilings.items():
                    started = time.perf_counter()
                    values[name] = scn.pairwise(text, peak, gallery, rows=tile)
                    best[name] = min(best[name], time.perf_counter() - started)
        whole = values["whole columns"]
        rows += [{"embed dim": dim, "images": images, "captions": args.captions, "tiling": name,
                  "seconds": best[name], "x whole columns": best[name] / best["whole columns"],
                  "equal bit for bit": bool(torch.equal(values[name], whole)),
                  "max abs difference": float((values[name] - whole).abs().max())} for name in tilings]
    write_result(pd.DataFrame(rows), "scn_pairwise", digits=4)


if __name__ == "__main__":
    main()
