"""NegFull: fine-tune the whole CLIP on negation data (NegBench sec. 4), the "encoder fine-tuning"
row of every table.

    L = alpha * L_CLIP + (1 - alpha) * L_MCQ                                  (NegBench eq. 2)

L_CLIP is the contrastive loss the backbone was pretrained with, over the batch's images and one
positive caption per image: under the ``negbench`` protocol an affirmative or NegCap caption (true
negations), so alpha = 1 is NegBench's NegCap fine-tuning, not plain CC12M fine-tuning. For a CLIP
it is the symmetric softmax InfoNCE, and a protocol with hard negatives adds them to the image ->
text denominator. A model with a ``logit_bias`` (a SigLIP: its config sets ``init_logit_bias``) was
trained with the sigmoid loss, so it is fine-tuned with open_clip's ``SigLipLoss`` and its bias is
trained too; hard negatives are then further negative pairs of every image, as open_clip treats
another device's captions. L_MCQ is the 4-way cross-entropy of each image over its MCQ's options
(NegMCQ, or App. 0.J's counterpart question), the same for both: the bias is common to the four
options and cancels. alpha is chosen by the accuracy on the held-out images' NegMCQ, never on a
benchmark.
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from open_clip.loss import SigLipLoss
from tqdm.auto import tqdm

from ..core.cache import (adopt_unrecorded, atomic_write_json, config_hash, file_record, record_path,
                          recorded_problems)
from ..core.metrics import choice_credit
from ..models.backbone import Backbone, load_backbone, save_checkpoint
from ..models.features import captions_hash
from ..models.pretrain import attention_kernel
from ..models.weights import read_checkpoint_metadata
from .training_data import (
    NegationData,
    contrastive_loss,
    mcq_loss,
    protocol_view,
    with_protocol,
)


@dataclass(frozen=True)
class NegFullConfig:
    alpha: float = 0.5
    protocol: str = "negbench"
    images: int | None = None      # training images used (None: all); one epoch
    batch_size: int = 128
    lr: float = 1e-5
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    bf16: bool = True
    attention: str = "math"        # on CPU, as pretraining's (``attention_kernel``); "default": PyTorch's flash kernel
    seed: int = 0


def contrastive_form(model: torch.nn.Module) -> str:
    """"sigmoid" for a model pretrained with SigLIP's loss, "softmax" for CLIP's: open_clip builds a
    ``logit_bias`` exactly for the configs trained with the sigmoid loss (``init_logit_bias``)."""
    return "sigmoid" if getattr(model, "logit_bias", None) is not None else "softmax"


def sigmoid_loss(images: torch.Tensor, texts: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """open_clip's ``SigLipLoss`` over B unit-norm images and their B positive captions, which come
    first in ``texts``; each further row (a hard negative) is a negative pair of every image, summed
    and divided by B as ``SigLipLoss`` adds another device's captions (its ``negative_only`` term)."""
    n = len(images)
    siglip = SigLipLoss()
    loss = siglip(images, texts[:n], scale, bias)
    if len(texts) > n:
        loss = loss - F.logsigmoid(-siglip.get_logits(images, texts[n:], scale, bias)).sum() / n
    return loss


def negfull_loss(backbone: Backbone, images: torch.Tensor, text: torch.Tensor, batch: dict, alpha: float):
    """The loss of one batch: ``text`` tokenises the batch's distinct captions, ``batch`` is
    ``ProtocolView.batch``'s layout. L_CLIP takes the model's own form (``contrastive_form``). A
    term with weight 0 is not computed."""
    model = backbone.model
    img = F.normalize(model.encode_image(images), dim=-1).float()
    parts = (([batch["positives"], batch["negatives"]] if alpha > 0 else []) +
             ([batch["mcq"].ravel()] if alpha < 1 else []))
    needed = np.unique(np.concatenate(parts)).astype(np.int64)
    embedded = torch.zeros(len(text), img.shape[1])
    embedded[needed] = F.normalize(backbone.text_tower.encode_by_length(text[needed]), dim=-1).float()
    scale = model.logit_scale.exp()
    zero = torch.zeros((), requires_grad=False)
    # index_select, not advanced indexing: its backward adds repeated rows in a fixed order whatever the threads
    rows = torch.from_numpy(np.concatenate([batch["positives"], batch["negatives"]]).astype(np.int64))
    if alpha == 0:
        loss_clip = zero
    elif contrastive_form(model) == "sigmoid":
        loss_clip = sigmoid_loss(img, embedded.index_select(0, rows), scale, model.logit_bias)
    else:
        loss_clip = contrastive_loss(img, embedded.index_select(0, rows), scale)
    if alpha < 1 and len(batch["mcq_rows"]):
        opt = torch.from_numpy(batch["mcq"].astype(np.int64))
        image = img.index_select(0, torch.from_numpy(batch["mcq_rows"].astype(np.int64)))[:, None, :]
        scores = (image * embedded.index_select(0, opt.reshape(-1)).reshape(*opt.shape, -1)).sum(-1)
        loss_mcq = mcq_loss(scores, batch["mcq_correct"], scale)
    else:
        loss_mcq = zero
    return alpha * loss_clip + (1 - alpha) * loss_mcq, loss_clip, loss_mcq


