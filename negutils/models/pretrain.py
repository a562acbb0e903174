"""Pretrain a small open_clip model on the embedded world's affirmative-heavy alt text.

This is the condition the papers blame for negation blindness (almost no negation in the
captions), reproduced in a model whose every training caption we know.
"""
from __future__ import annotations

import json
import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import open_clip
import pandas as pd
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm.auto import tqdm

from ..core.cache import (adopt_unrecorded, atomic_write_json, config_hash, file_record, record_path,
                          recorded_problems, save_recorded)
from ..world.coco import CocoSplit, load_split
from .backbone import (
    Backbone,
    create_model,
    get_tokenizer,
    load_backbone,
    save_checkpoint,
)
from .retrieval import check_split_rows, retrieval_queries, retrieval_recall
from .weights import LoadReport

# Bump when the training loop changes what it computes, float roundings included (as running the text
# tower over each batch's first L positions does, ``_TextTower.encode``), so cached checkpoints are retrained.
PRETRAIN_VERSION = 2
ATTENTION_KERNELS = ("math", "default")      # ``attention_kernel``'s choices
OPTIMIZERS = ("fused", "foreach")             # ``make_optimizer``'s AdamW implementations


@dataclass(frozen=True)
class PretrainConfig:
    model_name: str = "negbook-organism"
    samples: int = 60_000            # image-caption pairs seen; steps = samples // batch_size
    batch_size: int = 128            # more updates beat more negatives at a 10-minute budget
    lr: float = 3e-4                 # 5e-4 spiked and collapsed to loss = log(batch) on this organism
    weight_decay: float = 0.1
    warmup_fraction: float = 0.1
    grad_clip: float | None = 1.0    # global-norm clipping: keeps higher learning rates from spiking
    init_logit_scale: float | None = None  # None keeps open_clip's log(1/0.07)
    bf16: bool = True                # CPU autocast to bfloat16; False trains in exact float32
    # How a step runs (bench/pretrain_step.py times each way): attention by PyTorch's math kernel, as its
    # CPU flash kernel's backward is slow on captions of ~24 tokens, and the fused AdamW. Both round
    # differently, so both are in the key; "default" and "foreach" give the weights of PRETRAIN_VERSION 2.
    attention: str = "math"          # "math" | "default" (PyTorch's choice: its flash kernel on CPU)
    optimizer: str = "fused"         # "fused" | "foreach" (the values of PyTorch's for-loop default)
    evaluations: int = 6             # held-out checkpoints on the val split, for the convergence curve
    # weights saved at this many evenly spaced steps before the last (step 0 included), for chapter 02's
    # LCD through pretraining (``snapshot_checkpoints``); they never change the training itself
    snapshots: int = 0
    eval_images: int = 500
    seed: int = 0

    def __post_init__(self):
        for field, value, choices in (("attention", self.attention, ATTENTION_KERNELS),
                                      ("optimizer", self.optimizer, OPTIMIZERS)):
            if value not in choices:
                raise ValueError(f"PretrainConfig.{field} must be {' or '.join(map(repr, choices))}, not {value!r}")

    @property
    def steps(self) -> int:
        return max(1, self.samples // self.batch_size)


@dataclass
class PretrainResult:
    checkpoint: Path
    history: pd.DataFrame            # one row per step: loss, lr, logit scale, elapsed seconds
    evaluations: pd.DataFrame        # held-out R@1/R@5 at several points of training
    seconds: float
    samples_per_second: float


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    # open_clip's rule: no decay on gains, biases, logit scale and embeddings.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.ndim < 2 or "bn" in name or "ln" in name or "bias" in name or "logit_scale" in name \
                or "embedding" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def _lr_at(step: int, config: PretrainConfig) -> float:
    warmup = max(1, int(config.warmup_fraction * config.steps))
    if step < warmup:
        return config.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, config.steps - warmup)
    return config.lr * 0.5 * (1 + math.cos(math.pi * progress))


def _batches(split: CocoSplit, config: PretrainConfig):
    """(image indices, captions) per step: epochs of shuffled images, one random caption each."""
    rng = np.random.default_rng([config.seed, 1])
    step = 0
    while True:
        order = rng.permutation(len(split))
        for start in range(0, len(order) - config.batch_size + 1, config.batch_size):
            idx = np.sort(order[start:start + config.batch_size])
            caps = [split.captions[i][int(rng.integers(len(split.captions[i])))]["caption"] for i in idx]
            yield idx, caps
            step += 1
            if step >= config.steps:
                return


