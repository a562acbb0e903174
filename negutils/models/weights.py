"""Finding and loading backbone weights: local cache first, fast offline failure, strict keys.

Two traps cost open_clip users weeks, so both are errors here rather than warnings:
a checkpoint whose keys do not match the config (silently half-loaded with ``strict=False``),
and OpenAI weights run with plain GELU instead of the QuickGELU they were trained with.
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import open_clip
import torch

from ..core.offline import network_reachable, offline_requested


class WeightsUnavailableError(RuntimeError):
    """Pretrained weights are neither cached locally nor downloadable right now."""


class CheckpointMismatchError(RuntimeError):
    """A checkpoint's state-dict keys do not match the model it is loaded into."""


class CheckpointFileError(ValueError):
    """A checkpoint path that holds no weights: a folder, an empty file, or bytes no loader reads."""


# what a checkpoint path must name, for the errors that say it was something else
WEIGHTS_FILE = ("a weights file: torch.save's state dict (or {'state_dict': ...}, as open_clip's training "
                "script saves) or a .safetensors file")


class NonFiniteWeightsError(CheckpointMismatchError):
    """A checkpoint holds NaN or infinite weights (a diverged run, a corrupted file): it loads, and
    every score it gives is NaN, which an argmax would read as the first option."""


@dataclass
class LoadReport:
    """What was loaded, so a notebook can print proof that the weights arrived."""
    model_name: str
    source: str                      # "random init (seed 0)", a tag, or a file path
    n_tensors_loaded: int = 0
    n_parameters: int = 0
    quick_gelu: bool = False
    notes: list[str] = field(default_factory=list)
    activation_source: str = ""      # what decided the activation: the checkpoint, a tag, the caller

    def __str__(self) -> str:
        decided = f" ({self.activation_source})" if self.activation_source else ""
        lines = [f"{self.model_name}: {self.source}",
                 f"  {self.n_tensors_loaded} tensors loaded, {self.n_parameters / 1e6:.2f}M parameters, "
                 f"activation {activation_name(self.quick_gelu)}{decided}"]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def hub_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The Hugging Face hub cache, resolved from the environment at call time."""
    if cache_dir:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def _cached_hub_file(hf_hub: str, cache_dir: Path) -> tuple[str | None, list[str]]:
    from huggingface_hub import try_to_load_from_cache  # via open_clip; only resolving a tag needs it

    repo_id, filename = os.path.split(hf_hub)
    filename = filename or "open_clip_pytorch_model.bin"
    candidates = [filename]
    if filename.endswith((".bin", ".pth")):
        candidates.insert(0, filename[:-4] + ".safetensors")
    if filename == "open_clip_pytorch_model.bin":
        candidates.insert(0, "open_clip_model.safetensors")
    looked = []
    for name in candidates:
        looked.append(f"{repo_id}/{name}")
        hit = try_to_load_from_cache(repo_id, name, cache_dir=str(cache_dir))
        if isinstance(hit, str) and Path(hit).is_file():
            return hit, looked
    return None, looked


def resolve_pretrained(model_name: str, tag: str,
                       cache_dir: str | os.PathLike | None = None) -> tuple[str | None, dict]:
    """Map ``(model_name, tag)`` to a cached weights file, or ``None`` when it must be downloaded.

    Raises ``WeightsUnavailableError`` within about a second when the file is not cached and
    the network is off (``HF_HUB_OFFLINE=1``) or unreachable, naming how to supply the weights.
    """
    cfg = open_clip.get_pretrained_cfg(model_name, tag)
    if not cfg:
        tags = open_clip.list_pretrained_tags_by_model(model_name)
        raise ValueError(f"open_clip has no pretrained tag {tag!r} for model {model_name!r}; "
                         f"known tags: {tags or 'none'} (or pass checkpoint=/path/to/weights)")
    hub_dir = hub_cache_dir(cache_dir)
    looked: list[str] = []
    if cfg.get("hf_hub"):
        hit, looked = _cached_hub_file(cfg["hf_hub"], hub_dir)
        if hit:
            return hit, cfg
    if cfg.get("url"):
        url_cache = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "clip"
        target = url_cache / os.path.basename(cfg["url"])
        looked.append(str(target))
        if target.is_file():
            return str(target), cfg
    offline = offline_requested()
    if offline or not network_reachable():
        why = "HF_HUB_OFFLINE/NEGBOOK_OFFLINE is set" if offline else "the network is unreachable"
        raise WeightsUnavailableError(
            f"pretrained weights for model {model_name!r}, tag {tag!r} are not in the local cache "
            f"({hub_dir}) and {why}. Looked for: {', '.join(looked)}.\n"
            "To supply them: (1) on a machine with network run "
            f"`python -c \"import open_clip; open_clip.create_model('{model_name}', pretrained='{tag}')\"` "
            "and copy its Hugging Face cache here (point HF_HOME or HF_HUB_CACHE at it; keep HF_HUB_OFFLINE=1); "
            "or (2) pass a local file: load_backbone(..., checkpoint='/path/to/open_clip_model.safetensors'), "
            "in a notebook `-p checkpoint /path/...` to papermill.")
    return None, cfg


def activation_name(quick_gelu: bool) -> str:
    return "QuickGELU" if quick_gelu else "GELU"


def config_has_quick_gelu(model_name: str) -> bool:
    """Whether the config itself builds QuickGELU (``*-quickgelu`` configs): no flag turns it off."""
    return model_name.endswith("-quickgelu") or bool(
        (open_clip.get_model_config(model_name) or {}).get("quick_gelu", False))


def tag_trained_with_quick_gelu(model_name: str, tag: str) -> bool:
    """The activation the tag's weights were trained with (its pretrained config, or the model config's)."""
    cfg = open_clip.get_pretrained_cfg(model_name, tag) or {}
    return bool(cfg.get("quick_gelu", False)) or config_has_quick_gelu(model_name)


ACTIVATIONS = {"gelu": False, "quickgelu": True}        # a command line's --activation -> quick_gelu


def command_line_activation(model_name: str, pretrained: str | None, checkpoint: str | os.PathLike | None,
                            activation: str | None) -> bool | None:
    """``load_backbone``'s ``quick_gelu`` for a command line's weights (``negbook eval``, the feature
    extraction runner): None where the ``pretrained`` tag or a seeded random init decides; a checkpoint's
    recorded activation (or its config's built-in QuickGELU); else ``activation`` (--activation), which a
    checkpoint that records none requires: either activation loads every key, and the wrong one scores
    wrongly without an error. A --activation that contradicts the weights is an error."""
    requested = None if activation is None else ACTIVATIONS[activation]
    if pretrained is not None:
        trained = tag_trained_with_quick_gelu(model_name, pretrained)
        return None if requested is None else _agreed(requested, trained, f"tag {pretrained!r} of {model_name}")
    if checkpoint is None:
        return requested
    recorded = read_checkpoint_metadata(checkpoint).get("quick_gelu")
    if recorded is not None:
        return _agreed(requested, bool(recorded), f"--checkpoint {checkpoint}")
    if config_has_quick_gelu(model_name):
        return _agreed(requested, True, f"config {model_name}")
    if requested is None:
        raise ValueError(f"--checkpoint {checkpoint} records no activation (open_clip's training format does "
                         "not): pass --activation quickgelu if its weights descend from OpenAI's CLIP (a fine-tune "
                         "of --pretrained openai, as NegBench's NegFull is), --activation gelu if they were trained "
                         "with plain GELU (e.g. open_clip's LAION runs); both load every key, and the wrong one "
                         "gives wrong scores without an error")
    return requested


def _agreed(requested: bool | None, trained: bool, what: str) -> bool:
    """``trained``, unless --activation asked for the other activation."""
    if requested is not None and requested != trained:
        raise ValueError(f"--activation {'quickgelu' if requested else 'gelu'}: {what} was trained with "
                         f"{activation_name(trained)}; drop --activation, it is decided there")
    return trained


def tag_needs_quick_gelu(model_name: str, tag: str) -> bool:
    """True when weights were trained with QuickGELU but the config does not enable it."""
    return tag_trained_with_quick_gelu(model_name, tag) and not config_has_quick_gelu(model_name)


def require_weights_file(path: str | os.PathLike) -> Path:
    """``path``, or an error saying what it is instead of a weights file (missing, a folder, empty)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix in (".pt", ".pth", ".bin", ".safetensors"))
        hint = f"; it holds {', '.join(inside[:3])}" if inside else ""
        raise CheckpointFileError(f"checkpoint {path} is a folder; expected {WEIGHTS_FILE}{hint}")
    if path.stat().st_size == 0:
        raise CheckpointFileError(f"checkpoint {path} is empty (0 bytes); expected {WEIGHTS_FILE}")
    return path


