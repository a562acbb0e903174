"""Stage 2, world: the embedded glyph world (rendering, alt-text captions, recaptioning), COCO-format I/O,
and the recipes that turn real datasets into the same layout.

The names chapters use, importable from here; everything else from its module."""
from .describe import benchmark_statistics, caption_statistics, caption_structures, first_words, split_summary
from .recaption import false_negations, negation_share

__all__ = ["benchmark_statistics", "caption_statistics", "caption_structures", "false_negations", "first_words",
           "negation_share", "split_summary"]
