"""Stage 11, plots: every chapter's figures, one function per figure.

The names chapters use, importable from here; everything else from its module."""
from .collapse import (plot_against_untrained, plot_concept_polarity, plot_dilution, plot_lcd, plot_lcd_by_structure,
                       plot_lcd_controls, plot_lcd_through_pretraining, plot_probe, plot_quadrant_heatmap,
                       plot_ranking_similarity, plot_span_residual)
from .negation_rate import plot_gains, plot_lcd_by_rate, plot_measures
from .peakpatch import (plot_attention_heads, plot_embedding_maps, plot_layer_sweep, plot_learning_curve,
                        plot_mcq_methods, plot_protocols, plot_score_corrections, plot_training)
from .summary import plot_absent, plot_notebook_times, plot_ratios, plot_unified
from .training_free import (plot_calibration_grid, plot_dilution_vs_rejection, plot_lemma1, plot_operator_accuracy,
                            plot_separation)
from .world import (plot_mcq_breakdown, plot_negation_cosines, plot_pretraining, plot_recognition,
                    show_confusion_gallery, show_factor_examples, show_mcq_examples, show_samples)

__all__ = ["plot_absent", "plot_against_untrained", "plot_attention_heads", "plot_calibration_grid",
           "plot_concept_polarity", "plot_dilution", "plot_dilution_vs_rejection", "plot_embedding_maps", "plot_gains",
           "plot_layer_sweep", "plot_lcd", "plot_lcd_by_rate", "plot_lcd_by_structure", "plot_lcd_controls",
           "plot_lcd_through_pretraining", "plot_learning_curve", "plot_lemma1", "plot_mcq_breakdown",
           "plot_mcq_methods", "plot_measures", "plot_negation_cosines", "plot_notebook_times",
           "plot_operator_accuracy", "plot_pretraining", "plot_probe", "plot_protocols", "plot_quadrant_heatmap",
           "plot_ranking_similarity", "plot_ratios", "plot_recognition", "plot_score_corrections", "plot_separation",
           "plot_span_residual", "plot_training", "plot_unified", "show_confusion_gallery", "show_factor_examples",
           "show_mcq_examples", "show_samples"]
