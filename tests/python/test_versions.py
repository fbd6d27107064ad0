"""Pure-Python producers of every version, each read by its own version's rules."""

import warnings

import pytest

import cai
import cai_fixtures as fx
from producers import Producer, cai_dict

PTR = 0x7F00_0000_0000


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_minimal_dict_of_every_version(version):
    v = cai.as_cuda_array(Producer(cai_dict(shape=(2, 3), version=version)))
    assert v.version == version
    assert v.shape == (2, 3) and v.strides == (12, 4) and v.stream is None
    assert v.is_c_contiguous and not v.is_f_contiguous


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_strides_none_or_absent_mean_c_order(version):
    a = cai.as_cuda_array(Producer(cai_dict(shape=(2, 3), version=version, strides=None)))
    b = cai.as_cuda_array(Producer(cai_dict(shape=(2, 3), version=version)))
    assert a.strides == b.strides == (12, 4)


def test_mask_is_refused_in_version_0():
    mask = Producer(cai_dict(shape=(4,), typestr="|b1", version=0))
    with pytest.raises(ValueError, match="mask: received a mask in a version 0 descriptor"):
        cai.as_cuda_array(Producer(cai_dict(version=0, mask=mask)))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_mask_from_version_1(version):
    mask = Producer(cai_dict(shape=(4,), typestr="|b1", ptr=PTR + 4096, version=version))
    v = cai.as_cuda_array(Producer(cai_dict(version=version, mask=mask)))
    assert v.mask is mask
    # The export holds the mask object, which a consumer reads again; so does the view
    # another module makes (through the package's factory).
    assert v.__cuda_array_interface__["mask"] is mask
    other = fx.rust_as_cuda_array(Producer(cai_dict(version=version, mask=mask)))
    assert type(other) is cai.CudaArray and other.mask is mask
    assert other.__cuda_array_interface__["mask"] is mask


def test_mask_shape_must_match():
    mask = Producer(cai_dict(shape=(5,), typestr="|b1"))
    with pytest.raises(ValueError, match=r"mask: shape \(5,\) does not match the array's shape \(4,\)"):
        cai.as_cuda_array(Producer(cai_dict(mask=mask)))


def test_mask_must_export_the_interface():
    with pytest.raises(TypeError, match="mask: expected None or an object exporting __cuda_array_interface__"):
        cai.as_cuda_array(Producer(cai_dict(mask=[True] * 4)))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_stream_is_refused_before_version_3(version):
    with pytest.raises(ValueError, match=f"stream: received 7 in a version {version} descriptor"):
        cai.as_cuda_array(Producer(cai_dict(version=version, stream=7)))
    # stream None is harmless in every version
    assert cai.as_cuda_array(Producer(cai_dict(version=version, stream=None))).stream is None


def test_stream_zero_is_refused():
    with pytest.raises(ValueError, match="stream: 0 is disallowed"):
        cai.as_cuda_array(Producer(cai_dict(stream=0)))


@pytest.mark.parametrize("stream", [1, 2, 0x5000])
def test_integer_streams_are_kept_without_sync(stream):
    v = cai.as_cuda_array(Producer(cai_dict(stream=stream)), sync=False)
    assert v.stream == stream
    assert v.__cuda_array_interface__["stream"] == stream


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_null_pointer_only_for_empty_arrays(version):
    with pytest.raises(ValueError, match=r"data: pointer 0 \(null\) received for an array of shape \(4,\)"):
        cai.as_cuda_array(Producer(cai_dict(ptr=0, version=version)))
    v = cai.as_cuda_array(Producer(cai_dict(shape=(0, 4), ptr=0, version=version)))
    assert v.size == 0 and v.nbytes == 0


def test_empty_array_reexports_pointer_0():
    v = cai.as_cuda_array(Producer(cai_dict(shape=(0,), ptr=PTR, version=0)))
    assert v.__cuda_array_interface__["data"] == (0, False)


def test_newer_version_with_known_keys_warns_and_reads_by_version_3():
    with pytest.warns(RuntimeWarning, match="version: 4 is newer"):
        v = cai.as_cuda_array(Producer(cai_dict(version=4)))
    assert v.version == 4 and v.shape == (4,)


