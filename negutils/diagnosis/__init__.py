"""Stage 7, diagnosis: why CLIP fails at negation. The diagnostic set, LCD and alignment per layer,
LCSE's bag-of-concepts analyses, KTN's dilution and theory checks, recognition and blindness.

The names chapters use, importable from here; everything else from its module."""
from .blindness import negation_cosines
from .collapse import against_untrained, lcd_analysis, lcd_by_structure, load_layer_choice
from .concepts import ConceptBank, KTN_TEMPLATES
from .diagnostic import build_diagnostic_set
from .formation import formation_findings, formation_summary, lcd_through_pretraining
from .dilution import concept_pairs, dilution_summary, text_coefficients
from .ktn_theory import (lemma1_check, lemma1_summary, pick_showcase_gallery, pool_weight_sweep, score_separation,
                         top_k_scores)
from .recognition import object_recognition, organism_targets
# the organism's retrieval check, which chapter 00 reads beside its recognition checks, lives with
# pretraining (which evaluates with it); both read a split's images encoded as the benchmarks encode them
from ..benchmarks.evaluate import split_image_embeddings
from ..models.pretrain import backbone_retrieval_recall, snapshot_checkpoints

__all__ = ["against_untrained", "backbone_retrieval_recall", "build_diagnostic_set", "concept_pairs", "ConceptBank",
           "dilution_summary", "formation_findings", "formation_summary", "KTN_TEMPLATES", "lcd_analysis",
           "lcd_by_structure", "lcd_through_pretraining", "lemma1_check", "lemma1_summary", "load_layer_choice",
           "negation_cosines", "object_recognition", "organism_targets", "pick_showcase_gallery", "pool_weight_sweep",
           "score_separation", "snapshot_checkpoints", "split_image_embeddings", "text_coefficients", "top_k_scores"]
