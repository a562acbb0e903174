"""Config-hash keys, atomic writes and records of what was written: nothing half-written, cut or
zeroed is ever mistaken for a result.

A write goes to a temporary file that is flushed to disk (``fsync``) before it is renamed into place,
so a crash leaves the old file or the new one. A cache also keeps a *record* of each file (its size
and SHA-256, or an array's shape and dtype), written last; on load the file is compared with its
record, and a cache whose files do not match is rebuilt, with what was wrong logged.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np


_PRIMITIVES = (str, int, float, bool, type(None))


def _jsonable(obj: Any) -> Any:
    # leaves first: a split's content key walks every caption and box of COCO train2017, where the
    # dataclass test on each leaf cost most of the time; the output is the same whichever test comes first
    if isinstance(obj, _PRIMITIVES):
        return obj
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace variation, so equal configs hash equally."""
    return json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"))


def config_hash(obj: Any, length: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def _default_mode(base: int) -> int:
    """``base`` under the process umask: what a plain open() or mkdir() would have given."""
    umask = os.umask(0)
    os.umask(umask)
    return base & ~umask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _default_mode(0o666))  # mkstemp files are private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, sort_keys: bool = True) -> Path:
    """``obj`` as JSON; keys sorted unless ``sort_keys`` is false (a record whose key order is a
    table's column order)."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), sort_keys=sort_keys, indent=1) + "\n")


def atomic_save(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` for writers that need a filename (torch.save, np.save, df.to_csv)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        _fsync(Path(tmp))
        os.chmod(tmp, _default_mode(0o666))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _fsync(path: Path) -> None:
    """Flush a file written by another library (torch.save, np.save) to disk before it is renamed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_digest(path: str | os.PathLike, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """The hex digest of a file's bytes, read in chunks (archives and caches can be gigabytes)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(path: str | os.PathLike) -> str:
    return file_digest(path, "sha256")


def file_record(path: str | os.PathLike) -> dict:
    """What a file must still be: its size and SHA-256."""
    return {"bytes": Path(path).stat().st_size, "sha256": sha256_of(path)}


def array_record(path: str | os.PathLike) -> dict:
    """What a large ``.npy`` file must still be, without reading its data: size, shape and dtype."""
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return {"bytes": Path(path).stat().st_size, "shape": list(array.shape), "dtype": str(array.dtype)}


def record_problems(folder: str | os.PathLike, records: dict[str, dict]) -> list[str]:
    """How the files under ``folder`` differ from their ``records`` ({relative path: file_record or
    array_record}): missing, another size, another hash, or an array that does not load or has
    another shape or dtype. Empty when every file is whole."""
    problems = []
    for name, expected in records.items():
        path = Path(folder) / name
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        size = path.stat().st_size
        if size != expected["bytes"]:
            problems.append(f"{path} has {size} bytes, its record {expected['bytes']} (cut or extended)")
        elif "sha256" in expected and sha256_of(path) != expected["sha256"]:
            problems.append(f"{path} has another SHA-256 than its record (overwritten or zeroed)")
        elif "shape" in expected:
            try:
                actual = array_record(path)
            except (ValueError, OSError) as err:
                problems.append(f"{path} does not load as an array ({err})")
                continue
            if (actual["shape"], actual["dtype"]) != (expected["shape"], expected["dtype"]):
                problems.append(f"{path} is {actual['dtype']}{actual['shape']}, its record "
                                f"{expected['dtype']}{expected['shape']}")
    return problems


def record_path(path: str | os.PathLike) -> Path:
    """Where the record of a single cached file lives: beside it, ``<name>.record.json``."""
    path = Path(path)
    return path.with_name(f"{path.name}.record.json")


def save_recorded(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """``atomic_save`` followed by the file's record, written last."""
    path = atomic_save(path, write)
    atomic_write_json(record_path(path), file_record(path))
    return path


def recorded_problems(path: str | os.PathLike) -> list[str]:
    """How a file written by ``save_recorded`` differs from its record ([] when whole; a file with no
    record was cut short before its record was written, or predates records)."""
    path, record = Path(path), record_path(path)
    if not path.is_file():
        return [f"{path} is missing"]
    try:
        expected = json.loads(record.read_text())
    except (OSError, ValueError):
        return [f"{path} has no readable record {record.name} (written before records, or cut short)"]
    return record_problems(path.parent, {path.name: expected})


def adopt_unrecorded(path: str | os.PathLike, loads: Callable[[Path], object]) -> bool:
    """A cached file written before records were kept: give it a record if it still loads
    (``loads(path)`` raises on a cut or zeroed file), so an expensive result (the pretrained organism)
    is not rebuilt only for lacking one. True when a record was written."""
    path = Path(path)
    if not path.is_file() or record_path(path).exists():
        return False
    try:
        loads(path)
    except Exception:       # noqa: BLE001 - any failure to load means the file is not whole
        return False
    atomic_write_json(record_path(path), file_record(path))
    return True


def build_directory_atomically(final_dir: str | os.PathLike, build: Callable[[Path], None]) -> Path:
    """Run ``build(tmp_dir)`` and rename the finished directory into place.

    A crash mid-build leaves only a hidden temporary directory, never a partial ``final_dir``.
    """
    final_dir = Path(final_dir)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=final_dir.parent, prefix=f".{final_dir.name}."))
    os.chmod(tmp_dir, _default_mode(0o777))  # mkdtemp makes it private; the finished result is not
    try:
        build(tmp_dir)
        if final_dir.exists():  # another process finished first; keep its copy
            shutil.rmtree(tmp_dir)
        else:
            os.replace(tmp_dir, final_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return final_dir
