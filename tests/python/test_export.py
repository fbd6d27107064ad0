"""Rust containers exported through the interfaces, read by NumPy and by cai."""

import gc
import re
import sys
import weakref

import numpy as np
import pytest

import cai
import cai_fixtures as fx

DEVICE = 0x7F00_0000_0000


def test_host_matrix_is_zero_copy_both_ways():
    m = fx.HostMatrix(3, 4)
    a = np.asarray(m)
    assert a.dtype == np.float32 and a.shape == (3, 4) and a.strides == (16, 4)
    assert a.ctypes.data == m.address()
    assert a.flags.writeable and a.flags.c_contiguous
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4))
    a[2, 3] = 123.5
    assert m.get(2, 3) == 123.5
    m.set(0, 1, -7.0)
    assert a[0, 1] == -7.0


def test_host_interface_dict_keys():
    d = fx.HostMatrix(2, 5).__array_interface__
    assert set(d) == {"shape", "typestr", "data", "version", "strides"}
    assert d["strides"] is None and d["version"] == 3 and d["typestr"] == "<f4"
    assert isinstance(d["data"], tuple) and d["data"][1] is False


def test_readonly_host_vector_is_not_writeable_in_numpy():
    v = fx.FrozenVector([1, 2, 3])
    a = np.asarray(v)
    assert a.dtype == np.int64 and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 5
    assert cai.as_array(v).readonly


def test_records_match_rust_layout():
    p = fx.Particles(4)
    a = np.asarray(p)
    size, offsets = fx.Particles.layout()
    assert a.dtype.itemsize == size
    for name, offset in offsets:
        assert a.dtype.fields[name][1] == offset, name
    assert a.dtype["position"].shape == (3,)
    for i in range(4):
        ident, position, mass, alive = p.get(i)
        assert a["id"][i] == ident and a["mass"][i] == mass and bool(a["alive"][i]) == alive
        np.testing.assert_array_equal(a["position"][i], np.array(position, dtype=np.float32))
    # Records holding a bool are exported read-only: a consumer could write a byte that is
    # no bool into them, and Rust reading its own field would read an invalid value.
    assert not a.flags.writeable and p.__array_interface__["data"][1] is True
    with pytest.raises(ValueError, match="read-only"):
        a["alive"][2] = 2


def test_declared_padding_matches_numpys_aligned_dtype():
    aligned = np.dtype([("value", "<f4"), ("ok", "?")], align=True)
    flagged = fx.FlaggedValues(4)
    assert flagged.__array_interface__["descr"] == np.zeros(1, aligned).__array_interface__["descr"]
    assert aligned.descr == [("value", "<f4"), ("ok", "|b1"), ("", "|V3")]
    # NumPy reads that descr as it reads its own aligned arrays' (naming the padding f2).
    a = np.asarray(flagged)
    numpys_own = type("Own", (), {"__array_interface__": np.zeros(1, aligned).__array_interface__})()
    assert a.dtype == np.asarray(numpys_own).dtype
    assert a["value"].tolist() == [0.0, 1.0, 2.0, 3.0] and a["ok"].tolist() == [True, False, True, False]
    # The padding bytes are the Rust field's, set to 0.
    assert a.view(np.uint8).reshape(4, 8)[:, 5:].tolist() == [[0, 0, 0]] * 4
    # NumPy's own aligned arrays are read as the same records, the other way.
    b = np.zeros(3, aligned)
    b["value"] = [1.5, 2.5, 3.5]
    b["ok"] = [False, True, True]
    assert fx.host_flagged(b) == [(1.5, False), (2.5, True), (3.5, True)]
    assert fx.host_flagged(a) == [(0.0, True), (1.0, False), (2.0, True), (3.0, False)]
    # Unaligned, the same fields are another record; so is a named field where the
    # record has padding.
    expected = re.escape("[('value', '<f4'), ('ok', '|b1'), ('', '|V3')]")
    with pytest.raises(
        TypeError,
        match=r"received a writable array of '\|V5'.*\(wrong element type: records "
        + re.escape("[('value', '<f4'), ('ok', '|b1')]")
        + f", not {expected}\\)",
    ):
        fx.host_flagged(np.zeros(3, np.dtype([("value", "<f4"), ("ok", "?")])))
    # Elements that are no records are named as such.
    with pytest.raises(TypeError, match=rf"received a writable array of '<f8'.*\(wrong element type: not records {expected}\)"):
        fx.host_flagged(np.zeros(3))
    with pytest.raises(TypeError, match=r"record layout .*\('spare', '\|u1', \(3,\)\)"):
        fx.host_flagged(np.zeros(3, np.dtype([("value", "<f4"), ("ok", "?"), ("spare", "u1", (3,))])))


