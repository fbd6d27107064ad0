"""The example module `pycontainer` (examples/pycontainer): sizes from Python are checked."""

import numpy as np
import pytest

import pycontainer


def test_an_image_too_large_to_address_is_an_overflow_error():
    for rows, cols in [(2**40, 2**40), (2**62, 1), (2**64 - 1, 2)]:
        with pytest.raises(OverflowError, match=rf"a {rows} x {cols} image of f32 is too large to address"):
            pycontainer.Image(rows, cols)


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