def read_checkpoint_metadata(path: str | os.PathLike) -> dict:
    """The ``negbook`` metadata block of a checkpoint written by this project ({} otherwise). A path
    that is no weights file (a folder, an empty file, text) is a ``CheckpointFileError`` naming it."""
    path = require_weights_file(path)
    if path.suffix in (".npz", ".npy"):
        return {}
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open     # via open_clip; reads the header only

            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
            return {}
        # memory-mapped where torch can (its zip format): the tensors are read once, by the loader
        blob = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as err:       # any reader's failure on these bytes means the same: no weights here
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointFileError(f"checkpoint {path} cannot be read ({reason}); expected {WEIGHTS_FILE}") from err
    if not isinstance(blob, dict):
        raise CheckpointFileError(f"checkpoint {path} holds a {type(blob).__name__}; expected {WEIGHTS_FILE}")
    return blob.get("negbook", {})


def load_state_dict_strict(model: torch.nn.Module, path: str | os.PathLike, model_name: str) -> int:
    """Load every tensor of ``path`` into ``model``; any missing or unexpected key is an error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        incompatible = open_clip.load_checkpoint(model, str(path), strict=False)
    except (RuntimeError, AssertionError) as err:  # shape mismatches surface here, before key checks
        raise CheckpointMismatchError(f"checkpoint {path} does not fit model config {model_name!r}: "
                                      f"{str(err).splitlines()[0] or type(err).__name__}") from err
    missing = list(getattr(incompatible, "missing_keys", []))
    unexpected = list(getattr(incompatible, "unexpected_keys", []))
    if missing or unexpected:
        raise CheckpointMismatchError(
            f"checkpoint {path} does not match model config {model_name!r}: "
            f"{len(missing)} missing keys {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"{len(unexpected)} unexpected keys {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}. "
            "Pass the model name the checkpoint was trained with.")
    state = model.state_dict()
    bad = [name for name, tensor in state.items() if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        raise NonFiniteWeightsError(f"checkpoint {path} has non-finite values (NaN or inf) in {len(bad)} tensors: "
                                      f"{bad[:5]}{' ...' if len(bad) > 5 else ''}; it cannot score anything")
    return len(state)