def test_empty_host_arrays():
    a = np.asarray(fx.HostMatrix(0, 4))
    assert a.shape == (0, 4) and a.size == 0
    v = cai.as_array(fx.HostMatrix(0, 4))
    assert v.nbytes == 0 and v.byte_bounds[0] == v.byte_bounds[1]


def test_device_dict_has_every_required_key():
    d = fx.DeviceMatrix(DEVICE, 12, [3, 4]).__cuda_array_interface__
    assert d == {
        "shape": (3, 4),
        "typestr": "<f4",
        "data": (DEVICE, False),
        "version": 3,
        "strides": None,
        "stream": None,
    }


def test_explicit_strides_are_exported_unless_c_contiguous():
    t = fx.DeviceMatrix(DEVICE, 12, [4, 3], strides=[4, 16]).__cuda_array_interface__
    assert t["strides"] == (4, 16)
    c = fx.DeviceMatrix(DEVICE, 12, [3, 4], strides=[16, 4]).__cuda_array_interface__
    assert c["strides"] is None


@pytest.mark.parametrize("stream", [1, 2, 0x5000])
def test_streams_are_exported_never_zero(stream):
    d = fx.DeviceMatrix(DEVICE, 4, [4], stream=stream).__cuda_array_interface__
    assert d["stream"] == stream


def test_stream_zero_cannot_be_set():
    with pytest.raises(ValueError, match="stream: 0 is disallowed"):
        fx.DeviceMatrix(DEVICE, 4, [4], stream=0)


def test_pointer_and_stream_are_read_fresh_on_every_access():
    d = fx.DeviceMatrix(DEVICE, 4, [4], stream=1)
    assert d.__cuda_array_interface__["data"][0] == DEVICE
    d.reallocate(DEVICE + 4096)
    d.set_stream(0x9000)
    fresh = d.__cuda_array_interface__
    assert fresh["data"][0] == DEVICE + 4096 and fresh["stream"] == 0x9000


def test_readonly_device_export():
    d = fx.DeviceMatrix(DEVICE, 4, [4], readonly=True).__cuda_array_interface__
    assert d["data"] == (DEVICE, True)


def test_version_2_export_has_no_stream_key():
    d = fx.DeviceV2(DEVICE, 3).__cuda_array_interface__
    assert d["version"] == 2 and "stream" not in d and d["typestr"] == "<i4"


