"""The frozen-feature cache PeakPatch trains on (App. 0.J, "Feature pre-extraction").

Per caption, everything the ECN and SCN read, from one tapped pass of the frozen text tower:

    final    [d]       f_T: layer-L EOS, projected and L2-normalised
    proj_lp  [d]       f^{l_p}_T: layer-l_p EOS, projected and L2-normalised (the SCN's peak input)
    eos_lp   [w]       h^{l_p}_EOS after ln_final, not projected (ECN input)
    eos_la   [w]       h^{l_a}_EOS after ln_final, not projected (ECN input)
    tokens   [n_i, w]  the layer-l_p token sequence after ln_final, *real tokens only* (ragged)

stored as float16 ``.npy`` files that load memory-mapped. The ragged token store keeps only the
n_i real tokens of caption i (SOT ... EOT) in one [sum n_i, w] array plus an offsets array, so a
12-token caption costs 12 rows instead of the 77 of a dense [N, 77, w] tensor.

Extraction shards over processes with ``torch.distributed``: rank r of W encodes the r-th
contiguous block of captions and writes ``shard-r``; rank 0 writes ``index.json`` last, after a
barrier, so a reader either sees a complete cache or none. Launch with

    torchrun --nproc_per_node=2 -m negutils.models.features --help

(gloo on CPU, nccl on GPUs); a plain process is rank 0 of 1. The cache directory is keyed by a
hash of (backbone, layers, captions), so changing any of them recomputes instead of reusing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from ..core.cache import (array_record, atomic_save, atomic_write_json, config_hash, record_problems,
                          recorded_problems, save_recorded)
from .backbone import load_backbone
from .weights import ACTIVATIONS, command_line_activation

FIELDS = ("final", "proj_lp", "eos_lp", "eos_la")
FORMAT_VERSION = 2


@dataclass(frozen=True)
class FeatureKey:
    backbone: str        # model name + weights label, e.g. "negbook-organism:<run hash>"
    l_p: int
    l_a: int
    captions_hash: str

    @property
    def digest(self) -> str:
        return config_hash({"version": FORMAT_VERSION, "backbone": self.backbone, "l_p": self.l_p,
                            "l_a": self.l_a, "captions": self.captions_hash})


def captions_hash(captions: Sequence[str]) -> str:
    return config_hash(list(captions), length=16)


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_bounds(n: int, world: int, align: int = 1) -> list[tuple[int, int]]:
    """Contiguous [start, stop) blocks whose boundaries fall on multiples of ``align`` (the batch
    size), so every rank encodes exactly the batches a single process would: same padding, same
    kernels, bit-identical features."""
    batches = -(-n // align)
    edges = np.minimum(np.linspace(0, batches, world + 1).round().astype(int) * align, n)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _encode_block(backbone, captions: list[str], layer_pairs: list[tuple[int, int]], batch_size: int,
                  progress: bool) -> list[dict]:
    """One tapped pass over ``captions`` feeding the arrays of every (l_p, l_a) pair."""
    width, dim = int(backbone.text_tower.transformer.width), backbone.embed_dim
    if not captions:       # a rank with no batches still writes (zero-row) shards
        empty = {f: np.zeros((0, dim if f in ("final", "proj_lp") else width), np.float16) for f in FIELDS}
        return [{**empty, "tokens": np.zeros((0, width), np.float16), "offsets": np.zeros(1, np.int64)}
                for _ in layer_pairs]
    layers = sorted({layer for pair in layer_pairs for layer in pair})
    parts = [{f: [] for f in (*FIELDS, "tokens")} for _ in layer_pairs]
    lengths = []
    for i in tqdm(range(0, len(captions), batch_size), desc="features", disable=not progress):
        taps = backbone.encode_text_layers(captions[i:i + batch_size], token_layers=layers, batch_size=batch_size)
        rows = torch.arange(len(taps.eos_index))
        lengths += taps.mask.sum(dim=1).tolist()
        for part, (l_p, l_a) in zip(parts, layer_pairs):
            part["final"].append(taps.final)
            part["proj_lp"].append(taps.layer(l_p))
            part["eos_lp"].append(taps.tokens[l_p][rows, taps.eos_index])
            part["eos_la"].append(taps.tokens[l_a][rows, taps.eos_index])
            part["tokens"].append(taps.tokens[l_p][taps.mask])      # real tokens only, caption by caption
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return [{**{f: torch.cat(v).half().numpy() for f, v in part.items()}, "offsets": offsets} for part in parts]


SHARD_RECORDS = "records.json"


def _write_shard(directory: Path, arrays: dict) -> None:
    """Write a shard in a private folder with the records of its arrays, then swap it into place:
    a reader or a second builder racing on the same key sees a whole shard or none, never a shard
    being written, and every builder succeeds (their shards hold the same bytes)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
    try:
        for name, array in arrays.items():
            atomic_save(tmp / f"{name}.npy", lambda t, a=array: np.save(t, a, allow_pickle=False))
        atomic_write_json(tmp / SHARD_RECORDS, {f"{name}.npy": array_record(tmp / f"{name}.npy") for name in arrays})
        if directory.exists():                   # an interrupted run's shard, or a racing builder's
            trash = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.old."))
            try:
                os.replace(directory, trash / directory.name)
            except FileNotFoundError:           # the other builder moved it first
                pass
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.replace(tmp, directory)
        except OSError:                         # a racing builder's whole shard landed in between: keep it
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def extract_text_features(backbone, captions: Sequence[str], l_p: int, l_a: int, root: str | Path,
                          backbone_label: str, batch_size: int = 256, progress: bool = True) -> Path:
    """Write (or reuse) the cache for ``captions`` under ``root/text-<key>``; returns its folder.
    Under ``torch.distributed`` every rank must call this with the same arguments."""
    return extract_layer_sweep(backbone, captions, [(l_p, l_a)], root, backbone_label, batch_size, progress)[(l_p, l_a)]


