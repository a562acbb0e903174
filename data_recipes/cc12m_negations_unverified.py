"""CC12M captions -> UNVERIFIED negated counterparts (PeakPatch App. 0.J read literally, rule-based).

    .venv/bin/python data_recipes/cc12m_negations_unverified.py --captions cc12m.tsv --out negations.csv

Input: CC12M's TSV (url <tab> caption). Each caption gets a counterpart naming one object from
the COCO vocabulary that the caption *string* does not mention, through
`negutils.core.phrasing.negate_caption` (round-trip check: a negation cue was added and the caption did
not already negate). Nothing looks at the image: the object may well be in it, so the counterpart is
true or false by chance. That is the literal reading chapter 03 shows to fail; NegBench's released
CC12M-NegCap / NegMCQ verify absence with a detector and are what the book trains on
(`negation_data = "negbench-cc12m"`, `$CC12M_NEGATION_DIR`). Every output row says `verified=False`.
Pass --llm-hook module:function to replace the rule with an LLM (called as f(caption, absent) -> str).
"""
from __future__ import annotations

import argparse
import csv
import importlib
from pathlib import Path

import numpy as np

from negutils.core.phrasing import has_negation_cue, negate_caption
from negutils.world.recipes import md5sum

COCO_OBJECTS = ("person", "bicycle", "car", "dog", "cat", "chair", "cup", "bottle", "umbrella", "bench", "bird",
                "horse", "boat", "book", "clock", "vase", "bowl", "laptop", "phone", "bag")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captions", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-hook")
    args = parser.parse_args()
    hook = None
    if args.llm_hook:
        module, func = args.llm_hook.split(":")
        hook = getattr(importlib.import_module(module), func)
    rng = np.random.default_rng(args.seed)
    kept = dropped = 0
    with open(args.captions, newline="") as src, open(args.out, "w", newline="") as dst:
        writer = csv.writer(dst)
        writer.writerow(["url", "caption", "negated_caption", "negated_object", "verified"])
        for k, row in enumerate(csv.reader(src, delimiter="\t")):
            if args.limit and k >= args.limit:
                break
            url, caption = row[0], row[1]
            absent = [o for o in COCO_OBJECTS if o not in caption.lower()]
            obj = absent[int(rng.integers(len(absent)))]
            negated = hook(caption, obj) if hook else negate_caption(caption, obj, rng)
            if negated and has_negation_cue(negated) and negated != caption:
                writer.writerow([url, caption, negated, obj, False])
                kept += 1
            else:
                dropped += 1
    print(f"{kept} UNVERIFIED pairs kept (absence from the image never checked), {dropped} dropped by the "
          f"round-trip check; md5 {md5sum(args.out)}")


if __name__ == "__main__":
    main()
