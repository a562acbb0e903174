"""Stage 1, core: cache and atomic writes, result I/O, statistics (metrics, the sigmoid, the bootstrap),
text helpers, oracle logic, offline checks.

The names chapters use, importable from here; everything else from its module."""
from .cache import atomic_save, atomic_write_json, build_directory_atomically, config_hash
from .logic import canonical, flat, holds, literal, nested
from .metrics import (NonFiniteScores, average_precision, choice_credit, choice_weights, mcq_metrics,
                      mean_average_precision, pairwise_accuracy, ranks_of_targets, recall_at_k, recall_at_k_sets,
                      require_finite, roc_auc, spearman_rho, tied_choices)
from .phrasing import has_negation_cue, negate_caption, with_article
from .results import method_table, read_results, write_results
from .stats import bootstrap_interval, sigmoid

__all__ = ["NonFiniteScores", "choice_credit", "choice_weights", "require_finite", "tied_choices", "atomic_save",
           "atomic_write_json", "average_precision", "bootstrap_interval", "build_directory_atomically", "canonical",
           "config_hash", "flat", "has_negation_cue", "holds", "literal", "mcq_metrics", "mean_average_precision",
           "method_table", "negate_caption", "nested", "pairwise_accuracy", "ranks_of_targets", "read_results",
           "recall_at_k", "recall_at_k_sets", "roc_auc", "sigmoid", "spearman_rho", "with_article", "write_results"]