def extract_layer_sweep(backbone, captions: Sequence[str], layer_pairs, root: str | Path, backbone_label: str,
                        batch_size: int = 256, progress: bool = True) -> dict[tuple[int, int], Path]:
    """Caches for several (l_p, l_a) pairs from ONE tapped pass (the layer sweep of Fig. 4);
    pairs whose cache is complete are reused and not recomputed."""
    captions = list(captions)
    if not captions:
        raise ValueError("extract_text_features: no captions")
    empty = [i for i, c in enumerate(captions) if not isinstance(c, str) or not c.strip()]
    if empty:
        raise ValueError(f"extract_text_features: caption {empty[0]} is empty ({captions[empty[0]]!r})")
    n_layers = backbone.n_layers
    layer_pairs = [(int(p), int(a)) for p, a in layer_pairs]
    for l_p, l_a in layer_pairs:
        for name, layer in (("l_p", l_p), ("l_a", l_a)):
            if not 1 <= layer <= n_layers:
                raise ValueError(f"{name}={layer} is outside the text tower's layers 1..{n_layers}")
    digest = captions_hash(captions)
    folders = {pair: Path(root) / f"text-{FeatureKey(backbone_label, *pair, digest).digest}" for pair in layer_pairs}
    todo = [pair for pair, folder in folders.items() if cache_problems(folder)]
    for pair in todo:                      # a cache cut, zeroed or left unfinished: say what, and extract again
        problems = cache_problems(folders[pair])
        if (folders[pair] / "index.json").exists():
            warnings.warn(f"feature cache {folders[pair]} is not whole ({'; '.join(problems[:3])}); extracting again")
    if not todo:
        return folders
    rank, world = _rank_world()
    bounds = shard_bounds(len(captions), world, batch_size)
    start, stop = bounds[rank]
    blocks = _encode_block(backbone, captions[start:stop], todo, batch_size, progress and rank == 0)
    for pair, arrays in zip(todo, blocks):
        _write_shard(folders[pair] / f"shard-{rank:05d}", arrays)
    if world > 1:
        dist.barrier()
    if rank == 0:
        for pair, arrays in zip(todo, blocks):
            atomic_write_json(folders[pair] / "index.json", {
                "version": FORMAT_VERSION, "key": vars(FeatureKey(backbone_label, *pair, digest)),
                "count": len(captions),
                "shards": [{"name": f"shard-{r:05d}", "start": a, "stop": b} for r, (a, b) in enumerate(bounds)],
                "width": int(arrays["eos_lp"].shape[1]), "embed_dim": int(arrays["final"].shape[1]),
                # every array's size, shape and dtype as each rank wrote it: what a later load checks
                "arrays": {f"shard-{r:05d}/{name}": record for r in range(len(bounds)) for name, record in
                           json.loads((folders[pair] / f"shard-{r:05d}" / SHARD_RECORDS).read_text()).items()}})
    if world > 1:
        dist.barrier()
    return folders


def cache_problems(folder: Path) -> list[str]:
    """Why a feature cache cannot be used ([] when whole): no index (never finished), another format,
    or shards that differ from the sizes, shapes and dtypes the index recorded."""
    try:
        index = json.loads((Path(folder) / "index.json").read_text())
    except (OSError, ValueError):
        return [f"{folder}/index.json is missing or unreadable"]
    if index.get("version") != FORMAT_VERSION or "arrays" not in index:
        return [f"{folder}/index.json has format {index.get('version')} without array records"]
    return record_problems(folder, index["arrays"])


