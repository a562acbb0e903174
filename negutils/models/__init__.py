"""Stage 3, models: weights and checkpoints, the open_clip backbone and its taps, pretraining the
organism, the ragged feature cache.

No chapter imports from this stage directly (the session opens the backbone), so it exports nothing:
import from its modules (``backbone``, ``weights``, ``pretrain``, ``features``, ``memo``, ...)."""

__all__: list[str] = []
