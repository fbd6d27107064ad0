"""Every NumPy dtype and layout, read through `__array_interface__` into a cai view."""

import numpy as np
import pytest

import cai

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy < 2
    byte_bounds = np.byte_bounds

DTYPES = [
    "?", "i1", "u1", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8", ">u8",
    "<f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8", "<c16", "<M8[ns]", ">M8[D]", "<m8[s]", "<m8[25us]",
    "S5", "<U3", "V4",
    np.dtype([("a", "<i4"), ("b", "<f8")]),
    np.dtype([("a", "u1"), ("b", "<f4")], align=True),
    np.dtype([("x", "<f4", (3,)), ("n", [("p", "u1"), ("q", "<i2")])]),
    np.dtype({"names": ["a", "b"], "formats": ["<i4", "u1"], "offsets": [0, 8], "itemsize": 16}),
]


def layouts(dtype):
    base = np.zeros(24, dtype=dtype)
    yield "1-d", base
    yield "c-2d", base.reshape(4, 6)
    yield "f-order", np.asfortranarray(base.reshape(4, 6))
    yield "transposed", base.reshape(4, 6).T
    yield "negative steps", base.reshape(4, 6)[::-1, ::-2]
    yield "sliced", base.reshape(4, 6)[1:3, 2:5]
    yield "broadcast", np.broadcast_to(base[:6], (5, 6))
    yield "zero-size", base[:0].reshape(0, 3)
    yield "0-d", base[7:8].reshape(())
    yield "3-d strided", base.reshape(2, 3, 4)[:, ::2, 1:]


CASES = [(str(dt), name, arr) for dt in DTYPES for name, arr in layouts(dt)]


@pytest.mark.parametrize("dtype,layout,arr", CASES, ids=[f"{d}-{n}" for d, n, _ in CASES])
def test_view_matches_numpy(dtype, layout, arr):
    v = cai.as_array(arr)
    assert v.shape == arr.shape
    assert v.strides == arr.strides
    assert v.ndim == arr.ndim and v.size == arr.size
    assert v.itemsize == arr.dtype.itemsize
    assert v.nbytes == arr.nbytes
    assert v.is_c_contiguous == arr.flags.c_contiguous
    assert v.is_f_contiguous == arr.flags.f_contiguous
    assert v.readonly == (not arr.flags.writeable)
    assert v.ptr == arr.__array_interface__["data"][0]
    assert v.kind == arr.dtype.kind
    if arr.ndim:
        assert len(v) == len(arr) and bool(v) == (len(arr) != 0)
    else:
        with pytest.raises(TypeError, match="len\\(\\) of a 0-d array"):
            len(v)
        with pytest.raises(TypeError, match="bool\\(\\) of a view of a 0-d array"):
            bool(v)
    if arr.size:
        assert v.byte_bounds == byte_bounds(arr)
    else:
        assert v.byte_bounds[0] == v.byte_bounds[1]
    # The view re-exports the array: NumPy reads it back as the same memory and dtype.
    # (For records NumPy itself turns padding entries into void fields named f1, f2, ...)
    back = np.asarray(v)
    expected = arr.dtype if arr.dtype.names is None else np.dtype(arr.__array_interface__["descr"])
    assert back.dtype == expected and back.shape == arr.shape and back.strides == arr.strides
    for name in arr.dtype.names or ():
        assert back.dtype.fields[name][:2] == arr.dtype.fields[name][:2]
    if arr.size:
        assert np.shares_memory(back, arr)


def test_byte_order_is_reported():
    assert cai.as_array(np.zeros(3, ">f8")).byteorder == ">"
    assert cai.as_array(np.zeros(3, "<f8")).byteorder == "<"
    assert cai.as_array(np.zeros(3, "u1")).byteorder == "|"


def test_record_descr_round_trips():
    dt = np.dtype([("a", "u1"), ("b", "<f4")], align=True)
    v = cai.as_array(np.zeros(2, dt))
    assert v.typestr == "|V8"
    assert np.dtype(v.descr).fields["b"][1] == dt.fields["b"][1] == 4
    assert np.dtype(v.descr).itemsize == 8


@pytest.mark.parametrize("dtype", [np.dtype([]), np.dtype([("x", "<f4"), ("none", [])])], ids=["[]", "with-empty-field"])
def test_records_with_no_fields_read_as_numpy_writes_them(dtype):
    # NumPy's interface of a record with no fields is '|V0' with descr [].
    for a in [np.zeros((4, 6), dtype), np.zeros((4, 6), dtype)[::-1, ::2]]:
        v = cai.as_array(a)
        ai = a.__array_interface__
        assert (v.typestr, v.shape, v.strides) == (ai["typestr"], a.shape, a.strides)
        assert v.__array_interface__["descr"] == ai["descr"] and cai.validate(a) == []
        back = np.asarray(v)
        assert back.dtype == a.dtype and back.shape == a.shape and back.strides == a.strides
        # The flags NumPy computes from the same interface (for items of no bytes, an
        # array NumPy made keeps the flags of its making).
        ref = np.asarray(type("Interface", (), {"__array_interface__": ai})())
        assert (v.is_c_contiguous, v.is_f_contiguous) == (ref.flags.c_contiguous, ref.flags.f_contiguous)


def test_field_shapes_take_int_likes_as_numpy_does():
    # NumPy reads a field's shape through __index__ (its own integers included); so do the
    # array's shape and the fields read here. Bools and negatives are not dimensions.
    arr = np.zeros(3, [("x", "<f4", (2,))])
    ai = dict(arr.__array_interface__, descr=[("x", "<f4", (np.int64(2),))])
    holder = type("Fields", (), {"__array_interface__": ai, "base": arr})()
    assert np.dtype(cai.as_array(holder).descr) == arr.dtype
    assert np.dtype([("x", "<f4", (np.int64(2),))]) == arr.dtype
    for shape in [(True, 2), (-2,), ("2",)]:
        ai["descr"] = [("x", "<f4", shape)]
        with pytest.raises(ValueError, match=r"descr: .* the shape .* is not a tuple of non-negative ints"):
            cai.as_array(holder)


def test_writes_through_the_reexported_view():
    a = np.zeros((2, 3), np.float32)
    b = np.asarray(cai.as_array(a))
    b[1, 2] = 5.0
    assert a[1, 2] == 5.0


def test_readonly_numpy_array_stays_readonly():
    a = np.arange(4.0)
    a.flags.writeable = False
    v = cai.as_array(a)
    assert v.readonly and not np.asarray(v).flags.writeable