def finetune_negfull(backbone: Backbone, data: NegationData, config: NegFullConfig,
                     progress: bool = True) -> tuple[Backbone, pd.DataFrame]:
    """A fine-tuned copy of ``backbone`` (the original is untouched) and the per-step losses."""
    if not 0.0 <= config.alpha <= 1.0:
        raise ValueError(f"NegFull alpha must be in [0, 1], got {config.alpha}")
    view = protocol_view(data, config.protocol)
    n_images = len(view.images) if config.images is None else min(config.images, len(view.images))
    least = max(3, config.batch_size)
    if n_images < least:
        raise ValueError(f"NegFull needs at least {least} training images (one batch of batch_size="
                         f"{config.batch_size}, and never fewer than 3), got {n_images}")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = copy.deepcopy(backbone.model)
    form = contrastive_form(model)
    tuned = Backbone(model, backbone.model_name, backbone.tokenizer, backbone.report, backbone.device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                  foreach=True)      # the for-loop's values in less time (bench/optimizer_step.py)
    steps = n_images // config.batch_size
    order = rng.permutation(len(view.images))[:n_images]
    history = []
    bar = tqdm(total=steps, desc=f"NegFull alpha={config.alpha:g} [{config.protocol}, {form}]", disable=not progress)
    for step in range(steps):
        rows = order[step * config.batch_size:(step + 1) * config.batch_size]
        for group in optimizer.param_groups:
            group["lr"] = config.lr * 0.5 * (1 + math.cos(math.pi * step / max(1, steps)))
        batch = view.batch(rows, rng)
        # one batch read at a time (a COCO split never fits in memory), through the tower's preprocessing
        images = tuned.image_batch(data.split.images(view.images[rows]))
        text = tuned.tokenize([data.captions[c] for c in batch["captions"]])
        with attention_kernel(config.attention, tuned.device), \
                torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16 and tuned.device.type == "cpu"):
            loss, loss_clip, loss_mcq = negfull_loss(tuned, images, text, batch, config.alpha)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        history.append({"alpha": config.alpha, "protocol": config.protocol, "step": step + 1, "loss": loss.item(),
                        "loss CLIP": loss_clip.item(), "loss MCQ": loss_mcq.item(), "contrastive": form})
        bar.update()
    bar.close()
    model.eval()
    return tuned, pd.DataFrame(history)


@torch.no_grad()
def held_out_credit(backbone: Backbone, data: NegationData) -> np.ndarray:
    """Per held-out NegMCQ question, the credit of a (fine-tuned) backbone's cosine scores (1 right, 0
    wrong, 1/k on a k-way tie)."""
    mcq = data.held_out_mcq()
    images = backbone.encode_images(data.split.images(mcq["image_index"].to_numpy()), progress=False)
    options = mcq[[f"option_{k}" for k in range(4)]].to_numpy()
    text = backbone.encode_text([data.captions[c] for c in options.ravel()]).reshape(len(mcq), 4, -1)
    return choice_credit((images[:, None, :] * text).sum(-1).cpu().numpy(), mcq["correct"].to_numpy())


def held_out_accuracy(backbone: Backbone, data: NegationData) -> float:
    """4-way accuracy of a (fine-tuned) backbone on the held-out images' NegMCQ (``held_out_credit``)."""
    credit = held_out_credit(backbone, data)
    return float(credit.mean()) if len(credit) else float("nan")


