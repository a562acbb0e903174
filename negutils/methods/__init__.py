"""Stage 8, methods: the fixes. Caption parsing, Embedding Correction and KTN, LCSE (+ calibration),
the negation training data, NegFull fine-tuning and PeakPatch (``methods.peakpatch``), and the registry of every
method the book evaluates (``methods.registry``).

The names chapters use, importable from here; everything else from its module."""
from .decision import BackboneJudge, decision_set, peakpatch_judge
from .ktn import EC_LAMBDA, KAPPA, NEUTRAL_TEXT, NEUTRAL_WORDS
from .lcse import calibration_grid, closed_form_and, closed_form_not, lcse_correction, pairwise_evidence
from .lcse_analysis import (ablation_rows, beside_paper, calibration_evidence, calibration_set, concept_detection_auc,
                            evidence_strata, fit_on_evidence, fit_on_split, operator_table, oracle_parses,
                            parser_agreement)
from .negfull import fit_protocols
from .parse_set import PARSE_SET, parse_set_summary, read_parse_set, score_parses
from .parsing import keep_parses_on_disk, parse_captions, parse_table, parser_coverage, parser_key
from .peakpatch.analysis import (attention_by_token_type, choice_ties, correction_summary, design_choices,
                                 embedding_map, mcq_table, near_tie_table, polarity_separation, protocol_findings,
                                 protocol_table, PROTOCOL_TASKS, score_corrections, ties_findings)
from .peakpatch.export import export_peakpatch
from .peakpatch.learning_curve import curve_findings
from .peakpatch.model import ECN, parameter_count, SCN
from .peakpatch.retrieval_collapse import (collapse_findings, contrast_finding, delta_decomposition, design_contrast,
                                           offset_correlates, retrieval_with_and_without_delta)
from .peakpatch.scorer import PeakTaps
from .peakpatch.train import (choose_design, chosen_design, initial_cosine, layer_sweep, PeakPatchConfig, run_plan,
                              runner_up_design, train_variants)
from .registry import (build_scorer, joint_peakpatch_scorer, method_id, method_label, negfull_label, scorer_dict,
                       variant_label)
from .training_data import benchmark_phrasing, check_truth, DEFAULT_PROTOCOL, examples, prepare_negation_data
from ..models.features import dense_bytes, extract_layer_sweep, extract_text_features, TextFeatures

__all__ = ["ablation_rows", "attention_by_token_type", "BackboneJudge", "benchmark_phrasing", "beside_paper",
           "build_scorer", "calibration_evidence", "calibration_grid", "calibration_set", "check_truth", "choice_ties",
           "choose_design", "chosen_design", "closed_form_and", "closed_form_not", "collapse_findings",
           "concept_detection_auc", "contrast_finding", "correction_summary", "curve_findings", "decision_set",
           "DEFAULT_PROTOCOL", "delta_decomposition", "dense_bytes", "design_choices", "design_contrast", "EC_LAMBDA",
           "ECN", "embedding_map", "evidence_strata", "examples", "export_peakpatch", "extract_layer_sweep",
           "extract_text_features", "fit_on_evidence", "fit_on_split", "fit_protocols", "initial_cosine",
           "joint_peakpatch_scorer", "KAPPA", "keep_parses_on_disk", "layer_sweep", "lcse_correction", "mcq_table",
           "method_id", "method_label", "near_tie_table", "negfull_label", "NEUTRAL_TEXT", "NEUTRAL_WORDS",
           "offset_correlates", "operator_table", "oracle_parses", "pairwise_evidence", "parameter_count",
           "parse_captions", "PARSE_SET", "parse_set_summary", "parse_table", "parser_agreement", "parser_coverage",
           "parser_key", "peakpatch_judge", "PeakPatchConfig", "PeakTaps", "polarity_separation",
           "prepare_negation_data", "protocol_findings", "protocol_table", "PROTOCOL_TASKS", "read_parse_set",
           "retrieval_with_and_without_delta", "run_plan", "runner_up_design", "SCN", "score_corrections",
           "score_parses", "scorer_dict", "TextFeatures", "ties_findings", "train_variants", "variant_label"]
