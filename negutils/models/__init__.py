"""Stage 3, models: weights and checkpoints, the open_clip backbone and its taps, pretraining the
organism, the ragged feature cache.

The names chapters use, importable from here; everything else from its module."""
from .backbone import (Backbone, create_model, get_tokenizer, load_backbone, save_checkpoint,
                       save_training_checkpoint)
from .features import (FIELDS, TextFeatures, dense_bytes, extract_layer_sweep, extract_text_features,
                       shard_bounds)
from .pretrain import PretrainConfig, backbone_retrieval_recall, ensure_pretrained, load_pretrained, pretrain
from .retrieval import retrieval_recall
from .weights import (CheckpointMismatchError, LoadReport, NonFiniteWeightsError, WeightsUnavailableError,
                      tag_needs_quick_gelu)

__all__ = ["Backbone", "CheckpointMismatchError", "NonFiniteWeightsError", "FIELDS", "LoadReport", "PretrainConfig",
           "TextFeatures", "WeightsUnavailableError", "backbone_retrieval_recall", "create_model", "dense_bytes",
           "ensure_pretrained", "extract_layer_sweep", "extract_text_features", "get_tokenizer", "load_backbone",
           "load_pretrained", "pretrain", "retrieval_recall", "save_checkpoint", "save_training_checkpoint",
           "shard_bounds", "tag_needs_quick_gelu"]
