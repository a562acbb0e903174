"""Backbones: any open_clip model plus the project's small configs, with per-layer text taps.

``Backbone.encode_text_layers`` runs ONE forward pass and returns, for every text layer l, the
hidden state at the position the tower pools (CLIP's EOS, SigLIP's last position) passed through
``ln_final`` and ``text_projection`` and L2-normalised (f^l_T of PeakPatch sec. 3.1), the final
embedding, and on request the per-layer token sequences after ``ln_final`` with their mask (what
PeakPatch's ECN reads): the caption's tokens as its tokenizer counts them, never its padding.
"""
from __future__ import annotations

import hashlib
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import open_clip
import torch
import torch.nn.functional as F
from open_clip.transform import PreprocessCfg, image_transform_v2
from PIL import Image
from tqdm.auto import tqdm

from ..core.cache import atomic_save, config_hash
from ..core.metrics import NonFiniteScores
from . import weights
from .memo import DiskMemo
from .weights import LoadReport

# bump when what the encoders compute for a caption changes (tokenisation, pooling, which tokens the
# taps keep): the disk memos of every backbone are then written afresh
OUTPUTS_VERSION = 2

PROJECT_CONFIG_DIR = Path(__file__).parent / "model_configs"
_registered = False


def register_project_configs() -> list[str]:
    """Make the project's configs (``negbook-*``) known to open_clip's factory."""
    global _registered
    if not _registered:
        open_clip.add_model_config(PROJECT_CONFIG_DIR)
        _registered = True
    return sorted(p.stem for p in PROJECT_CONFIG_DIR.glob("*.json"))


@dataclass
class TextLayers:
    """Result of one tapped text forward pass over B captions."""
    final: torch.Tensor               # [B, d] encode_text output, L2-normalised
    eos: torch.Tensor                 # [L, B, d] f^l_T for l = 1..L (index l-1), L2-normalised
    eos_index: torch.Tensor           # [B] position of the pooled token (EOS, or the tower's last or first)
    tokens: dict[int, torch.Tensor] | None = None   # layer l -> [B, N, width] after ln_final
    # [B, N] True at the caption's tokens (what the tokenizer wrote, specials included, padding not) and at
    # the pooled position, which a "last"-pooling tower reads from the padding when the caption is short
    mask: torch.Tensor | None = None

    def layer(self, layer: int) -> torch.Tensor:
        """f^l_T with PeakPatch's 1-based layer numbering."""
        if not 1 <= layer <= self.eos.shape[0]:
            raise IndexError(f"layer {layer} out of range 1..{self.eos.shape[0]}")
        return self.eos[layer - 1]


POOL_TYPES = ("argmax", "eos", "last", "first")


