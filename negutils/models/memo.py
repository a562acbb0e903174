"""What a frozen backbone computed for a caption, kept on disk: each chapter runs in its own
process, so an in-memory memo dies with it and the next chapter would encode the same benchmark
captions again. ``DiskMemo`` is the dict the backbone and PeakPatch's taps already use, plus a
folder: it starts with every chunk already written there, and every ``update`` adds one chunk.

A chunk is written atomically (never seen half-written) and read whole: one that does not load or
whose arrays do not match its captions is reported, deleted and computed again, never half-read.

A chunk's name records the chapter that wrote it (``$NEGBOOK_CHAPTER``, set by the runner), and a
chapter's kernel reads only the chunks of the chapters named in ``$NEGBOOK_CHAPTER_READS`` (itself
and the chapters it waits for). The same caption encoded in another batch differs in its last float
bits, so without this a chapter's numbers would depend on which sibling chapter ran before it or
beside it; with it they depend only on the book's chapter dependencies, one chapter at a time or
two. Outside the runner (a notebook in JupyterLab, a bench script) every chunk is read."""
from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from ..core.cache import atomic_save, config_hash


WRITER_VARIABLE = "NEGBOOK_CHAPTER"
READS_VARIABLE = "NEGBOOK_CHAPTER_READS"      # comma-separated chapter names


def chunk_writer(chunk: Path) -> str:
    """The chapter that wrote ``chunk-<hash>.<chapter>.npz`` ("" for ``chunk-<hash>.npz``)."""
    return chunk.name.removesuffix(".npz").partition(".")[2]


def readable(chunk: Path) -> bool:
    """Whether this process may read ``chunk``: always outside the runner, else only a chunk of a
    chapter named in ``$NEGBOOK_CHAPTER_READS``."""
    reads = os.environ.get(READS_VARIABLE)
    return reads is None or chunk_writer(chunk) in reads.split(",")


class DiskMemo(dict):
    """caption -> tensor (``fields=1``) or tuple of ``fields`` tensors, persisted under ``folder``.
    A field's tensors may differ in their first dimension (a caption's tokens); they keep their
    dtype exactly."""

    def __init__(self, folder: str | Path, fields: int = 1):
        super().__init__()
        self.folder, self.fields = Path(folder), fields
        for chunk in sorted(self.folder.glob("chunk-*.npz")):
            if readable(chunk):
                super().update(self._read(chunk))

    def _read(self, chunk: Path) -> dict:
        try:
            with np.load(chunk, allow_pickle=False) as blob:
                keys = [str(k) for k in blob["keys"]]
                fields = []
                for j in range(self.fields):
                    values, offsets = torch.from_numpy(blob[f"values{j}"]), blob[f"offsets{j}"]
                    if len(offsets) != len(keys) + 1 or offsets[-1] != len(values):
                        raise ValueError(f"field {j} holds {len(values)} rows for {len(keys)} captions")
                    ragged = bool(blob[f"ragged{j}"])
                    fields.append([values[a:b] if ragged else values[a] for a, b in zip(offsets[:-1], offsets[1:])])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
            warnings.warn(f"{chunk} could not be read ({err}); deleted, its captions will be computed again")
            chunk.unlink(missing_ok=True)
            return {}
        return dict(zip(keys, zip(*fields) if self.fields > 1 else fields[0]))

    def update(self, items: Iterable = (), **kwargs) -> None:
        new = {k: v for k, v in dict(items, **kwargs).items() if k not in self}
        if new:
            super().update(new)
            self._write(new)

    def _write(self, new: dict) -> None:
        keys = list(new)
        arrays = {"keys": np.array(keys)}
        for j in range(self.fields):
            values = [(new[k][j] if self.fields > 1 else new[k]).detach().cpu() for k in keys]
            ragged = len({tuple(v.shape) for v in values}) > 1        # a caption's tokens: rows of its own
            lengths = [len(v) for v in values] if ragged else [1] * len(values)
            arrays[f"values{j}"] = (torch.cat(values) if ragged else torch.stack(values)).numpy()
            arrays[f"offsets{j}"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            arrays[f"ragged{j}"] = np.array(ragged)
        writer = os.environ.get(WRITER_VARIABLE, "")
        name = f"chunk-{config_hash(keys)}{'.' + writer if writer else ''}.npz"
        atomic_save(self.folder / name, lambda tmp: np.savez(tmp, **arrays))
