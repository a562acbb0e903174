"""KTN's and LCSE's scores in one pass over the gallery: the cosines, with each query's few per-image edit
columns added while each block of rows is still in cache (``column_kernel.c``).

The scorers' other ways to add the columns are plain PyTorch: appending all K columns to the matrix
product costs K multiply-adds per (image, query), as K more embedding dimensions would (KTN's 40 columns
at d = 256: the rows "columns appended" of ``bench/training_free_overhead.py``), and gathering each
query's columns per block costs more. The kernel costs about one add per (image, query) and column used.
PyTorch's CPU operators have no matrix product with a gather fused into it, so this is a small C
function: compiled with the system's C compiler on first use into the user's cache (keyed by the source
and flags), it calls the MKL sgemm that PyTorch's ``libtorch_cpu`` exports, on CPUs with AVX-512. Where
any of that is missing (no compiler, another CPU or BLAS, more columns than the kernel holds,
``NEGBOOK_COLUMN_KERNEL=0``), ``available`` says why and the scorers take the PyTorch paths, whose
scores agree with the kernel's to 1e-7 (tested)."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import torch

from ..core.cache import atomic_save

SOURCE = Path(__file__).with_name("column_kernel.c")
FLAGS = ("-O3", "-mavx512f", "-fopenmp", "-shared", "-fPIC")
# rows per sgemm call, the next block prefetched meanwhile: 128 measured fastest of 64-1024 at d = 256 and 512,
# 10K-500K images (64 queries), and the block's scores (32 KB) are still in L1/L2 for the edits
BLOCK_ROWS = 128
_B_MATRIX, _ROW_MAJOR, _TRANSPOSE = 162, 101, 112       # MKL's CBLAS enums
_switched_off = False


class _Kernel:
    def __init__(self, library: ctypes.CDLL, mkl: ctypes.CDLL):
        self.scores = library.column_kernel_scores
        self.scores.restype = ctypes.c_int
        self.scores.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        self.max_columns = library.column_kernel_max_columns()
        self.compute = ctypes.cast(mkl.cblas_sgemm_compute, ctypes.c_void_p).value
        self.set_threads = ctypes.cast(mkl.MKL_Set_Num_Threads_Local, ctypes.c_void_p).value
        self.pack_size = mkl.cblas_sgemm_pack_get_size
        self.pack_size.restype, self.pack_size.argtypes = ctypes.c_size_t, [ctypes.c_int] * 4
        self.pack = mkl.cblas_sgemm_pack
        self.pack.restype = None
        self.pack.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]


def cache_dir() -> Path:
    """Where the compiled kernel is kept: ``$XDG_CACHE_HOME/negbook``, else ``~/.cache/negbook``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "negbook"


def _compiled() -> Path:
    """The shared library for this source and these flags, compiled once (``atomic_save``: a run stopped
    half-way leaves no half-written library under the final name)."""
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    target = cache_dir() / f"column_kernel-{key}.so"
    if target.exists():
        return target
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        raise RuntimeError("no C compiler (gcc or cc, or $CC) on the PATH")

    def compile_to(built: Path) -> None:
        run = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(built)], capture_output=True, text=True,
                             timeout=300)
        if run.returncode:
            raise RuntimeError(f"{compiler} could not compile {SOURCE.name}: {run.stderr.strip()[-500:]}")
    return atomic_save(target, compile_to)


@functools.cache
def _load() -> _Kernel | str:
    """The kernel, or the reason it cannot be used here."""
    if not torch.backends.mkl.is_available():
        return "this PyTorch build has no MKL"
    if not _cpu_has_avx512():
        return "this CPU has no AVX-512 (or /proc/cpuinfo does not say so)"
    mkl_path = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    try:
        mkl = ctypes.CDLL(str(mkl_path))
        for name in ("cblas_sgemm_compute", "cblas_sgemm_pack", "cblas_sgemm_pack_get_size",
                     "MKL_Set_Num_Threads_Local"):
            getattr(mkl, name)
    except (OSError, AttributeError) as error:
        return f"MKL's packed sgemm is not reachable in {mkl_path.name}: {error}"
    try:
        library = ctypes.CDLL(str(_compiled()))
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return str(error)
    return _Kernel(library, mkl)