class _TextTower:
    """Uniform access to the text-side modules of CLIP and CustomTextCLIP models."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        if isinstance(model, open_clip.CLIP):
            self.module, self.pool_type = model, model.text_pool_type
            self.eos_id = getattr(model, "text_eos_id", None)
        elif isinstance(getattr(model, "text", None), open_clip.transformer.TextTransformer):
            self.module, self.pool_type = model.text, model.text.pool_type
            self.eos_id = getattr(model.text, "eos_id", None)
            if model.text.cls_emb is not None:
                raise NotImplementedError("layer taps do not support text towers with an appended CLS token (CoCa)")
        else:
            raise NotImplementedError(
                f"layer taps need an open_clip TextTransformer; {type(getattr(model, 'text', model)).__name__} "
                "(e.g. a Hugging Face text tower) is not supported")
        if self.pool_type not in POOL_TYPES:
            raise NotImplementedError(f"layer taps need a text tower pooled at one token ({', '.join(POOL_TYPES)}); "
                                      f"this one pools {self.pool_type!r}")
        self.transformer = self.module.transformer
        self.ln_final = self.module.ln_final
        self.projection = self.module.text_projection
        # the id the tower itself masks out of attention, when it masks padding at all (a TextTransformer
        # with use_pad_mask); padding is otherwise the tokenizer's business (``Backbone.pad_id``)
        self.masked_pad_id = self.module.pad_id if getattr(self.module, "use_pad_mask", False) else None
        self.trims = self._trimmable()

    @property
    def n_layers(self) -> int:
        return len(self.transformer.resblocks)

    def eos_positions(self, text: torch.Tensor) -> torch.Tensor:
        """The position each row is pooled at, as open_clip's ``text_global_pool`` reads it."""
        n = text.shape[1]
        if self.pool_type == "argmax":
            return text.argmax(dim=-1)
        if self.pool_type == "eos":
            return (text == self.eos_id).int().argmax(dim=-1)
        if self.pool_type == "last":
            return torch.full((text.shape[0],), n - 1, dtype=torch.long, device=text.device)
        if self.pool_type == "first":
            return torch.zeros(text.shape[0], dtype=torch.long, device=text.device)
        raise NotImplementedError(f"text pool type {self.pool_type!r} has no single EOS position")

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        if self.projection is None:
            return pooled
        if isinstance(self.projection, torch.nn.Linear):
            return self.projection(pooled)
        return pooled @ self.projection

    def _trimmable(self) -> bool:
        """Whether positions after the last EOS can be dropped: a CLIP text tower with a causal mask
        pooling at the EOS token, where no later position reaches any earlier state."""
        mask = getattr(self.module, "attn_mask", None)
        if not (isinstance(self.module, open_clip.CLIP) and self.pool_type in ("argmax", "eos") and mask is not None):
            return False
        above = torch.ones(mask.shape, dtype=torch.bool, device=mask.device).triu(1)
        return bool(torch.isinf(mask[above]).all() and torch.isfinite(mask[~above]).all())

    def encode(self, text: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        """``model.encode_text(text)``, computed over the first L positions only (L = the batch's
        last EOS + 1) where ``trims``: the same embedding at a fraction of the cost for captions
        shorter than the context. Other towers run at full length."""
        if not self.trims:
            return self.model.encode_text(text, normalize=normalize)
        m = self.module
        n = int(self.eos_positions(text).max()) + 1
        text = text[:, :n]
        cast = m.transformer.get_cast_dtype()
        x = m.token_embedding(text).to(cast) + m.positional_embedding[:n].to(cast)
        x = m.ln_final(m.transformer(x, attn_mask=m.attn_mask[:n, :n]))
        pooled = self.project(x[torch.arange(x.shape[0], device=x.device), self.eos_positions(text)])
        return F.normalize(pooled, dim=-1) if normalize else pooled

    def encode_by_length(self, text: torch.Tensor, chunk: int = 128, normalize: bool = False) -> torch.Tensor:
        """``encode`` over chunks of captions of similar length (sorted by EOS position), rows in
        the input order: each chunk is trimmed to its own longest caption."""
        order = torch.argsort(self.eos_positions(text), stable=True)
        parts = [self.encode(text[order[k:k + chunk]], normalize) for k in range(0, len(text), chunk)]
        out = torch.empty(len(text), parts[0].shape[-1], dtype=parts[0].dtype, device=parts[0].device)
        out[order] = torch.cat(parts)
        return out


class Backbone:
    """An open_clip model with its tokenizer and preprocessing, frozen in eval mode."""

    def __init__(self, model: torch.nn.Module, model_name: str, tokenizer, report: LoadReport,
                 device: str | torch.device = "cpu", frozen: bool = False, key: str = ""):
        self.model = model.eval()
        # what caches of this backbone's outputs are keyed by (``load_backbone`` sets it from the weights'
        # source); "" for a wrapper around weights being trained, whose outputs are never cached
        self.key = key
        # a loaded model's weights never change, so ``encode_text`` keeps each caption's embedding and
        # every scorer and chapter step on it shares them; a wrapper around weights being trained
        # (pretraining's evaluations, NegFull) must not. ``image_memo`` is the same for image embeddings,
        # keyed by the image file and whether flips are averaged; the scorers on this backbone fill and read it
        self._text_memo: dict[str, torch.Tensor] | None = {} if frozen else None
        self.image_memo: dict[str, torch.Tensor] | None = {} if frozen else None
        self.disk_folder: Path | None = None        # set by ``keep_on_disk``
        self.model_name = model_name
        self.tokenizer = tokenizer
        self.report = report
        self.device = torch.device(device)
        self.text_tower = _TextTower(model)
        masked = self.text_tower.masked_pad_id
        if masked is not None and masked != self.pad_id:
            raise ValueError(f"{model_name}'s text tower masks token id {masked} out of attention as padding, but its "
                             f"tokenizer ({type(tokenizer).__name__}) pads with id {self.pad_id}")
        pcfg = PreprocessCfg(**open_clip.get_model_preprocess_cfg(model))
        self.preprocess = image_transform_v2(pcfg, is_train=False)
        self.image_size = pcfg.size if isinstance(pcfg.size, int) else pcfg.size[0]
        self._mean = torch.tensor(pcfg.mean).view(1, 3, 1, 1)
        self._std = torch.tensor(pcfg.std).view(1, 3, 1, 1)

    def keep_on_disk(self, root: str | os.PathLike) -> Path:
        """Keep this frozen backbone's outputs (text and image embeddings here, PeakPatch's taps in
        its scorer) under ``root``, in a folder named by the backbone's key, so a later process (the
        next chapter) reads them instead of encoding the same captions and images again."""
        if self._text_memo is None or not self.key:
            raise ValueError(f"only a frozen backbone loaded by load_backbone can keep its outputs on disk "
                             f"({self.model_name!r} has key {self.key!r})")
        self.disk_folder = Path(root) / f"backbone-{config_hash([self.key, OUTPUTS_VERSION])}"
        self.disk_folder.mkdir(parents=True, exist_ok=True)
        (self.disk_folder / "backbone.txt").write_text(self.key + "\n")
        text, images = DiskMemo(self.disk_folder / "text"), DiskMemo(self.disk_folder / "images")
        text.update(self._text_memo)
        images.update(self.image_memo)
        self._text_memo, self.image_memo = text, images
        return self.disk_folder

    @property
    def n_layers(self) -> int:
        return self.text_tower.n_layers

    @property
    def context_length(self) -> int:
        return int(self.tokenizer.context_length)

    @property
    def embed_dim(self) -> int:
        proj = self.text_tower.projection
        if proj is None:
            return int(self.text_tower.transformer.width)
        return int(proj.out_features if isinstance(proj, torch.nn.Linear) else proj.shape[-1])

    @property
    def pad_id(self) -> int:
        """The id the tokenizer fills a short caption's row with: its Hugging Face tokenizer's pad token
        (SigLIP's pads with its end-of-text id, 1), 0 for open_clip's CLIP tokenizer."""
        hf = _hugging_face_tokenizer(self.tokenizer)
        if hf is not None:
            if hf.pad_token_id is None:
                raise ValueError(f"{self.model_name}'s Hugging Face tokenizer ({type(hf).__name__}) has no pad token")
            return int(hf.pad_token_id)
        if isinstance(self.tokenizer, open_clip.SimpleTokenizer):
            return 0                    # SimpleTokenizer writes captions into a row of zeros
        raise NotImplementedError(f"cannot tell the padding id of tokenizer {type(self.tokenizer).__name__}: "
                                  "neither open_clip's SimpleTokenizer nor a wrapped Hugging Face tokenizer")

    def tokenize(self, captions: Sequence[str]) -> torch.Tensor:
        """The tokenizer's ids for ``captions`` on this backbone's device, with a warning naming the
        captions it cuts at the context length."""
        return self._tokenize(captions)[0]

    def _tokenize(self, captions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, [B, N] True at each caption's own tokens), both on the device; warns of cut captions."""
        captions = list(captions)
        tokens = self.tokenizer(captions)
        real, cut = self._real_tokens(captions, tokens)
        if cut.any():
            warnings.warn(f"{int(cut.sum())} caption(s) exceed the context length {self.context_length} and are "
                          f"truncated, e.g. {captions[int(cut.argmax())]!r}", stacklevel=3)
        return tokens.to(self.device), real.to(self.device)

    def truncated(self, captions: Sequence[str], tokens: torch.Tensor | None = None) -> np.ndarray:
        """Per caption, whether the tokenizer cuts it at the context length (``tokens``: the
        tokenizer's output for ``captions``, when already computed)."""
        captions = list(captions)
        tokens = self.tokenizer(captions) if tokens is None else tokens
        return self._real_tokens(captions, tokens)[1]

    def _real_tokens(self, captions: list[str], tokens: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
        """([B, N] True at the positions holding each caption's tokens, specials included; [B] whether
        the tokenizer cut the caption), counted the tokenizer's own way. The ids alone cannot tell:
        SigLIP's tokenizer pads with its end-of-text id, and CLIP's id 0 is both padding and a token."""
        tokens = tokens.cpu()
        n = tokens.shape[1]
        positions = torch.arange(n)[None, :]
        hf = _hugging_face_tokenizer(self.tokenizer)
        if hf is not None:
            if getattr(self.tokenizer, "tokenizer_mode", "") == "clips":
                raise NotImplementedError("HFTokenizer's 'clips' mode (a class token after the padding) is not "
                                          "supported by the layer taps")
            clean = getattr(self.tokenizer, "clean_fn", _siglip_clean)        # SigLipTokenizer cleans this way
            # the same encoding as the tokenizer's call, neither cut nor padded: each caption's length in tokens
            needed = np.array([len(ids) for ids in hf([clean(c) for c in captions], truncation=False, padding=False,
                                                      verbose=False)["input_ids"]], dtype=np.int64)
            kept = torch.from_numpy(np.minimum(needed, n))[:, None]
            real = positions >= n - kept if hf.padding_side == "left" else positions < kept
            cut = needed > n
        elif isinstance(self.tokenizer, open_clip.SimpleTokenizer):
            # start of text, the caption, end of text; a cut caption ends in an end-of-text id at the last position
            is_end = tokens == self.tokenizer.eot_token_id
            if not is_end.any(dim=1).all():
                row = int((~is_end.any(dim=1)).int().argmax())
                raise ValueError(f"tokens of caption {captions[row]!r} hold no end-of-text id "
                                 f"{self.tokenizer.eot_token_id}: they are not this tokenizer's output")
            end = is_end.int().argmax(dim=1)
            real = positions <= end[:, None]
            # only a caption that fills its row can have been cut: only those are encoded again to count
            cut = np.array([bool(full) and len(self.tokenizer.encode(c)) + 2 > n
                            for c, full in zip(captions, (end == n - 1).tolist())], dtype=bool)
        else:
            raise NotImplementedError(f"cannot tell a caption's tokens from padding for tokenizer "
                                      f"{type(self.tokenizer).__name__}: neither open_clip's SimpleTokenizer nor a "
                                      "wrapped Hugging Face tokenizer")
        stray = (tokens != self.pad_id) & ~real
        if stray.any():
            row = int(stray.any(dim=1).int().argmax())
            raise ValueError(f"the tokenizer's ids for caption {captions[row]!r} hold a non-padding id after the "
                             f"{int(real[row].sum())} tokens its own encoding counts: {tokens[row].tolist()}")
        return real, cut

    @torch.no_grad()
    def encode_text(self, captions: Sequence[str], batch_size: int = 256) -> torch.Tensor:
        """Plain ``encode_text``, L2-normalised: the untapped reference. Captions are encoded in
        batches of similar length, each trimmed to its longest caption (``_TextTower.encode``)."""
        captions = list(captions)
        if not captions:
            return torch.empty(0, self.embed_dim)
        if self._text_memo is None:
            return self._encode_text(captions, batch_size)
        todo = list(dict.fromkeys(c for c in captions if c not in self._text_memo))
        if todo:
            self._text_memo.update(zip(todo, self._encode_text(todo, batch_size)))
        return torch.stack([self._text_memo[c] for c in captions])

    def _encode_text(self, captions: list[str], batch_size: int) -> torch.Tensor:
        out = self.text_tower.encode_by_length(self.tokenize(captions), batch_size, normalize=True).float().cpu()
        return self.require_finite(out, captions, "captions")

    def require_finite(self, embeddings: torch.Tensor, inputs, what: str) -> torch.Tensor:
        """``embeddings`` unchanged, or ``NonFiniteScores`` naming this model's weights and the first
        input (``inputs[row]``, or the row) embedded to NaN or infinity: every score of it would be
        meaningless."""
        bad = ~torch.isfinite(embeddings).all(dim=-1)
        if bad.any():
            first = int(bad.nonzero()[0, 0])
            example = f"row {first}" if inputs is None else repr(inputs[first])
            raise NonFiniteScores(f"{self.report.model_name} ({self.report.source}) embeds {int(bad.sum())} of "
                                  f"{len(bad)} {what} to non-finite values, e.g. {example}")
        return embeddings

    @torch.no_grad()
    def encode_text_layers(self, captions: Sequence[str], token_layers: Sequence[int] | bool = (),
                           batch_size: int = 256, progress: bool = False) -> TextLayers:
        """Tapped forward pass. ``token_layers``: 1-based layers whose full token sequences to keep
        (``True`` keeps all)."""
        captions = list(captions)
        if token_layers is True:
            token_layers = range(1, self.n_layers + 1)
        token_layers = sorted(set(token_layers or ()))
        text, real = self._tokenize(captions)
        # batches of similar length, each trimmed to its longest caption; rows back in input order
        by_length = torch.argsort(self.text_tower.eos_positions(text), stable=True)
        order = by_length.cpu()
        parts = [self._tapped_batch(text[by_length[i:i + batch_size]], real[by_length[i:i + batch_size]],
                                    token_layers)
                 for i in tqdm(range(0, len(captions), batch_size), desc="text taps", disable=not progress)]
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        width = max(p.mask.shape[1] for p in parts) if token_layers else 0

        def padded(x: torch.Tensor) -> torch.Tensor:    # [B, n, ...] -> [B, width, ...], zeros / False after n
            out = x.new_zeros((x.shape[0], width, *x.shape[2:]))
            out[:, :x.shape[1]] = x
            return out

        return TextLayers(
            final=self.require_finite(torch.cat([p.final for p in parts])[inverse], captions, "captions"),
            eos=torch.cat([p.eos for p in parts], dim=1)[:, inverse],
            eos_index=torch.cat([p.eos_index for p in parts])[inverse],
            tokens={layer: torch.cat([padded(p.tokens[layer]) for p in parts])[inverse] for layer in token_layers}
            if token_layers else None,
            mask=torch.cat([padded(p.mask) for p in parts])[inverse] if token_layers else None,
        )

    def _tapped_batch(self, text: torch.Tensor, real: torch.Tensor, token_layers: list[int]) -> TextLayers:
        tower = self.text_tower
        if tower.trims:                 # the positions the tower reads, as ``_TextTower.encode`` trims
            n = int(tower.eos_positions(text).max()) + 1
            text, real = text[:, :n], real[:, :n]
        captured: list[torch.Tensor] = []
        batch_first = getattr(tower.transformer, "batch_first", True)

        def hook(_module, _inputs, output):
            captured.append(output if batch_first else output.transpose(0, 1))

        handles = [blk.register_forward_hook(hook) for blk in tower.transformer.resblocks]
        try:
            final = tower.encode(text, normalize=True)
        finally:
            for h in handles:
                h.remove()
        eos_index = tower.eos_positions(text)
        rows = torch.arange(text.shape[0], device=text.device)
        # ln_final is per-token, so pooling before it equals pooling after it and is L times cheaper.
        eos = torch.stack([F.normalize(tower.project(tower.ln_final(h[rows, eos_index])), dim=-1)
                           for h in captured])
        tokens = mask = None
        if token_layers:
            tokens = {layer: tower.ln_final(captured[layer - 1]).float().cpu() for layer in token_layers}
            positions = torch.arange(text.shape[1], device=text.device)[None, :]
            mask = (real | (positions == eos_index[:, None])).cpu()
        return TextLayers(final.float().cpu(), eos.float().cpu(), eos_index.cpu(), tokens, mask)

    def pixels_to_tensor(self, pixels: np.ndarray) -> torch.Tensor:
        """uint8 [N, H, W, 3] at the model's resolution -> normalised float [N, 3, H, W]."""
        x = torch.from_numpy(np.ascontiguousarray(pixels)).permute(0, 3, 1, 2).float().div_(255.0)
        return (x - self._mean) / self._std

    def image_batch(self, images) -> torch.Tensor:
        """Images (uint8 [N, H, W, 3] or PIL) as the model's normalised input: arrays already at the
        model's resolution directly, anything else through its preprocessing (resize, crop)."""
        if isinstance(images, np.ndarray) and images.ndim == 4 and images.shape[1] == self.image_size \
                and images.shape[2] == self.image_size:
            return self.pixels_to_tensor(images)
        if isinstance(images, np.ndarray):
            images = [Image.fromarray(np.asarray(im)) for im in images]
        return torch.stack([self.preprocess(im) for im in images])

    @torch.no_grad()
    def encode_images(self, images, flip_average: bool = False, batch_size: int = 256,
                      progress: bool = False) -> torch.Tensor:
        """L2-normalised image embeddings. ``flip_average`` uses normalize((f(x) + f(flip x)) / 2),
        KTN App. B.4 eq. 20."""
        out = []
        for i in tqdm(range(0, len(images), batch_size), desc="images", disable=not progress):
            x = self.image_batch(images[i:i + batch_size]).to(self.device)
            feats = self.model.encode_image(x)
            if flip_average:
                feats = (feats + self.model.encode_image(torch.flip(x, dims=[3]))) / 2
            out.append(F.normalize(feats.float(), dim=-1).cpu())
        return self.require_finite(torch.cat(out), None, "images")


def _hugging_face_tokenizer(tokenizer):
    """The ``transformers`` tokenizer an open_clip ``HFTokenizer`` or ``SigLipTokenizer`` wraps, else None."""
    inner = getattr(tokenizer, "tokenizer", None)
    return inner if inner is not None and hasattr(inner, "pad_token_id") else None


def _siglip_clean(text: str) -> str:
    """The cleaning open_clip's ``SigLipTokenizer`` applies before encoding."""
    from open_clip.tokenizer import basic_clean, canonicalize_text
    return canonicalize_text(basic_clean(text))


def get_tokenizer(model_name: str):
    """open_clip's tokenizer for ``model_name``, project configs included (no model is built)."""
    register_project_configs()
    return open_clip.get_tokenizer(model_name)


def create_model(model_name: str, *, quick_gelu: bool = False, seed: int | None = 0,
                 device: str = "cpu", precision: str = "fp32") -> torch.nn.Module:
    """A randomly initialised open_clip model (seeded, so the same seed gives the same weights)."""
    register_project_configs()
    if seed is not None:
        torch.manual_seed(seed)
    factory_log = logging.getLogger()  # open_clip warns "initialized randomly" on the root logger
    level = factory_log.level
    factory_log.setLevel(logging.ERROR)
    try:
        return open_clip.create_model(model_name, pretrained=None, force_quick_gelu=quick_gelu,
                                      device=device, precision=precision)
    finally:
        factory_log.setLevel(level)


def load_backbone(model_name: str | None = None, pretrained: str | None = None, *,
                  checkpoint: str | os.PathLike | None = None, quick_gelu: bool | None = None,
                  device: str = "cpu", precision: str = "fp32", cache_dir: str | None = None,
                  seed: int = 0) -> Backbone:
    """Load an open_clip backbone.

    Args:
        model_name: an open_clip config (``"ViT-B-32"``, ``"ViT-B-16-SigLIP"``, ``"EVA02-B-16"``)
            or a project config (``"negbook-organism"``, ``"negbook-tiny"``). May be omitted
            when ``checkpoint`` was written by this project (its metadata names the model).
        pretrained: an open_clip pretrained tag (``"openai"``, ``"laion2b_s34b_b79k"``), a path to
            a weights file, or ``None`` for a seeded random initialisation.
        checkpoint: a local weights file; takes precedence over ``pretrained``. Every key must
            match the config, otherwise ``CheckpointMismatchError``.
        quick_gelu: force the QuickGELU activation. ``None`` decides automatically: as a tag's weights
            were trained (on for OpenAI's), or as a project checkpoint records it; a checkpoint that
            records nothing (open_clip's training format) loads with GELU unless told, and its report
            says so. A request that contradicts the tag or the checkpoint is a ``ValueError``.
        device, precision: passed to open_clip (``"fp32"``, ``"bf16"``, ``"fp16"``...).
        cache_dir: Hugging Face cache to search for tagged weights (default: ``HF_HUB_CACHE``/``HF_HOME``).
        seed: torch seed for random initialisation.

    Offline, a tag that is not cached raises ``WeightsUnavailableError`` in about a second.
    """
    register_project_configs()
    notes: list[str] = []
    if checkpoint is None and pretrained is not None and Path(str(pretrained)).is_file():
        checkpoint, pretrained = pretrained, None
    path: str | None = None
    if checkpoint is not None:
        path = str(checkpoint)
        meta = weights.read_checkpoint_metadata(path)
        if model_name is None:
            model_name = meta.get("model_name")
            if model_name is None:
                raise ValueError(f"checkpoint {path} carries no model name; pass model_name=")
        quick_gelu, decided = _checkpoint_activation(path, meta, quick_gelu, notes)
        source = f"checkpoint {path}"
    elif pretrained is not None:
        if model_name is None:
            raise ValueError("a pretrained tag needs model_name")
        quick_gelu, decided = _tag_activation(model_name, pretrained, quick_gelu, notes)
        path, _cfg = weights.resolve_pretrained(model_name, pretrained, cache_dir=cache_dir)
        source = f"pretrained tag {pretrained!r}" + (f" from {path}" if path else " (downloading)")
    else:
        if model_name is None:
            raise ValueError("load_backbone needs model_name, a pretrained tag or a checkpoint")
        source = f"random init (seed {seed})"
        decided = "as requested" if quick_gelu is not None else "the config's"
    quick_gelu = bool(quick_gelu)
    model = create_model(model_name, quick_gelu=quick_gelu, seed=seed, device=device, precision=precision)
    n_loaded = 0
    if path is not None:
        n_loaded = weights.load_state_dict_strict(model, path, model_name)
    elif pretrained is not None:  # online and not cached: let open_clip download into the HF cache
        model = open_clip.create_model(model_name, pretrained=pretrained, force_quick_gelu=quick_gelu,
                                       device=device, precision=precision, cache_dir=cache_dir)
        n_loaded = len(model.state_dict())
    # a ``*-quickgelu`` config builds QuickGELU whatever was forced: the report says what runs
    quick_gelu = quick_gelu or weights.config_has_quick_gelu(model_name)
    report = LoadReport(model_name, source, n_loaded, sum(p.numel() for p in model.parameters()),
                        quick_gelu, notes, decided)
    weights_id = (checkpoint_identity(path) if checkpoint is not None else pretrained if pretrained is not None
                  else f"random-init-seed{seed}")
    variant = ("+quickgelu" if quick_gelu else "") + ("" if precision == "fp32" else f"+{precision}")
    key = f"{model_name}{variant}/{weights_id}"
    return Backbone(model, model_name, get_tokenizer(model_name), report, device, frozen=True, key=key)


def _checkpoint_activation(path: str, meta: dict, quick_gelu: bool | None, notes: list[str]) -> tuple[bool, str]:
    """(QuickGELU?, what decided it) for a checkpoint: what it records, which a request must not
    contradict; else the request; else GELU, with a note that nothing recorded it (a fine-tune of
    OpenAI's CLIP released in open_clip's training format loads every key with either activation)."""
    if "quick_gelu" in meta:
        if quick_gelu is not None and quick_gelu != meta["quick_gelu"]:
            raise ValueError(f"checkpoint {path} was trained with quick_gelu={meta['quick_gelu']}, "
                             f"but quick_gelu={quick_gelu} was requested")
        return bool(meta["quick_gelu"]), "recorded in the checkpoint"
    if quick_gelu is not None:
        return quick_gelu, "as requested; the checkpoint records none"
    notes.append("the checkpoint records no activation and none was requested: GELU assumed; weights fine-tuned "
                 "from OpenAI's CLIP run with QuickGELU (pass quick_gelu=True)")
    return False, "assumed; the checkpoint records none"


def _tag_activation(model_name: str, tag: str, quick_gelu: bool | None, notes: list[str]) -> tuple[bool, str]:
    """(QuickGELU?, what decided it) for a pretrained tag: the activation its weights were trained with;
    a request for the other one is an error (every key loads, and every score is off)."""
    trained = weights.tag_trained_with_quick_gelu(model_name, tag)
    if quick_gelu is not None and quick_gelu != trained:
        raise ValueError(f"tag {tag!r} of {model_name} was trained with {weights.activation_name(trained)}, "
                         f"but quick_gelu={quick_gelu} was requested")
    if weights.tag_needs_quick_gelu(model_name, tag):
        notes.append(f"tag {tag!r} was trained with QuickGELU; forced it on "
                     f"(equivalent to the '{model_name}-quickgelu' config)")
    return trained, f"as tag {tag!r} was trained"


def checkpoint_identity(path: str | os.PathLike, chunk_bytes: int = 1 << 24) -> str:
    """A local weights file as a cache key: its resolved path and the SHA-256 of its bytes, read in
    chunks. The content, not the size and modification time: weights replaced in place by a copy
    that keeps both (``cp -p``) are another backbone, and must not read the old one's cached outputs."""
    resolved = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    with open(resolved, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return f"{resolved}:sha256={digest.hexdigest()}"


def save_checkpoint(model: torch.nn.Module, path: str | os.PathLike, model_name: str,
                    quick_gelu: bool = False, extra: dict | None = None) -> Path:
    """Write a checkpoint whose metadata lets ``load_backbone(checkpoint=path)`` rebuild the model."""

    blob = {"state_dict": model.state_dict(),
            "negbook": {"model_name": model_name, "quick_gelu": bool(quick_gelu), **(extra or {})}}
    return atomic_save(path, lambda tmp: torch.save(blob, tmp))


def save_training_checkpoint(model: torch.nn.Module, path: str | os.PathLike, name: str, epoch: int = 1) -> Path:
    """Write ``model`` as open_clip's training script saves a run (``{"epoch", "name", "state_dict"}``,
    keys under DistributedDataParallel's ``module.`` prefix): the form in which fine-tuned CLIPs trained
    with that script's forks (NegBench's NegFull among them) are released. Unlike ``save_checkpoint``
    it records neither the model name nor the activation; the loader must be told both."""
    blob = {"epoch": epoch, "name": name,
            "state_dict": {f"module.{key}": tensor for key, tensor in model.state_dict().items()}}
    return atomic_save(path, lambda tmp: torch.save(blob, tmp))