class TextFeatures:
    """A cache folder opened memory-mapped. ``len``, fields by name ([N, ...] float16 views,
    concatenated over shards on first access), and ``tokens(i)`` for caption i's real tokens."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        index_path = self.folder / "index.json"
        if not index_path.exists():
            raise FileNotFoundError(f"{index_path} is missing: the cache was never completed; extract it again")
        self.index = json.loads(index_path.read_text())
        problems = cache_problems(self.folder)
        if problems:
            raise ValueError(f"feature cache {self.folder} is not whole: {'; '.join(problems[:3])}; "
                             "extract_text_features rebuilds it")
        self._shards = [self.folder / s["name"] for s in self.index["shards"]]
        self._cache: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return int(self.index["count"])

    def _load(self, shard: Path, name: str) -> np.ndarray:
        return np.load(shard / f"{name}.npy", mmap_mode="r")

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in (*FIELDS, "tokens", "offsets"):
            raise KeyError(f"unknown feature {name!r}; expected one of {FIELDS + ('tokens', 'offsets')}")
        if name not in self._cache:
            if name == "offsets":
                parts, base = [np.zeros(1, dtype=np.int64)], 0
                for shard in self._shards:
                    off = self._load(shard, "offsets")
                    parts.append(off[1:] + base)
                    base += int(off[-1])
                self._cache[name] = np.concatenate(parts)
            elif len(self._shards) == 1:
                self._cache[name] = self._load(self._shards[0], name)
            else:
                self._cache[name] = np.concatenate([self._load(s, name) for s in self._shards])
        return self._cache[name]

    def tokens(self, i: int) -> np.ndarray:
        off = self["offsets"]
        return self["tokens"][off[i]:off[i + 1]]

    def padded_tokens(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T, w] float32 token batch (T = longest in the batch) and its [B, T] bool mask."""
        off = self["offsets"]
        idx = np.asarray(indices, dtype=np.int64)
        starts, lengths = off[idx], off[idx + 1] - off[idx]
        longest = int(lengths.max())
        mask = np.arange(longest)[None, :] < lengths[:, None]                     # [B, T]
        # one gather of every real token of the batch, in the mask's row-major order, cast by torch (a loop
        # over captions and numpy's float16 cast are slow enough to show in chapter 03's training time)
        rows = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        flat = torch.from_numpy(self["tokens"][rows + np.arange(int(lengths.sum()))]).float()
        out = torch.zeros(len(idx), longest, int(self.index["width"]))
        mask_t = torch.from_numpy(mask)
        out[mask_t] = flat
        return out, mask_t

    def nbytes(self) -> int:
        return sum(p.stat().st_size for shard in self._shards for p in shard.glob("*.npy"))


def dense_bytes(n: int, context_length: int, width: int, bytes_per_value: int) -> int:
    """Bytes of the dense alternative: a [N, context, w] token tensor plus the same per-caption fields."""
    return n * context_length * width * bytes_per_value


def main(argv: list[str] | None = None) -> int:
    """Extract a cache for a captions file (one caption per line), optionally under torchrun."""


    parser = argparse.ArgumentParser(prog="python -m negutils.models.features", description=main.__doc__)
    parser.add_argument("captions", type=Path, help="text file, one caption per line")
    parser.add_argument("--out", type=Path, required=True, help="cache root")
    parser.add_argument("--model", default="negbook-tiny")
    parser.add_argument("--pretrained", default=None, help="open_clip tag, e.g. openai (default: seeded random init)")
    parser.add_argument("--checkpoint", default=None, help="weights file instead of a tag")
    parser.add_argument("--activation", choices=list(ACTIVATIONS),
                        help="gelu or quickgelu: required for a --checkpoint that records no activation "
                             "(open_clip's training format); a tag or a checkpoint that records it decides")
    parser.add_argument("--l-p", type=int, required=True)
    parser.add_argument("--l-a", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    try:        # before the process group starts: every rank would print the same refusal
        quick_gelu = command_line_activation(args.model, args.pretrained, args.checkpoint, args.activation)
    except ValueError as err:
        parser.error(str(err))
    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
        backbone = load_backbone(args.model, args.pretrained, checkpoint=args.checkpoint, device=device,
                                 quick_gelu=quick_gelu)
        captions = [line for line in args.captions.read_text().splitlines() if line.strip()]
        label = f"{args.model}:{args.checkpoint or args.pretrained or 'seed0'}"
        folder = extract_text_features(backbone, captions, args.l_p, args.l_a, args.out, label, args.batch_size)
        if _rank_world()[0] == 0:
            print(folder)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def ensure_image_features(backbone, split, backbone_label: str, root: str | Path, batch_size: int = 256,
                          progress: bool = True) -> torch.Tensor:
    """[N, d] float32 image embeddings of a whole split, cached as ``root/images-<key>.npy``."""
    key = config_hash({"backbone": backbone_label, "split": split.name, "images": list(split.file_names)})
    path = Path(root) / f"images-{key}.npy"
    problems = recorded_problems(path)
    if problems:
        if path.exists():
            warnings.warn(f"image features {path} are not whole ({problems[0]}); encoding them again")
        feats = backbone.encode_images(split.images(), batch_size=batch_size, progress=progress).numpy()
        save_recorded(path, lambda tmp: np.save(tmp, feats.astype(np.float32), allow_pickle=False))
    return torch.from_numpy(np.load(path))
