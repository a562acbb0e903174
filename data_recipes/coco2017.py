"""COCO 2017: val images, annotations (val and train), and with --train the train2017 images (18 GB),
checksummed, unpacked into $COCO_IMAGE_ROOT; an archive already downloaded is verified and reused, a
half-extracted one extracted again.

    .venv/bin/python data_recipes/coco2017.py --root /data/coco [--train]

Produces annotations/{instances,captions}_{val,train}2017.json, val2017/ and (--train) train2017/,
which `negutils.session.load_splits` reads for the `gpu` profile: val2017 is the `val` split, train2017
gives the `pretrain` (LCSE's calibration) and `negtrain` (PeakPatch, NegFull) subsets.
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
    parser.add_argument("--train", action="store_true", help="also fetch train2017.zip (PeakPatch's, NegFull's "
                        "and LCSE's training and calibration images)")
    args = parser.parse_args()
    root = Path(args.root)
    archives = ("coco2017_annotations", "coco2017_val_images") + (("coco2017_train_images",) if args.train else ())
    for name in archives:
        archive = fetch(name, root / "downloads")
        print(f"{archive}  md5 {REGISTRY[name]['md5']} ok")
        extract(archive, root)        # a completion marker: a half-extracted archive is extracted again
    needs = ["annotations/instances_val2017.json", "annotations/captions_val2017.json", "val2017",
             "annotations/instances_train2017.json", "annotations/captions_train2017.json"]
    for need in needs + (["train2017"] if args.train else []):
        if not (root / need).exists():
            raise SystemExit(f"{root / need} is missing after extraction")
    print(f"COCO {'val2017 and train2017' if args.train else 'val2017'} ready under {root}; "
          f"export COCO_IMAGE_ROOT={root}")


if __name__ == "__main__":
    main()
