"""Stage 4, benchmarks: NegBench MCQ and Retrieval-Neg (with the paraphraser), COCO-Confusion,
FACTOR-Bench, VALSE existence, the suite builder and CLIP_benchmark-style evaluation.

The names chapters use, importable from here; everything else from its module."""
from .confusion import ConfusionConfig, build_confusion, confusing_density, verification_report
from .evaluate import (ClipScorer, evaluate_confusion, evaluate_mcq, evaluate_pairwise, evaluate_retention,
                       evaluate_retrieval, pairwise_correct, result_row, results_frame, split_image_embeddings)
from .factor import FORMS, FactorConfig, PAPER_OPERATOR_COUNTS, build_factor, excluded_category
from .negbench import (BenchmarkFileError, MCQConfig, MCQ_COLUMNS, build_mcq, build_retrieval, claims_hold,
                       read_mcq_csv, write_mcq_csv)
from .paraphrase import PHRASINGS, paraphrase
from .suite import (BenchmarkConfig, NAMES, build_benchmarks, ensure_benchmarks, evaluate_benchmarks,
                    evaluate_methods)
from .valse import build_existence

__all__ = ["BenchmarkConfig", "BenchmarkFileError", "ClipScorer", "ConfusionConfig", "FORMS", "FactorConfig",
           "MCQConfig", "MCQ_COLUMNS", "NAMES", "PAPER_OPERATOR_COUNTS", "PHRASINGS", "build_benchmarks",
           "build_confusion", "build_existence", "build_factor", "build_mcq", "build_retrieval", "claims_hold",
           "confusing_density", "ensure_benchmarks", "evaluate_benchmarks", "evaluate_confusion", "evaluate_mcq",
           "evaluate_methods", "evaluate_pairwise", "evaluate_retention", "evaluate_retrieval", "excluded_category",
           "pairwise_correct", "paraphrase", "read_mcq_csv", "result_row", "results_frame",
           "split_image_embeddings", "verification_report", "write_mcq_csv"]
