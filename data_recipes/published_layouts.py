"""The embedded world of a profile in the published layouts: its `val` split as COCO val2017, the first
images of its `pretrain` split as COCO train2017 (JPEGs of varied sizes), its `ood` split as VOC2007 test
(converted as `voc2007.py` converts the real one), NegBench's CSVs over them and its `negtrain` split's
negation data as NegBench's released CC12M-NegCap / NegMCQ, with absolute image paths from another
machine, so the `coco` dataset path reads files shaped exactly like the real ones without a download.

    .venv/bin/python data_recipes/published_layouts.py --profile smoke --out /tmp/published

Prints the four `export` lines that point the `coco` dataset at them.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from negutils.benchmarks.published import FOREIGN_ROOT
from negutils.config import get_profile
from negutils.dry_run import write_published_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke", help="the profile whose embedded world is written")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--foreign-root", default=FOREIGN_ROOT, help="where the CSVs' absolute paths point")
    args = parser.parse_args()
    written = write_published_data(get_profile(args.profile), args.out, args.foreign_root)
    for variable, path in written.items():
        print(f"export {variable}={path.resolve()}")


if __name__ == "__main__":
    main()