@pytest.mark.parametrize("version", [4, 2**40])
def test_a_view_made_in_another_module_declares_the_producers_version_and_warns_once(version):
    # A module built on cai-py hands its reading to the package's factory, which reads
    # the dict again: by the rules of version 3, with the declared version passed along.
    import cai_fixtures as fx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v = fx.rust_as_cuda_array(Producer(cai_dict(version=version)))
    assert type(v) is cai.CudaArray and v.version == version
    assert [str(w.message).startswith(f"version: {version} is newer than") for w in caught] == [True]
    assert v.__cuda_array_interface__["version"] == 3


def test_the_factory_refuses_a_version_its_dict_was_not_read_by():
    d = cai_dict(version=2)
    with pytest.raises(ValueError, match=r"^version: 3 is not declared by a dict read by version 2's rules"):
        cai._cai._make_view_v3(False, d, Producer(d), None, 3)
    assert cai._cai._make_view_v3(False, cai_dict(version=3), Producer(d), None, 9).version == 9
    # Its arguments are named when wrong, with the right class.
    make = cai._cai._make_view_v3
    with pytest.raises(ValueError, match=r"^version: -1 \(int\) is not from 0 to 2\*\*64 - 1$"):
        make(False, d, Producer(d), None, -1)
    with pytest.raises(TypeError, match=r"^version: expected an int, received True \(bool\)$"):
        make(False, d, Producer(d), None, True)
    assert make(False, d, Producer(d), None, type("I", (int,), {})(2)).version == 2
    with pytest.raises(TypeError, match=r"^host: expected True or False, received 1 \(int\)$"):
        make(1, d, Producer(d), None, 2)
    with pytest.raises(TypeError, match=r"^host: expected True or False, received 0 \(int\)$"):
        cai._cai._make_view_v2(0, d, Producer(d), None)


def test_newer_version_with_unknown_keys_is_refused():
    with pytest.raises(ValueError, match="version: 4 is newer .* 'events'"):
        cai.as_cuda_array(Producer(cai_dict(version=4, events=[1, 2])))


def test_warning_as_error_propagates():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            cai.as_cuda_array(Producer(cai_dict(version=5)))


def test_reexport_is_version_3_with_concrete_layout():
    src = Producer(cai_dict(shape=(3, 2), version=0, strides=(4, 12)))
    d = cai.as_cuda_array(src).__cuda_array_interface__
    assert d["version"] == 3 and d["strides"] == (4, 12) and d["stream"] is None


def test_record_descr_is_read_and_checked():
    descr = [("a", "<i4"), ("", "|V4"), ("b", "<f8")]
    v = cai.as_cuda_array(Producer(cai_dict(typestr="|V16", descr=descr)))
    assert v.itemsize == 16 and v.kind == "V"
    assert v.__cuda_array_interface__["descr"] == descr
    with pytest.raises(ValueError, match="descr: .* is invalid"):
        cai.as_cuda_array(Producer(cai_dict(typestr="|V8", descr=descr)))


def test_plain_descr_is_accepted():
    v = cai.as_cuda_array(Producer(cai_dict(descr=[("", "<f4")])))
    assert v.descr == [("", "<f4")]
    assert "descr" not in v.__cuda_array_interface__


def test_from_cuda_array_interface_with_and_without_owner():
    owner = object()
    v = cai.from_cuda_array_interface(cai_dict(), owner)
    assert v.owner is owner
    assert cai.from_cuda_array_interface(cai_dict()).owner is None


def test_mapping_that_is_not_a_dict_is_accepted():
    from types import MappingProxyType

    v = cai.from_cuda_array_interface(MappingProxyType(cai_dict(shape=(7,))))
    assert v.shape == (7,)


def test_numpy_integers_are_accepted_as_ints():
    np = pytest.importorskip("numpy")
    v = cai.as_cuda_array(Producer(cai_dict(shape=(np.int64(3), np.uint8(2)))))
    assert v.shape == (3, 2)
