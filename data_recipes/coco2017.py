"""COCO 2017 val: images and annotations, checksummed, unpacked into $COCO_IMAGE_ROOT.

    .venv/bin/python data_recipes/coco2017.py --root /data/coco

Produces annotations/instances_val2017.json, annotations/captions_val2017.json and val2017/,
which `negutils.session.load_splits` reads for the `gpu` profile.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from negutils.world.recipes import REGISTRY, extract, fetch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.environ.get("COCO_IMAGE_ROOT"),
                        required="COCO_IMAGE_ROOT" not in os.environ)
    root = Path(parser.parse_args().root)
    for name in ("coco2017_annotations", "coco2017_val_images"):
        archive = fetch(name, root / "downloads")
        print(f"{archive}  md5 {REGISTRY[name]['md5']} ok")
        extract(archive, root)        # a completion marker: a half-extracted archive is extracted again
    for need in ("annotations/instances_val2017.json", "annotations/captions_val2017.json", "val2017"):
        if not (root / need).exists():
            raise SystemExit(f"{root / need} is missing after extraction")
    print(f"COCO val2017 ready under {root}; export COCO_IMAGE_ROOT={root}")


if __name__ == "__main__":
    main()
