"""The example module `pycontainer` (examples/pycontainer): sizes from Python are checked."""

import subprocess
import sys

import numpy as np
import pytest

import pycontainer


def test_an_image_too_large_to_address_is_an_overflow_error():
    # An empty image with a huge other dimension too: NumPy sizes it as one with a row or
    # column, and its export would be refused.
    for rows, cols in [(2**40, 2**40), (2**62, 1), (2**64 - 1, 2), (2**64 - 1, 0), (0, 2**62)]:
        with pytest.raises(OverflowError, match=rf"a {rows} x {cols} image of f32 is too large to address"):
            pycontainer.Image(rows, cols)
    img = pycontainer.Image(3, 0)
    with pytest.raises(OverflowError, match=rf"a {2**64 - 1} x 0 image of f32 is too large to address"):
        img.add_rows(2**64 - 4, 5.0)
    assert np.asarray(img).shape == (3, 0)
    assert np.asarray(pycontainer.Image(2**61 - 1, 0)).shape == (2**61 - 1, 0)


def test_slices_are_exclusive_across_modules():
    # Each module built on cai-py links its own copy of cai-py: the slices one takes must
    # still bar the others (the registry is shared through the interpreter's state dict).
    cai_fixtures = pytest.importorskip("cai_fixtures")
    x = np.zeros(4, np.float64)
    brighten = lambda: pycontainer.brighten(x.view(np.float32).reshape(2, 4), 1.0)  # noqa: E731
    with pytest.raises(BufferError, match=r"as_slice_mut: bytes .* overlap bytes .* that another call in progress"):
        cai_fixtures.host_hold(x, brighten)
    with pytest.raises(BufferError, match=r"as_slice_mut: bytes .* overlap"):
        cai_fixtures.host_hold_ro(x, brighten)
    # Both gave their entries back.
    brighten()
    assert (x.view(np.float32) == 1.0).all()
    assert cai_fixtures.host_hold(x, lambda: "held") == "held"


SPLIT_ATTEMPT = r"""
import gc, sys
import numpy as np
import cai_fixtures, pycontainer
# Python code that meddles with sys before, between and after the modules' first slices
# (a registry published in sys was split this way: two `&mut` slices of the same bytes).
sys._cai_slices_v1 = None
cai_fixtures.host_sum(np.zeros(1))
for name in [n for n in vars(sys) if "cai" in n]:
    delattr(sys, name)
x = np.zeros(4)
try:
    cai_fixtures.host_hold(x, lambda: pycontainer.brighten(x.view(np.float32).reshape(2, 4), 1.0))
except BufferError as e:
    print("refused:", e)
# Nor can the collector hand Python the dict the registry is published in.
print("reachable:", any(isinstance(o, dict) and "cai.slices_v1" in o for o in gc.get_objects()))
"""


def test_python_code_cannot_split_the_slice_registry():
    pytest.importorskip("cai_fixtures")
    out = subprocess.run([sys.executable, "-c", SPLIT_ATTEMPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused: as_slice_mut: bytes" in out.stdout and "that another call in progress" in out.stdout, out.stdout
    assert "reachable: False" in out.stdout, out.stdout


def test_rows_that_cannot_be_added_leave_the_image_as_it_was():
    img = pycontainer.Image(2, 3)
    img.fill(1.5)
    view = np.asarray(img)
    address = img.address()
    with pytest.raises(OverflowError, match=rf"add_rows: 2 \+ {2**64 - 1} rows are too many to address"):
        img.add_rows(2**64 - 1, 0.0)
    with pytest.raises(OverflowError, match=rf"a {2**61 + 2} x 3 image of f32 is too large to address"):
        img.add_rows(2**61, 0.0)
    # 2**52 rows of 3 pixels: 54 PiB, which no allocator gives.
    with pytest.raises(MemoryError, match=rf"no memory for a {2**52 + 2} x 3 image of f32: memory allocation failed"):
        img.add_rows(2**52, 0.0)
    assert img.address() == address and np.asarray(img).shape == (2, 3) and img.sum() == 9.0
    img.add_rows(1, 2.0)
    assert np.asarray(img).tolist() == [[1.5] * 3, [1.5] * 3, [2.0] * 3]
    assert view.tolist() == [[1.5] * 3] * 2
