"""Stage 2, world: the embedded glyph world (rendering, alt-text captions, recaptioning), COCO-format I/O,
and the recipes that turn real datasets into the same layout.

The names chapters use, importable from here; everything else from its module."""
from .coco import load_split
from .describe import benchmark_statistics, caption_statistics, caption_structures, first_words, split_summary
from .generate import (IN_DOMAIN_BACKGROUNDS, OOD_BACKGROUNDS, SPLITS, WorldConfig, build_world,
                       ensure_world, generate_split, render_image, sample_objects, split_rng, typical_colour)
from .glyphs import CATEGORY_NAMES
from .recaption import false_negations, negation_share, recaption
from .published import voc_category_name, voc_class_map, write_coco_layout, write_voc_layout
from .recipes import (ChecksumError, REGISTRY, VOC_INSTANCES, convert_voc, evenly_spaced_frames, extract, fetch, md5sum,
                      msrvtt_to_coco, verify, voc_to_coco, write_json)

__all__ = ["CATEGORY_NAMES", "ChecksumError", "IN_DOMAIN_BACKGROUNDS", "OOD_BACKGROUNDS", "REGISTRY", "SPLITS",
           "VOC_INSTANCES", "WorldConfig", "benchmark_statistics", "build_world", "caption_statistics",
           "caption_structures", "convert_voc", "ensure_world", "evenly_spaced_frames", "false_negations", "fetch",
           "extract", "first_words", "generate_split", "load_split", "md5sum", "msrvtt_to_coco", "negation_share",
           "recaption", "render_image", "sample_objects", "split_rng", "split_summary", "typical_colour", "verify",
           "voc_category_name", "voc_class_map", "voc_to_coco", "write_coco_layout", "write_json",
           "write_voc_layout"]
