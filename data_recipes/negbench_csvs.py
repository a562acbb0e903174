"""NegBench's published CSVs: validate them and remap their image paths to this machine.

    .venv/bin/python data_recipes/negbench_csvs.py --csv-dir $NEGBENCH_CSV_DIR --image-root $COCO_IMAGE_ROOT

Download the CSVs from the link in NegBench's datasets.md (Google Drive: no scripted download).
Every MCQ CSV is read with `negutils.benchmarks.negbench.read_mcq_csv`, its paths checked under the image
root, and a remapped copy written next to it as `<name>.negbook.csv`, with its MD5 printed.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from negutils.benchmarks.negbench import read_mcq_csv, write_mcq_csv
from negutils.benchmarks.published import MCQ_FILES
from negutils.world.recipes import md5sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv-dir", type=Path, default=os.environ.get("NEGBENCH_CSV_DIR"))
    parser.add_argument("--image-root", type=Path, required=True)
    args = parser.parse_args()
    if args.csv_dir is None:
        raise SystemExit("pass --csv-dir or set $NEGBENCH_CSV_DIR")
    for name in MCQ_FILES.values():
        src = args.csv_dir / name
        if not src.exists():
            print(f"skip {src}: not present")
            continue
        frame = read_mcq_csv(src, image_root=args.image_root, check_images=True)
        out = write_mcq_csv(frame, src.with_suffix(".negbook.csv"))
        print(f"{md5sum(out)}  {out}  ({len(frame)} questions)")


if __name__ == "__main__":
    main()