def ensure_negfull(backbone: Backbone, base_key: str, data: NegationData, config: NegFullConfig,
                   artifacts_dir: str | Path, progress: bool = True) -> tuple[Backbone, float]:
    """The fine-tuned model for (base model, data, config), trained once and reused by its hash,
    with its held-out NegMCQ accuracy (stored in the checkpoint)."""
    key = config_hash({"base": base_key, "captions": captions_hash(data.captions),
                       "train": data.train_images.tolist(), "config": asdict(config)})
    path = Path(artifacts_dir) / "negfull" / f"negfull-{key}.pt"
    adopt_unrecorded(path, read_checkpoint_metadata)         # fine-tuned before records were kept
    problems = recorded_problems(path)
    if problems:
        if path.exists():
            warnings.warn(f"NegFull checkpoint {path} is not whole ({problems[0]}); fine-tuning it again")
        tuned, history = finetune_negfull(backbone, data, config, progress)
        accuracy = held_out_accuracy(tuned, data)
        save_checkpoint(tuned.model, path, backbone.model_name, quick_gelu=backbone.report.quick_gelu,
                        extra={"negfull_config": asdict(config), "final_loss": float(history["loss"].iloc[-1]),
                               "contrastive": str(history["contrastive"].iloc[0]),
                               "held_out_mcq_accuracy": accuracy})
        atomic_write_json(record_path(path), file_record(path))
    tuned = load_backbone(backbone.model_name, checkpoint=path, device=str(backbone.device))
    return tuned, float(read_checkpoint_metadata(path)["held_out_mcq_accuracy"])


def choose_alpha(selection: pd.DataFrame) -> pd.DataFrame:
    """``selection`` with ``chosen`` marking, per protocol, the alpha with the best held-out NegMCQ
    accuracy (the first listed on ties)."""
    selection = selection.copy()
    selection["chosen"] = False
    best = selection.groupby("protocol", sort=False)["held-out MCQ accuracy"].idxmax()
    selection.loc[best.to_numpy(), "chosen"] = True
    return selection


def fit_protocols(backbone: Backbone, base_key: str, data: NegationData, settings, artifacts_dir,
                  progress: bool = True, judge=None) -> tuple[dict, pd.DataFrame]:
    """NegFull for every protocol of ``settings.protocols``: under those in
    ``settings.negfull_alpha_protocols`` every alpha of ``settings.negfull_alphas``, the alpha
    chosen on held-out NegMCQ (``judge(model)``'s questions, the decision set of ``methods.decision``,
    or without one the negtrain split's held-out images); the other protocols reuse the first
    sweeping protocol's choice, so nothing compares them and their rows keep the negtrain split's
    held-out accuracy (``questions`` says which). Returns the models by (protocol, alpha) and one
    row per run (protocol, alpha, method, held-out MCQ accuracy, questions, chosen)."""
    def config(protocol, alpha):
        return NegFullConfig(alpha=alpha, protocol=protocol, images=settings.negfull_images, lr=settings.negfull_lr,
                             batch_size=settings.negfull_batch_size)

    models, rows = {}, []

    def fit(protocol, alpha, compared: bool = False):
        models[(protocol, alpha)], accuracy = ensure_negfull(backbone, base_key, data, config(protocol, alpha),
                                                             artifacts_dir, progress)
        judged = compared and judge is not None
        rows.append({"protocol": protocol, "alpha": alpha,
                     "method": with_protocol(f"NegFull alpha={alpha:g}", protocol),
                     "held-out MCQ accuracy": judge(models[(protocol, alpha)]) if judged else accuracy,
                     "questions": judge.questions if judged else len(data.held_out_mcq())})

    sweeping = [p for p in settings.protocols if p in settings.negfull_alpha_protocols]
    for protocol in sweeping:
        for alpha in settings.negfull_alphas:
            fit(protocol, alpha, compared=True)
    swept = choose_alpha(pd.DataFrame(rows))
    alpha = float(swept[(swept["protocol"] == sweeping[0]) & swept["chosen"]]["alpha"].iloc[0])
    for protocol in settings.protocols:
        if protocol not in sweeping:
            fit(protocol, alpha)
    return models, choose_alpha(pd.DataFrame(rows))
