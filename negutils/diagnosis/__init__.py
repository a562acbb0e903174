"""Stage 7, diagnosis: why CLIP fails at negation. The diagnostic set, LCD and alignment per layer,
LCSE's bag-of-concepts analyses, KTN's dilution and theory checks, recognition and blindness.

The names chapters use, importable from here; everything else from its module."""
from .blindness import negation_cosines
from .collapse import (LcdAnalysis, against_untrained, bootstrap_layer_means, curve_shape,
                       divergence_per_item, lcd_analysis, lcd_by_structure, load_layer_choice,
                       peak_with_rising_alignment, probe_accuracy, select_layers)
from .concepts import ConceptBank, KTN_TEMPLATES, concept_embeddings
from .diagnostic import build_diagnostic_set, reword
from .dilution import concept_pairs, dilution_summary, text_coefficients
from .ktn_theory import (lemma1_check, lemma1_summary, pick_showcase_gallery, pool_weight_sweep,
                         score_separation, top_k_scores)
from .recognition import ORGANISM_TARGETS, object_recognition, organism_targets
# the organism's retrieval check, which chapter 00 reads beside its recognition checks, lives with
# pretraining (which evaluates with it); both read a split's images encoded as the benchmarks encode them
from ..benchmarks.evaluate import split_image_embeddings
from ..models.pretrain import backbone_retrieval_recall

__all__ = ["ConceptBank", "KTN_TEMPLATES", "LcdAnalysis", "against_untrained", "backbone_retrieval_recall",
           "bootstrap_layer_means",
           "ORGANISM_TARGETS", "build_diagnostic_set", "concept_embeddings", "concept_pairs", "curve_shape",
           "dilution_summary",
           "divergence_per_item", "lcd_analysis", "lemma1_check", "lemma1_summary", "lcd_by_structure",
           "load_layer_choice", "negation_cosines", "object_recognition", "organism_targets",
           "peak_with_rising_alignment", "pick_showcase_gallery", "pool_weight_sweep", "probe_accuracy", "reword",
           "score_separation", "select_layers", "split_image_embeddings", "text_coefficients", "top_k_scores"]
