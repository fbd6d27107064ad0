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
    # Fields whose type is itself a sub-array, as NumPy writes them: ('f', ('<f2', (2,)), (3,)).
    np.dtype([("f", ("<f2", (2,)), (3,)), ("g", ([("x", "u1")], (2,)))]),
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
        with pytest.raises(ValueError, match=r"descr: .* the shape .* is not a tuple of ints from 0 to 2147483647"):
            cai.as_array(holder)


def interface(ai, base=None):
    return type("Interface", (), {"__array_interface__": ai, "base": base})()


@pytest.mark.parametrize(
    "typestr, descr",
    [
        ("<V2", [("", "<f2")]),
        ("|V4", [("", "<f4")]),
        ("|V8", [("", "<f4", (2,))]),
        ("|V4", [("", ("<i2", (2,)))]),
        # NumPy compares the type strings: raw bytes of another spelling, or with an
        # explicit shape (), are a record too (and not bfloat16 for DLPack).
        ("<V2", [("", "|V2")]),
        ("|V2", [("", "<V2")]),
        ("<V2", [("", "<V2", ())]),
    ],
)
def test_a_raw_bytes_typestr_with_a_one_field_descr_is_that_record(typestr, descr):
    # NumPy reads a descr other than [('', typestr)] as the record it describes (one
    # field, named f0), whatever the typestr's own letters say.
    arr = np.arange(8, dtype="<f2") if typestr[2] == "2" else np.arange(8, dtype="<f4")
    n = arr.nbytes // int(typestr[2:])
    ai = {"shape": (n,), "typestr": typestr, "descr": descr, "data": (arr.ctypes.data, False), "version": 3}
    producer = interface(ai, arr)
    expected = np.asarray(producer)
    assert expected.dtype.names == ("f0",)
    v = cai.as_array(producer)
    assert (v.typestr, v.descr) == (typestr, descr) and cai.validate(producer) == []
    assert v.__array_interface__["descr"] == descr
    back = np.asarray(v)
    assert back.dtype == expected.dtype and back.tobytes() == expected.tobytes()
    assert np.array_equal(back["f0"], expected["f0"])
    assert np.dtype(v.descr) == expected.dtype
    # A record, not bfloat16 or raw bytes: DLPack has no type for it.
    with pytest.raises(BufferError, match=r"descr: a record type .* has no DLPack data type"):
        v.__dlpack__()


def test_raw_bytes_restate_only_the_typestrs_own_spelling():
    # NumPy compares the strs: '=V2' is not '<V2', so either descr of the other makes a
    # record (not bfloat16, which DLPack would carry).
    arr = np.arange(4, dtype="<f2")
    for typestr, ty in [("<V2", "=V2"), ("=V2", "<V2"), ("|V2", "=V2")]:
        ai = {"shape": (4,), "typestr": typestr, "descr": [("", ty)], "data": (arr.ctypes.data, False), "version": 3}
        expected = np.asarray(interface(ai, arr))
        assert expected.dtype.names == ("f0",)
        v = cai.as_array(interface(ai, arr))
        assert np.asarray(v).dtype == expected.dtype and np.dtype(v.descr) == expected.dtype
        assert np.dtype(v.__array_interface__["descr"]) == expected.dtype
        with pytest.raises(BufferError, match=r"descr: a record type .* has no DLPack data type"):
            v.__dlpack__()


def test_a_descr_that_restates_the_typestr_adds_nothing():
    arr = np.zeros(4, "<f2")
    for typestr in ["<V2", "|V2"]:
        ai = {"shape": (4,), "typestr": typestr, "descr": [("", typestr)], "data": (arr.ctypes.data, False), "version": 3}
        v = cai.as_array(interface(ai, arr))
        assert v.descr == [("", typestr)] and "descr" not in v.__array_interface__
        assert np.asarray(v).dtype == np.asarray(interface(ai, arr)).dtype == np.dtype("V2")
    # A plain type's descr is ignored by NumPy, and restates it for cai, `()` or not.
    f4 = np.zeros(4, "<f4")
    for descr in [[("", "<f4")], [("", "<f4", ())], [("", "|f4")]]:
        ai = {"shape": (4,), "typestr": "<f4", "descr": descr, "data": (f4.ctypes.data, False), "version": 3}
        v = cai.as_array(interface(ai, f4))
        assert v.descr == [("", "<f4")] and np.asarray(v).dtype == np.float32