def test_empty_device_array_exports_null_pointer():
    d = fx.DeviceMatrix(DEVICE, 0, [0, 4]).__cuda_array_interface__
    assert d["data"] == (0, False) and d["shape"] == (0, 4)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: fx.HostMatrix(2**33, 2**33), OverflowError, r"rows x cols: 8589934592 x 8589934592 does not fit usize"),
        (lambda: fx.HostCloud(2**63), OverflowError, r"n x 3: 9223372036854775808 x 3 does not fit usize"),
        (lambda: fx.AlignedVector(2**64 - 1), OverflowError, r"n: 18446744073709551615 \+ 16 does not fit usize"),
        (lambda: fx.DeviceCloud(0x1000, 2**62), OverflowError, r"n x 12: 4611686018427387904 x 12 does not fit usize"),
        (lambda: fx.DeviceCloud(2**64 - 100, 10), OverflowError, r"address: 0xffffffffffffff9c \+ 12 x 10 \+ 256"),
        (lambda: fx.BenchMatrix(0x1000, 2**33, 2**33), OverflowError, r"rows x cols: 8589934592 x 8589934592"),
        (lambda: fx.HostMatrix(2**31, 2**31), MemoryError, r"cannot allocate 4611686018427387904 elements"),
        (lambda: fx.Particles(2**62), MemoryError, r"cannot allocate 4611686018427387904 elements"),
    ],
)
def test_fixture_sizes_that_cannot_be_are_errors_not_panics(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_out_of_buffer_shape_is_refused():
    d = fx.DeviceMatrix(DEVICE, 4, [3, 4])
    with pytest.raises(ValueError, match="shape: .*reaches bytes 0 to 48"):
        d.__cuda_array_interface__


def test_mask_is_an_object_exporting_the_interface():
    m = fx.MaskedDevice(DEVICE, DEVICE + 4096, 3)
    d = m.__cuda_array_interface__
    mask = d["mask"]
    assert mask.__cuda_array_interface__["typestr"] == "|b1"
    assert mask.__cuda_array_interface__["data"][0] == DEVICE + 4096
    assert mask.owner is m
    v = cai.as_cuda_array(m)
    assert v.mask is not None and cai.as_cuda_array(v.mask).shape == (3,)


def test_named_device_arrays_are_views_that_keep_the_parent_alive():
    cloud = fx.DeviceCloud(DEVICE, 5)
    xyz = cloud.xyz
    assert isinstance(xyz.__cuda_array_interface__, dict)
    assert xyz.shape == (5, 3) and xyz.typestr == "<f4" and xyz.ptr == DEVICE
    assert xyz.stream == 0x7000
    assert cloud.rgb.typestr == "|u1" and cloud.rgb.shape == (5, 3)
    assert not hasattr(cloud, "__cuda_array_interface__")
    ref = weakref.ref(cloud)
    del cloud
    gc.collect()
    assert ref() is not None, "the view keeps its parent alive"
    assert xyz.owner is ref()
    del xyz
    gc.collect()
    assert ref() is None


def test_named_device_arrays_follow_the_export_options():
    before = cai.configure()
    try:
        cloud = fx.DeviceCloud(DEVICE, 2)
        cai.configure(export_stream="none")
        assert cloud.xyz.stream is None and cloud.xyz.__cuda_array_interface__["stream"] is None
        cai.configure(export_stream="report", export_version=2)
        assert cloud.xyz.stream is None
        cai.configure(export_version=3)
        assert cloud.xyz.stream == 0x7000
    finally:
        cai.configure(**before)


def test_named_device_arrays_follow_the_objects_own_export_options():
    before = cai.configure()
    try:
        cloud = fx.DeviceCloud(DEVICE, 2)
        cloud.set_options(stream_none=True)
        assert cloud.xyz.stream is None and cloud.rgb.__cuda_array_interface__["stream"] is None
        cloud.set_options(version=2)
        assert cloud.xyz.stream is None and cloud.xyz.version == 2
        # The object's own options win over the process-wide ones, both ways.
        cloud.set_options(stream_none=False)
        cai.configure(export_stream="none")
        assert cloud.xyz.stream == 0x7000
        cloud.set_options()
        assert cloud.xyz.stream is None
        cai.configure(export_stream="report")
        # A view keeps the options it was made with.
        cloud.set_options(stream_none=True)
        view = cloud.xyz
        cloud.set_options()
        assert view.stream is None and cloud.xyz.stream == 0x7000
    finally:
        cai.configure(**before)


def test_named_host_arrays_share_memory_with_rust():
    cloud = fx.HostCloud(4)
    xyz = np.asarray(cloud.xyz)
    ids = np.asarray(cloud.ids)
    assert xyz.shape == (4, 3) and xyz.dtype == np.float32
    np.testing.assert_array_equal(ids, np.arange(4, dtype=np.uint32))
    assert np.shares_memory(xyz, np.asarray(cloud.xyz))


def test_derived_dlpack_signatures_show_their_defaults():
    import inspect

    for obj in (fx.DeviceMatrix(DEVICE, 12, [3, 4], stream=1), fx.Keywords()):
        assert str(inspect.signature(obj.__dlpack__)) == "(*, stream=None, max_version=None, dl_device=None, copy=None)"


def test_arrays_named_by_keywords_records_of_tuple_structs_and_shared_nested_arrays():
    k = fx.Keywords()
    # Raw names in Rust (`r#type`, `r#in`) are plain properties in Python.
    assert {"type", "in", "shared"} <= set(type(k).__dict__)
    np.testing.assert_array_equal(np.asarray(k), [1.0, 2.0])
    # A tuple struct's fields are named by their place in the descr, so that NumPy's own
    # name for the padding between them (f1) is not one of theirs.
    assert k.type.descr == [("f0", "|u1"), ("", "|V3"), ("f2", "<f4")]
    pairs = np.asarray(k.type)
    assert pairs.dtype.names == ("f0", "f1", "f2") and pairs.dtype.itemsize == 8
    assert pairs["f0"].tolist() == [1, 2] and pairs["f2"].tolist() == [0.5, 1.5]
    assert np.from_dlpack(k).tolist() == [1.0, 2.0]
    # A nested array owned by the struct is writable; one behind an Arc, shared with
    # other holders, is read-only.
    owned = getattr(k, "in")
    assert not owned.readonly and np.asarray(owned).flags.writeable
    assert k.shared.readonly and not np.asarray(k.shared).flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(k.shared)[0] = 1.0


def test_export_does_not_leak():
    d = fx.DeviceMatrix(DEVICE, 12, [3, 4], stream=1)
    before = sys.getrefcount(d)
    for _ in range(10_000):
        d.__cuda_array_interface__
    assert sys.getrefcount(d) == before


class _Stored:
    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


@pytest.mark.parametrize("cls, attr", [(cai.CudaArray, "__cuda_array_interface__"), (cai.HostArray, "__array_interface__")])
def test_the_views_interface_attribute_is_a_read_only_c_getter(cls, attr):
    descriptor = cls.__dict__[attr]
    assert type(descriptor).__name__ == "getset_descriptor"
    assert descriptor.__doc__.startswith("The view's own interface dict")
    for other in (object(), 3, np.zeros(2)):
        with pytest.raises(TypeError, match=f"'{attr}'.*doesn't apply to a"):
            descriptor.__get__(other, type(other))
    view = cai.as_array(np.zeros(3)) if cls is cai.HostArray else cai.as_cuda_array(
        _Stored({"shape": (3,), "typestr": "<f8", "data": (DEVICE, False), "version": 3})
    )
    with pytest.raises(AttributeError, match="not writable"):
        setattr(view, attr, {})
    with pytest.raises(AttributeError, match="not writable"):
        delattr(view, attr)


def test_every_read_of_a_views_dict_is_a_new_copy_whatever_the_last_did_to_its_own():
    # The first read builds the view's dict and later ones copy it; a record view's and a
    # masked view's dicts hold lists and masks, and are built anew on each read.
    plain = {"shape": (2, 3), "typestr": "<f4", "data": (DEVICE, False), "version": 3, "stream": 7}
    record = {"shape": (4,), "typestr": "|V8", "descr": [("a", "<f4"), ("b", "<i4")], "data": (DEVICE, True), "version": 3}
    for desc in (plain, record):
        view = cai.as_cuda_array(_Stored(desc), sync=False)
        first = view.__cuda_array_interface__
        expected = dict(first, descr=list(first["descr"])) if "descr" in first else dict(first)
        for _ in range(3):
            d = view.__cuda_array_interface__
            assert d == expected and d is not first
            d["shape"] = (99,)
            d.pop("data")
            if "descr" in d:
                d["descr"].append(("c", "<f8"))
    masked = cai.as_cuda_array(fx.MaskedDevice(DEVICE, DEVICE + 4096, 3))
    dicts = [masked.__cuda_array_interface__ for _ in range(3)]
    assert all(d["mask"].__cuda_array_interface__["data"][0] == DEVICE + 4096 for d in dicts)
    assert dicts[0] is not dicts[1] and dicts[0] == dicts[1]
    host = cai.as_array(np.arange(6, dtype=np.int16).reshape(2, 3))
    copies = [host.__array_interface__ for _ in range(3)]
    copies[0]["shape"] = (6,)
    assert copies[1]["shape"] == (2, 3) and host.__array_interface__["shape"] == (2, 3)
    np.testing.assert_array_equal(np.asarray(host), np.arange(6, dtype=np.int16).reshape(2, 3))


def test_an_export_version_other_than_2_or_3_is_refused():
    for version in (0, 1, 4, 7):
        d = fx.OptionsDevice(DEVICE, 4, 5, version=version)
        message = rf"export_version: {version} is not 2 or 3 \(the object's ExportOptions\)"
        with pytest.raises(ValueError, match=message):
            d.__cuda_array_interface__
        with pytest.raises(ValueError, match=message):
            d.__dlpack__()
    for version in (None, 2, 3):
        assert fx.OptionsDevice(DEVICE, 4, 5, version=version).__cuda_array_interface__["version"] == (version or 3)


def test_no_export_while_a_method_changes_the_object():
    m = fx.DeviceMatrix(DEVICE, 12, [3, 4])
    reads = [lambda: m.__cuda_array_interface__, lambda: m.__dlpack__(), lambda: m.__dlpack_device__()]
    for read in reads:
        with pytest.raises(BufferError, match="a 'DeviceMatrix' cannot export its memory while a method that changes it"):
            m.while_changing(read)
    assert m.__cuda_array_interface__["shape"] == (3, 4)
