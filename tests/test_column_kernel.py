"""The column kernel: the cosines with each query's weighted edit columns added in one pass, against the
same sums in float64; its refusals of bad input; and the switches that send the scorers to PyTorch."""
import shutil

import pytest
import torch
import torch.nn.functional as F

from negutils.methods import column_kernel

needs_kernel = pytest.mark.skipif(column_kernel.available() is not None,
                                  reason=f"column kernel unavailable here: {column_kernel.available()}")


def operands(n, d, q, k, slots, seed=0):
    generator = torch.Generator().manual_seed(seed)
    images = F.normalize(torch.randn(n, d, generator=generator), dim=-1)
    text = F.normalize(torch.randn(q, d, generator=generator), dim=-1)
    columns = torch.rand(n, k, generator=generator)
    index = torch.randint(0, k, (slots, q), generator=generator, dtype=torch.int32)
    weight = torch.randn(slots, q, generator=generator) / 4
    return images, text, columns, index, weight


def float64_sums(images, text, columns, index, weight):
    scores = images.double() @ text.double().T
    for s in range(index.shape[0]):
        scores += columns.double()[:, index[s].long()] * weight[s].double()
    return scores


@needs_kernel
@pytest.mark.parametrize("n, d, q, k, slots", [
    (1000, 256, 64, 40, 1),          # the bench's KTN: 40 columns, one per query
    (777, 512, 13, 3, 2),            # a query count and a gallery that fill no whole register or block
    (129, 48, 70, 256, 3),           # the most columns the kernel holds, every register pair read
    (5, 256, 17, 33, 1),             # fewer images than one block
    (300, 256, 64, 16, 0),           # no edits: the product alone
])
def test_the_kernel_adds_the_weighted_columns_to_the_cosines(n, d, q, k, slots):
    args = operands(n, d, q, k, slots)
    scores = column_kernel.scores_with_columns(*args)
    assert scores.shape == (n, q)
    assert (scores.double() - float64_sums(*args)).abs().max() < 1e-6


@needs_kernel
def test_the_kernel_gives_the_same_scores_on_every_call_and_any_thread_count():
    args = operands(5000, 256, 64, 40, 2, seed=1)
    first = column_kernel.scores_with_columns(*args)
    assert torch.equal(first, column_kernel.scores_with_columns(*args))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(first, column_kernel.scores_with_columns(*args))     # each block is computed alike
    finally:
        torch.set_num_threads(threads)


@needs_kernel
def test_bad_operands_are_refused_with_the_operand_named():
    images, text, columns, index, weight = operands(100, 64, 8, 5, 1)
    with pytest.raises(ValueError, match="images must be a contiguous 2-d torch.float32"):
        column_kernel.scores_with_columns(images.double(), text, columns, index, weight)
    with pytest.raises(ValueError, match="text must be a contiguous"):
        column_kernel.scores_with_columns(images, text.T.contiguous().T, columns, index, weight)
    with pytest.raises(ValueError, match="index must be a contiguous 2-d torch.int32"):
        column_kernel.scores_with_columns(images, text, columns, index.long(), weight)
    with pytest.raises(ValueError, match=r"shapes do not fit: images \(100, 64\), text \(8, 32\)"):
        column_kernel.scores_with_columns(images, text[:, :32].contiguous(), columns, index, weight)
    with pytest.raises(ValueError, match=r"an edit column index is outside 0..4: 5..5"):
        column_kernel.scores_with_columns(images, text, columns, torch.full_like(index, 5), weight)
    too_many = torch.rand(100, 257)
    assert column_kernel.available(257) == "257 edit columns, outside the kernel's 1 to 256"
    with pytest.raises(RuntimeError, match="257 edit columns"):
        column_kernel.scores_with_columns(images, text, too_many, index, weight)


def test_the_kernel_can_be_switched_off(monkeypatch):
    with column_kernel.switched_off():
        assert column_kernel.available() == "switched off"
    monkeypatch.setenv("NEGBOOK_COLUMN_KERNEL", "0")
    assert column_kernel.available() == "switched off"
    with pytest.raises(RuntimeError, match="cannot run here: switched off"):
        column_kernel.scores_with_columns(*operands(10, 16, 2, 3, 1))


def test_a_failed_compile_names_the_compiler_and_leaves_no_library(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(RuntimeError, match="false could not compile column_kernel.c"):
        column_kernel._compiled()
    assert not list((tmp_path / "negbook").glob("*.so"))


def test_the_library_is_compiled_once_into_the_cache(tmp_path, monkeypatch):
    if not shutil.which("gcc"):
        pytest.skip("no gcc here")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = column_kernel._compiled()
    assert built.parent == tmp_path / "negbook" and built.exists()
    stamp = built.stat().st_mtime_ns
    assert column_kernel._compiled() == built and built.stat().st_mtime_ns == stamp