def test_unnamed_fields_take_numpys_names_and_titles_need_names():
    arr = np.zeros(4, "<f8")
    cases = [
        ([("", "<f4"), ("f0", "<i4")], r"the name 'f0' is used twice \(NumPy names an unnamed field f<i>\)"),
        ([("a", "<f4"), ("", "<i4"), ("f1", "|V0")], r"the name 'f1' is used twice"),
        ([(("t", ""), "<f4"), ("", "|V4")], r"entry 0 has a title but no name"),
    ]
    for descr, message in cases:
        ai = {"shape": (4,), "typestr": "|V8", "descr": descr, "data": (arr.ctypes.data, False), "version": 3}
        with pytest.raises((ValueError, TypeError)):
            np.asarray(interface(ai, arr))  # NumPy refuses each one too
        with pytest.raises(ValueError, match=r"^descr: .*" + message):
            cai.as_array(interface(ai, arr))
        assert any("descr" in f for f in cai.validate(interface(ai, arr)))
    # Padding takes no name: NumPy's own interface of a record with fields f0 and f1 and a
    # gap, which NumPy cannot read back, is read.
    dt = np.dtype({"names": ["f0", "f1"], "formats": ["u1", "<f4"], "offsets": [0, 4]})
    rec = np.zeros(3, dt)
    assert rec.__array_interface__["descr"] == [("f0", "|u1"), ("", "|V3"), ("f1", "<f4")]
    v = cai.as_array(rec)
    assert v.descr == rec.__array_interface__["descr"] and cai.validate(rec) == []


def test_items_larger_than_numpy_can_describe_are_refused():
    assert np.dtype("S2147483647").itemsize == 2**31 - 1
    for typestr in ["|S2147483648", "|V2147483648", "<U536870912", "|S9223372036854775807"]:
        with pytest.raises(TypeError):
            np.dtype(typestr[1:])
        ai = {"shape": (0,), "typestr": typestr, "data": (0, False), "version": 3}
        with pytest.raises(ValueError, match=r"^typestr: '.*' is malformed: .*NumPy's limit"):
            cai.as_array(interface(ai))
    # A sub-array dimension is a C int for NumPy too.
    ai = {"shape": (0,), "typestr": "|V0", "descr": [("a", "|u1", (2**31, 0))], "data": (0, False), "version": 3}
    with pytest.raises(ValueError, match=r"^descr: .*the shape \(2147483648, 0\) \(tuple\) is not a tuple of ints from 0 to 2147483647"):
        cai.as_array(interface(ai))
    ai = {"shape": (0,), "typestr": "|S2147483647", "data": (0, False), "version": 3}
    assert cai.as_array(interface(ai)).itemsize == 2**31 - 1


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


def test_numpys_older_data_form_is_refused_with_the_way_round_it():
    # An object holding the bytes as `data` (Pillow's images export it): not read, and the
    # message says what to do instead. A CUDA dict gets no such advice.
    class PillowLike:
        __array_interface__ = {"version": 3, "shape": (3, 5), "typestr": "|u1", "data": b"\0" * 15}

    with pytest.raises(
        TypeError,
        match=r"^data: expected a \(pointer: int, readonly: bool\) tuple, received b'.*' \(bytes\); an object holding "
        r"the bytes \(an older form of NumPy's interface\) is not read: pass numpy.asarray\(obj\) instead$",
    ):
        cai.as_array(PillowLike())
    assert np.asarray(PillowLike()).shape == (3, 5)
    with pytest.raises(TypeError, match=r"^data: expected a \(pointer: int, readonly: bool\) tuple, received b'.*' \(bytes\)$"):
        cai.from_cuda_array_interface({"version": 3, "shape": (15,), "typestr": "|u1", "data": b"\0" * 15})
    # Nor where numpy.asarray would not help either: an int, a list, None.
    for data in (0x1000, [0x1000, False], None):
        with pytest.raises(TypeError, match=r"^data: expected a \(pointer: int, readonly: bool\) tuple, received [^;]*$"):
            cai.as_array(type("P", (), {"__array_interface__": {"version": 3, "shape": (1,), "typestr": "|u1", "data": data}})())