def backbone_retrieval_recall(backbone: Backbone, split: CocoSplit, n_images: int | None = None,
                              image_embeddings: torch.Tensor | None = None) -> dict:
    """Zero-shot text->image and image->text recall of a bare backbone on the split's affirmative
    full captions, the gallery being the queried images (what pretraining is checked with; a
    scorer's benchmark retrieval is ``benchmarks.evaluate.evaluate_retrieval``).
    ``image_embeddings``: every image of the split, by index, already encoded (the frozen
    backbone's shared ones) instead of encoding the queried images here."""
    idx, queries = retrieval_queries(split, n_images)
    check_split_rows(image_embeddings, split)
    img = backbone.encode_images(split.images(idx)) if image_embeddings is None else image_embeddings[idx]
    txt = backbone.encode_text(queries)
    return retrieval_recall(txt @ img.T)


def make_optimizer(model: torch.nn.Module, config: PretrainConfig) -> torch.optim.AdamW:
    """AdamW with open_clip's betas and eps, by ``config.optimizer``'s implementation: on CPU PyTorch
    defaults to its for-loop one, which foreach matches bit for bit in less time; fused takes less still
    (bench/optimizer_step.py) and rounds differently."""
    return torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.98), eps=1e-6,
                             **{config.optimizer: True})


def attention_kernel(attention: str, device: torch.device | str = "cpu"):
    """The context a CPU training step's attention runs in: "math", PyTorch's plain kernel (softmax of
    the product, autograd through it), or "default", what PyTorch picks (on CPU its flash kernel, whose
    backward is slow on the organism's ~24-token captions: bench/pretrain_step.py). Off the CPU PyTorch
    always picks (its fused GPU kernels are what a GPU run wants), and inference never enters here: there
    the flash kernel is as fast as the math one."""
    if attention not in ATTENTION_KERNELS:
        raise ValueError(f"attention must be {' or '.join(map(repr, ATTENTION_KERNELS))}, not {attention!r}")
    if attention == "math" and torch.device(device).type == "cpu":
        return sdpa_kernel(SDPBackend.MATH)
    return nullcontext()


def training_step(backbone: Backbone, optimizer: torch.optim.Optimizer, loss_fn: torch.nn.Module,
                  images: torch.Tensor, text: torch.Tensor, config: PretrainConfig) -> torch.Tensor:
    """One step of CLIP's contrastive loss on a batch of normalised images and tokenised captions."""
    model = backbone.model
    with attention_kernel(config.attention), torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
        img = F.normalize(model.encode_image(images), dim=-1)
        # the positions after every caption's EOS reach nothing under the causal mask, and a
        # 32-token context holds captions of at most ~24 here: trimmed, a step computes less
        txt = F.normalize(backbone.text_tower.encode(text), dim=-1)
        loss = loss_fn(img.float(), txt.float(), model.logit_scale.exp())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    with torch.no_grad():  # CLIP clamps the temperature at 100
        model.logit_scale.clamp_(0, math.log(100))
    return loss


def pretrain(split: CocoSplit, config: PretrainConfig, out_path: str | Path, val: CocoSplit | None = None,
             progress: bool = True) -> PretrainResult:
    """Train ``config.model_name`` from scratch with the CLIP contrastive loss; write ``out_path``."""
    if len(split) < config.batch_size:
        raise ValueError(f"split {split.name!r} has {len(split)} images, fewer than batch_size={config.batch_size}")
    torch.manual_seed(config.seed)
    model = create_model(config.model_name, seed=config.seed)
    if config.init_logit_scale is not None:
        with torch.no_grad():
            model.logit_scale.fill_(math.log(config.init_logit_scale))
    tokenizer = get_tokenizer(config.model_name)
    backbone = Backbone(model, config.model_name, tokenizer,  # shares the weights being trained
                        report=LoadReport(config.model_name, "in training"))
    optimizer = make_optimizer(model, config)
    loss_fn = open_clip.ClipLoss()
    eval_steps = set(np.linspace(0, config.steps, config.evaluations + 1).round().astype(int).tolist()) \
        if config.evaluations else set()
    history, evaluations = [], []
    t0 = time.perf_counter()
    eval_seconds = 0.0

    def run_eval(step: int) -> None:
        nonlocal eval_seconds
        if val is None:
            return
        t = time.perf_counter()
        model.eval()
        evaluations.append({"step": step, "samples": step * config.batch_size,
                            **backbone_retrieval_recall(backbone, val, config.eval_images)})
        model.train()
        eval_seconds += time.perf_counter() - t

    snapshot_steps = set(np.linspace(0, config.steps, config.snapshots + 1).round().astype(int)[:-1].tolist()) \
        if config.snapshots else set()
    out_path = Path(out_path)

    def snapshot(step: int) -> None:
        if step in snapshot_steps:
            save_checkpoint(model, snapshot_dir(out_path) / f"step-{step:06d}.pt", config.model_name,
                            extra={"pretrain_config": asdict(config), "step": step})

    if 0 in eval_steps:
        run_eval(0)
    snapshot(0)
    model.train()
    bar = tqdm(_batches(split, config), total=config.steps, desc="pretrain", disable=not progress)
    for step, (idx, caps) in enumerate(bar):
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        loss = training_step(backbone, optimizer, loss_fn, backbone.image_batch(split.images(idx)), tokenizer(caps),
                             config)
        history.append({"step": step + 1, "samples": (step + 1) * config.batch_size, "loss": loss.item(),
                        "lr": optimizer.param_groups[0]["lr"], "logit_scale": model.logit_scale.detach().exp().item(),
                        "seconds": time.perf_counter() - t0 - eval_seconds})
        bar.set_postfix(loss=f"{history[-1]['loss']:.3f}")
        if step + 1 in eval_steps:
            run_eval(step + 1)
        snapshot(step + 1)
    model.eval()
    train_seconds = time.perf_counter() - t0 - eval_seconds
    save_checkpoint(model, out_path, config.model_name, extra={"pretrain_config": asdict(config)})
    hist = pd.DataFrame(history)
    evals = pd.DataFrame(evaluations)
    return PretrainResult(out_path, hist, evals, train_seconds, config.steps * config.batch_size / train_seconds)