def _cpu_has_avx512() -> bool:
    """Read before the library is loaded: code compiled for AVX-512 must not run on a CPU without it."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and "avx512f" in line.split() for line in flags.splitlines())


def available(columns: int = 1) -> str | None:
    """None when the kernel can add ``columns`` edit columns here, else why not."""
    if _switched_off or os.environ.get("NEGBOOK_COLUMN_KERNEL", "1") == "0":
        return "switched off"
    kernel = _load()
    if isinstance(kernel, str):
        return kernel
    if not 1 <= columns <= kernel.max_columns:
        return f"{columns} edit columns, outside the kernel's 1 to {kernel.max_columns}"
    return None


@contextlib.contextmanager
def switched_off():
    """Score with the PyTorch paths inside the block (the bench and the tests compare them with the kernel)."""
    global _switched_off
    saved, _switched_off = _switched_off, True
    try:
        yield
    finally:
        _switched_off = saved


def scores_with_columns(images: torch.Tensor, text: torch.Tensor, columns: torch.Tensor, index: torch.Tensor,
                        weight: torch.Tensor) -> torch.Tensor:
    """[N, Q] ``images @ text.T`` plus, for each slot s, ``weight[s, j] * columns[:, index[s, j]]`` in query j's
    column: images [N, d], text [Q, d], columns [N, K] float32; index [S, Q] int32 and weight [S, Q] float32."""
    reason = available(columns.shape[1] if columns.dim() == 2 else 0)
    if reason:
        raise RuntimeError(f"the column kernel cannot run here: {reason}")
    _check(images, "images", torch.float32, 2)
    _check(text, "text", torch.float32, 2)
    _check(columns, "columns", torch.float32, 2)
    _check(index, "index", torch.int32, 2)
    _check(weight, "weight", torch.float32, 2)
    (n, d), (q, k), slots = images.shape, (text.shape[0], columns.shape[1]), index.shape[0]
    if text.shape[1] != d or columns.shape[0] != n or index.shape != (slots, q) or weight.shape != (slots, q):
        raise ValueError(f"shapes do not fit: images {tuple(images.shape)}, text {tuple(text.shape)}, columns "
                         f"{tuple(columns.shape)}, index {tuple(index.shape)}, weight {tuple(weight.shape)}")
    if slots and (int(index.min()) < 0 or int(index.max()) >= k):
        raise ValueError(f"an edit column index is outside 0..{k - 1}: {int(index.min())}..{int(index.max())}")
    out = torch.empty(n, q)
    if n == 0 or q == 0:
        return out
    kernel = _load()
    packed = torch.empty(-(-kernel.pack_size(_B_MATRIX, BLOCK_ROWS, q, d) // 4), dtype=torch.float32)
    kernel.pack(_ROW_MAJOR, _B_MATRIX, _TRANSPOSE, BLOCK_ROWS, q, d, 1.0, text.data_ptr(), d, packed.data_ptr())
    status = kernel.scores(kernel.compute, kernel.set_threads, torch.get_num_threads(), BLOCK_ROWS,
                           packed.data_ptr(), images.data_ptr(), n, d, q, columns.data_ptr(), k, index.data_ptr(),
                           weight.data_ptr(), slots, out.data_ptr())
    if status:
        raise RuntimeError(f"column_kernel_scores refused {k} edit columns")
    return out


def _check(tensor: torch.Tensor, name: str, dtype: torch.dtype, dims: int) -> None:
    if tensor.dtype != dtype or tensor.dim() != dims or not tensor.is_contiguous() or tensor.device.type != "cpu":
        raise ValueError(f"{name} must be a contiguous {dims}-d {dtype} CPU tensor, got {tuple(tensor.shape)} "
                         f"{tensor.dtype} on {tensor.device}, contiguous={tensor.is_contiguous()}")
