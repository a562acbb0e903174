"""World render rate: images per second for rendering alone and for a whole split written to
disk (PNG files, COCO JSON, pixels.npy), in one run.

    .venv/bin/python bench/world_render.py [--images 2000]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from common import write_result
from negutils.world.generate import (IN_DOMAIN_BACKGROUNDS, WorldConfig, generate_split, render_image, sample_objects,
                                     split_rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args()
    cfg = WorldConfig(pretrain=args.images)
    rng = split_rng(0, "bench")
    start = time.perf_counter()
    for i in range(args.images):
        objects = sample_objects(rng, cfg.in_domain_counts, cfg.cooccurrence)
        render_image(rng, objects, IN_DOMAIN_BACKGROUNDS[i % len(IN_DOMAIN_BACKGROUNDS)], cfg.image_size)
    render = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        generate_split(cfg, "pretrain", Path(tmp) / "pretrain", progress=False)
        full = time.perf_counter() - start
    frame = pd.DataFrame([{"stage": "render only", "images": args.images, "seconds": round(render, 3),
                           "images_per_s": round(args.images / render, 1)},
                          {"stage": "split written (png + json + npy)", "images": args.images,
                           "seconds": round(full, 3), "images_per_s": round(args.images / full, 1)}])
    write_result(frame, "world_render")


if __name__ == "__main__":
    main()