def ensure_pretrained(world_root: str | Path, config: PretrainConfig, artifacts_dir: str | Path,
                      progress: bool = True, split: CocoSplit | None = None,
                      key_extra: dict | None = None) -> PretrainResult:
    """The pretrained organism for (world, config), trained once and reused by its hash key.
    ``split`` replaces the world's pretrain split (e.g. recaptioned); ``key_extra`` says how, and
    joins the key."""
    world_root = Path(world_root)
    world_key = json.loads((world_root / "world.json").read_text())["key"]
    if split is not None and not key_extra:
        raise ValueError("a replacement pretrain split needs key_extra saying what differs, or the cache would alias")
    payload = {"world": world_key, "pretrain": config, "version": PRETRAIN_VERSION}
    if key_extra:
        payload["captions"] = key_extra
    key = config_hash(payload)
    out_dir = Path(artifacts_dir) / f"backbone-{key}"
    ckpt, hist_csv, eval_csv, summary_json = (out_dir / "model.pt", out_dir / "history.csv",
                                              out_dir / "evaluations.csv", out_dir / "summary.json")
    if summary_json.exists():
        adopt_unrecorded(ckpt, lambda p: torch.load(p, map_location="cpu", weights_only=True))   # runs from before
        adopt_unrecorded(hist_csv, pd.read_csv)                                                   # records were kept
        adopt_unrecorded(eval_csv, pd.read_csv)
        problems = [q for f in (ckpt, hist_csv, eval_csv) for q in recorded_problems(f)]
        if not problems:
            summary = json.loads(summary_json.read_text())
            return PretrainResult(ckpt, pd.read_csv(hist_csv), pd.read_csv(eval_csv), summary["seconds"],
                                  summary["samples_per_second"])
        warnings.warn(f"pretrained organism {out_dir} is not whole ({problems[0]}); pretraining it again")
    result = pretrain(split or load_split(world_root / "pretrain"), config, ckpt, val=load_split(world_root / "val"),
                      progress=progress)
    atomic_write_json(record_path(ckpt), file_record(ckpt))
    save_recorded(hist_csv, lambda p: result.history.to_csv(p, index=False))
    save_recorded(eval_csv, lambda p: result.evaluations.to_csv(p, index=False))
    # The summary is written last: its presence marks a complete, reusable result.
    atomic_write_json(summary_json, {"key": key, "world": world_key, "config": config,
                                     "seconds": result.seconds, "samples_per_second": result.samples_per_second})
    return result


def snapshot_dir(checkpoint: str | Path) -> Path:
    return Path(checkpoint).parent / "snapshots"


def snapshot_checkpoints(result: PretrainResult) -> dict[int, Path]:
    """{step: checkpoint} of a pretraining run's snapshots (``PretrainConfig.snapshots``) and its final
    weights, in step order; empty when it saved none."""
    folder = snapshot_dir(result.checkpoint)
    found = {int(p.stem.split("-")[1]): p for p in sorted(folder.glob("step-*.pt"))} if folder.is_dir() else {}
    if not found:
        return {}
    final_step = int(result.history["step"].max()) if len(result.history) else 0
    return {**found, final_step: Path(result.checkpoint)}


def load_pretrained(result: PretrainResult) -> Backbone:
    return load_backbone(checkpoint=result.checkpoint)
