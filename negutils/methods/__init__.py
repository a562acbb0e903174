"""Stage 8, methods: the fixes. Caption parsing, Embedding Correction and KTN, LCSE (+ calibration),
the negation training data, NegFull fine-tuning and PeakPatch (``methods.peakpatch``), and the registry of every method the
book evaluates (``methods.registry``).

The names chapters use, importable from here; everything else from its module."""
from ..models.features import TextFeatures, dense_bytes, extract_layer_sweep, extract_text_features
from .ktn import (EC_LAMBDA, EmbeddingCorrectionScorer, HolisticScorer, KAPPA, KtnScorer, NEUTRAL_TEXT,
                  NEUTRAL_WORDS, rejection_score, remove_directions)
from .lcse import (Calibration, LCSE_TEMPLATES, LcseScorer, calibration_grid, closed_form_and,
                   closed_form_not, default_calibration, fit_calibration, lcse_correction, logic_probability,
                   pairwise_evidence, power_mean)
from .lcse_analysis import (ablation_rows, calibration_set, concept_detection_auc, evidence_strata, fit_on_split,
                            operator_table, oracle_parses, parser_agreement)
from .negfull import (NegFullConfig, choose_alpha, finetune_negfull, fit_protocols, held_out_accuracy,
                      negfull_loss)
from .parse_set import PARSE_SET, parse_set_summary, read_parse_set, score_parses
from .parsing import (fallback_rate, keep_parses_on_disk, parse_captions, parse_ktn, parse_lcse, parse_table,
                      parser_coverage, parser_key)
from .peakpatch.analysis import (PROTOCOL_TASKS, attention_by_token_type, correction_summary, embedding_map,
                                 gallery_offsets, mcq_table, near_tie_subset, near_tie_table,
                                 polarity_separation, protocol_findings, protocol_table, score_corrections)
from .peakpatch.export import export_peakpatch, load_peakpatch
from .peakpatch.model import ALPHA_MAX, ECN, PeakPatch, SCN, parameter_count
from .peakpatch.scorer import PeakPatchScorer, PeakTaps
from .peakpatch.train import (PeakPatchConfig, chosen_design, design_table, ensure_peakpatch, initial_cosine,
                              layer_sweep, losses, run_plan, scn_candidates, train_peakpatch, train_variants)
from .registry import (METHODS, Method, build_scorer, family, joint_peakpatch_scorer, method,
                       method_id, method_label, negfull_label, scorer_dict, variant_label)
from .training_data import (DEFAULT_PROTOCOL, PROTOCOLS, benchmark_phrasing, build_negation_data,
                            check_truth, contrastive_loss, examples, mcq_accuracy, mentioned,
                            prepare_negation_data, protocol_view)

__all__ = ["TextFeatures", "dense_bytes", "extract_layer_sweep", "extract_text_features", "METHODS", "Method",
           "build_scorer", "family", "negfull_label", "scorer_dict", "variant_label", "ALPHA_MAX", "Calibration",
           "DEFAULT_PROTOCOL", "ECN", "EC_LAMBDA", "EmbeddingCorrectionScorer", "HolisticScorer", "KAPPA",
           "KtnScorer", "LCSE_TEMPLATES", "LcseScorer", "NEUTRAL_TEXT", "NEUTRAL_WORDS", "NegFullConfig",
           "PROTOCOLS", "PROTOCOL_TASKS", "PeakPatch", "PeakPatchConfig", "PeakPatchScorer", "PeakTaps", "SCN",
           "ablation_rows", "attention_by_token_type", "benchmark_phrasing", "build_negation_data",
           "calibration_grid", "calibration_set", "check_truth", "choose_alpha", "chosen_design", "closed_form_and",
           "closed_form_not", "concept_detection_auc", "contrastive_loss", "correction_summary",
           "default_calibration", "design_table", "embedding_map", "ensure_peakpatch", "evidence_strata",
           "export_peakpatch", "load_peakpatch", "fit_on_split", "examples", "fallback_rate", "finetune_negfull",
           "fit_calibration", "fit_protocols", "gallery_offsets", "held_out_accuracy", "initial_cosine",
           "joint_peakpatch_scorer", "layer_sweep", "lcse_correction", "logic_probability", "losses", "mcq_accuracy",
           "mcq_table", "mentioned", "method", "method_id", "method_label", "near_tie_subset", "near_tie_table",
           "negfull_loss", "operator_table", "oracle_parses", "pairwise_evidence", "parameter_count",
           "keep_parses_on_disk", "parse_captions", "parse_ktn", "parse_lcse", "parse_table", "parser_agreement",
           "parser_coverage", "PARSE_SET", "parse_set_summary", "read_parse_set", "score_parses", "parser_key",
           "polarity_separation", "power_mean", "prepare_negation_data", "protocol_findings", "protocol_table",
           "protocol_view", "rejection_score", "remove_directions", "run_plan", "scn_candidates",
           "score_corrections", "train_peakpatch", "train_variants"]
