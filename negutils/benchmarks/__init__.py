"""Stage 4, benchmarks: NegBench MCQ and Retrieval-Neg (with the paraphraser), COCO-Confusion,
FACTOR-Bench, VALSE existence, the suite builder and CLIP_benchmark-style evaluation.

The names chapters use, importable from here; everything else from its module."""
from .confusion import confusing_density, verification_report
from .evaluate import ClipScorer, evaluate_retention, pairwise_correct, results_frame
from .factor import excluded_category
from .suite import evaluate_benchmarks

__all__ = ["ClipScorer", "confusing_density", "evaluate_benchmarks", "evaluate_retention", "excluded_category",
           "pairwise_correct", "results_frame", "verification_report"]
