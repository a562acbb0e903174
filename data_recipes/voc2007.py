"""VOC2007 test, checksummed, converted to COCO format (the `ood` split of the `gpu` profile).

    .venv/bin/python data_recipes/voc2007.py --root /data/voc

Writes $VOC_ROOT/instances_voc2007_test.json with file names relative to VOCdevkit/VOC2007.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from negutils.world.recipes import convert_voc, extract, fetch, md5sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.environ.get("VOC_ROOT"), required="VOC_ROOT" not in os.environ)
    root = Path(parser.parse_args().root)
    voc = root / "VOCdevkit" / "VOC2007"
    extract(fetch("voc2007_test", root / "downloads"), root)    # a half-extracted VOC is extracted again
    out = convert_voc(voc)
    print(f"{md5sum(out)}  {out}\nexport VOC_ROOT={voc}")


if __name__ == "__main__":
    main()
