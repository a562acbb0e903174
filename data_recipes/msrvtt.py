"""MSR-VTT test (1k-A) captions with 4 evenly spaced frames per video, in COCO layout.

    .venv/bin/python data_recipes/msrvtt.py --videos /data/msrvtt/videos --annotation MSRVTT_data.json \
        --split-ids test_1k_ids.txt --out /data/msrvtt/negbook

The videos come from NegBench's datasets.md link (no stable checksum is published; this recipe
prints the MD5 of what it writes so a rebuild can be compared). Frames are decoded with
torchvision.io (needs PyAV: pip install av).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from negutils.world.recipes import evenly_spaced_frames, md5sum, msrvtt_to_coco, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=Path, required=True)
    parser.add_argument("--annotation", type=Path, required=True)
    parser.add_argument("--split-ids", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    instances, captions = msrvtt_to_coco(json.loads(args.annotation.read_text()), args.split_ids.read_text().split())
    from PIL import Image
    from torchvision.io import read_video

    for im in instances["images"]:
        frames, _, _ = read_video(str(args.videos / f"{im['video_id']}.mp4"), pts_unit="sec", output_format="THWC")
        for j, t in enumerate(evenly_spaced_frames(len(frames))):
            path = args.out / im["frames"][j]
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(frames[t].numpy()).save(path)
    for name, obj in (("instances.json", instances), ("captions.json", captions)):
        print(f"{md5sum(write_json(args.out / name, obj))}  {args.out / name}")


if __name__ == "__main__":
    main()
