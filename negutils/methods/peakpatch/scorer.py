"""PeakPatch as a scorer for the shared evaluation: the frozen encoder's taps computed once and
shared by every PeakPatch model."""
from __future__ import annotations

from typing import Sequence

import torch

from ...benchmarks.evaluate import ClipScorer
from ...models.memo import DiskMemo
from .model import PeakPatch


class PeakTaps:
    """What PeakPatch reads from the frozen backbone for a caption (final and peak-layer projected
    EOS, the l_p and l_a EOS states, the l_p tokens), tapped once per caption and shared by every
    PeakPatch model on the same (backbone, l_p, l_a). Values are rounded through float16 exactly
    as the training cache stores them."""

    def __init__(self, backbone, l_p: int, l_a: int, batch_size: int = 256):
        self.backbone, self.l_p, self.l_a, self.batch_size = backbone, l_p, l_a, batch_size
        folder = backbone.disk_folder          # on disk when the backbone keeps its outputs there
        self._store: dict[str, tuple[torch.Tensor, ...]] = \
            DiskMemo(folder / f"taps-lp{l_p}-la{l_a}", fields=5) if folder else {}

    def _tap(self, captions: list[str]) -> None:
        taps = self.backbone.encode_text_layers(captions, token_layers=sorted({self.l_p, self.l_a}),
                                                batch_size=self.batch_size)
        rows = torch.arange(len(captions))
        eos_lp, eos_la = taps.tokens[self.l_p][rows, taps.eos_index], taps.tokens[self.l_a][rows, taps.eos_index]
        # a caption's tokens are the masked positions, not a prefix: a last-token tower (SigLIP) pools at its
        # final position, after the padding
        self._store.update((caption, (taps.final[j].half(), taps.layer(self.l_p)[j].half(), eos_lp[j].half(),
                                      eos_la[j].half(), taps.tokens[self.l_p][j][taps.mask[j]].half()))
                           for j, caption in enumerate(captions))

    def batch(self, captions: Sequence[str]) -> dict:
        """The feature batch ``PeakPatch.corrected`` takes, float32, tokens padded and masked."""
        todo = sorted((c for c in dict.fromkeys(captions) if c not in self._store), key=len)   # similar lengths batch
        for k in range(0, len(todo), self.batch_size):
            self._tap(todo[k:k + self.batch_size])
        stored = [self._store[c] for c in captions]
        lengths = [len(s[4]) for s in stored]
        tokens = torch.zeros(len(stored), max(lengths), stored[0][4].shape[-1])
        mask = torch.zeros(len(stored), max(lengths), dtype=torch.bool)
        for j, s in enumerate(stored):
            tokens[j, :lengths[j]], mask[j, :lengths[j]] = s[4].float(), True
        stack = lambda k: torch.stack([s[k] for s in stored]).float()  # noqa: E731
        return {"final": stack(0), "proj_lp": stack(1), "eos_lp": stack(2), "eos_la": stack(3),
                "tokens": tokens, "mask": mask}


class PeakPatchScorer:
    """cos(f_I, f_hat) + Delta s for any caption: the frozen backbone is tapped at (l_p, l_a) on the
    fly (through ``taps``, which several scorers may share). ``use_delta=False`` drops the SCN's Delta s
    (the model's ECN alone: how chapter 03 tells the two modules' effects on retrieval apart)."""

    def __init__(self, backbone, model: PeakPatch, l_p: int, l_a: int, name: str = "PeakPatch",
                 batch_size: int = 256, taps: PeakTaps | None = None, image_scorer: ClipScorer | None = None,
                 use_delta: bool = True):
        self.backbone, self.model, self.l_p, self.l_a = backbone, model.eval(), l_p, l_a
        self.name, self.batch_size, self.use_delta = name, batch_size, use_delta
        if taps is not None and (taps.backbone is not backbone or (taps.l_p, taps.l_a) != (l_p, l_a)):
            raise ValueError(f"shared taps are of layers ({taps.l_p}, {taps.l_a}) of another backbone or layers; "
                             f"this scorer reads ({l_p}, {l_a})")
        self.taps = taps or PeakTaps(backbone, l_p, l_a, batch_size)
        self.image_scorer = image_scorer or ClipScorer(backbone, batch_size=batch_size)   # the frozen image tower
        self._text: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def image_features(self, split, indices) -> torch.Tensor:
        return self.image_scorer.image_features(split, indices)

    def text_batch(self, captions: Sequence[str]) -> dict:
        return self.taps.batch(captions)

    @torch.no_grad()
    def text_features(self, captions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(f_hat, f^{l_p}_T) per caption, computed once per distinct caption and cached."""
        todo = sorted({c for c in captions if c not in self._text})
        for k in range(0, len(todo), self.batch_size):
            chunk = todo[k:k + self.batch_size]
            batch = self.text_batch(chunk)
            for c, f, p in zip(chunk, self.model.corrected(batch), batch["proj_lp"]):
                self._text[c] = (f, p)
        corrected = torch.stack([self._text[c][0] for c in captions])
        return corrected, torch.stack([self._text[c][1] for c in captions])

    def corrected(self, captions: Sequence[str]) -> torch.Tensor:
        return self.text_features(captions)[0]

    @torch.no_grad()
    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor:
        corrected, peak = self.text_features(captions)
        scores = image_features @ corrected.T
        if self.model.scn is not None and self.use_delta:
            scores = scores + self.model.scn.pairwise(corrected, peak, image_features)
        return scores

    @torch.no_grad()
    def score_rows(self, image_features: torch.Tensor, captions_per_row: list[list[str]]) -> torch.Tensor:
        k = len(captions_per_row[0])
        corrected, peak = self.text_features([c for caps in captions_per_row for c in caps])
        corrected = corrected.reshape(len(captions_per_row), k, -1)
        image = image_features[:, None, :].expand(-1, k, -1)
        if not self.use_delta:
            return (image * corrected).sum(-1)
        delta = self.model.delta(corrected, peak.reshape(len(captions_per_row), k, -1), image)
        return (image * corrected).sum(-1) + delta
