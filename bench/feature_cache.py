"""Feature-cache size: the ragged fp16 cache against dense [N, context, w] token storage in fp32
and fp16, on NegBench-like captions, for the organism and for ViT-B-32 (sizes do not depend on
the weights, so both use a seeded random initialisation). Ratios from one run.

    .venv/bin/python bench/feature_cache.py [--captions 2000]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import negbench_like_captions  # noqa: E402

from negutils.models.backbone import load_backbone
from negutils.models.features import FIELDS, TextFeatures, extract_text_features  # noqa: E402


def measure(model_name: str, captions: list[str], l_p: int, l_a: int) -> dict:
    backbone = load_backbone(model_name)
    with tempfile.TemporaryDirectory() as root:
        cache = TextFeatures(extract_text_features(backbone, captions, l_p, l_a, root, model_name, progress=False))
        ragged = cache.nbytes()
        mean_tokens = float(cache["offsets"][-1]) / len(captions)
        width, dim = int(cache.index["width"]), int(cache.index["embed_dim"])
    per_caption = sum(dim if f in ("final", "proj_lp") else width for f in FIELDS)   # the same non-token fields
    context = backbone.context_length
    dense = {bits: len(captions) * (context * width + per_caption) * bits // 8 for bits in (32, 16)}
    return {"model": model_name, "captions": len(captions), "context length": context, "width": width,
            "mean real tokens": round(mean_tokens, 2), "ragged fp16 MB": ragged / 1e6,
            "dense fp32 MB": dense[32] / 1e6, "dense fp16 MB": dense[16] / 1e6,
            "dense fp32 / ragged": dense[32] / ragged, "dense fp16 / ragged": dense[16] / ragged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captions", type=int, default=2000)
    args = parser.parse_args()
    captions = negbench_like_captions(args.captions)
    rows = [measure("negbook-organism", captions, 6, 4), measure("ViT-B-32", captions, 8, 6)]
    frame = pd.DataFrame(rows)
    write_result(frame, "feature_cache", digits=2)


if __name__ == "__main__":
    main()
