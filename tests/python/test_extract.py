"""Typed extractors of #[pyfunction] arguments (cai_py::PyCudaArray)."""

import functools
import sys

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import Producer, cai_dict, host_backed

PTR = 0x7F00_0000_0000


def test_accepts_any_producer():
    d = cai_dict(shape=(3, 4), ptr=PTR)
    expected = (PTR, [3, 4], [16, 4], False, None)
    assert fx.describe_f32(Producer(d)) == expected
    assert fx.describe_f32(cai.from_cuda_array_interface(d)) == expected
    assert fx.describe_f32(fx.DeviceMatrix(PTR, 12, [3, 4])) == expected
    assert fx.describe_f32(fx.DeviceMatrix(PTR, 12, [4, 3]).__cuda_array_interface__ and Producer(cai_dict(shape=(4, 3))))[1] == [4, 3]


def test_a_writing_argument_refuses_elements_sharing_memory():
    # A broadcast axis (stride 0 over several elements): the writes of its elements race.
    d = cai_dict(shape=(3, 4), ptr=PTR, strides=(0, 4))
    with pytest.raises(BufferError, match=r"strides: \(0, 4\) give axis 0 \(of 3 elements\) stride 0, so its elements share memory; expected a writable CUDA array of '<f4'"):
        fx.add_into(Producer(d), Producer(cai_dict(shape=(3, 4), ptr=PTR + 4096)))
    # Reading it is fine, and so is stride 0 on an axis of one element.
    assert fx.describe_f32(Producer(d))[2] == [0, 4]
    one = cai_dict(shape=(1, 4), ptr=PTR, strides=(0, 4))
    assert fx.add_into(Producer(one), Producer(cai_dict(shape=(1, 4), ptr=PTR + 4096))) is not None


def test_fixed_dimensions():
    assert fx.dims_f32_2d(Producer(cai_dict(shape=(5, 2)))) == [5, 2]
    with pytest.raises(TypeError, match=r"expected a CUDA array of '<f4' with 2 dimensions, received a writable array of '<f4' with shape \(5,\) \(wrong number of dimensions\)"):
        fx.dims_f32_2d(Producer(cai_dict(shape=(5,))))


def test_wrong_element_type():
    with pytest.raises(TypeError, match=r"expected a CUDA array of '<f4', received a writable array of '<f8' with shape \(4,\) \(wrong element type\)"):
        fx.describe_f32(Producer(cai_dict(typestr="<f8")))
    with pytest.raises(TypeError, match="wrong element type"):
        fx.describe_f32(Producer(cai_dict(typestr=">f4")))


def test_error_names_the_argument_where_python_supports_notes():
    with pytest.raises(TypeError) as info:
        fx.describe_f32(Producer(cai_dict(typestr="<i4")))
    if sys.version_info >= (3, 11):
        assert any("'x'" in note for note in info.value.__notes__)


def test_a_device_pointer_not_aligned_for_the_elements_is_refused():
    # A kernel would fault on it; host memory is checked where Rust takes a slice.
    with pytest.raises(ValueError, match=r"^data: 0x7f0000000001 is not aligned to 4 bytes, as '<f4' elements"):
        fx.describe_f32(Producer(cai_dict(ptr=PTR + 1)))
    assert fx.describe_f32(Producer(cai_dict(ptr=PTR + 4)))[0] == PTR + 4
    # A complex64 is read as CUDA's float2, aligned to its whole 8 bytes.
    with pytest.raises(ValueError, match=r"^data: 0x7f0000000004 is not aligned to 8 bytes, as '<c8' elements"):
        fx.complex64_address(Producer(cai_dict(typestr="<c8", ptr=PTR + 4)))
    assert fx.complex64_address(Producer(cai_dict(typestr="<c8", ptr=PTR + 8))) == PTR + 8
    # An empty array has no element to read, wherever it points.
    assert fx.describe_f32(Producer(cai_dict(shape=(0,), ptr=0)))[0] == 0
    assert fx.describe_f32(Producer(cai_dict(shape=(0, 3), ptr=PTR + 1)))[1] == [0, 3]


def test_readonly_array_refused_for_writing():
    with pytest.raises(BufferError, match=r"expected a writable CUDA array of '\|u1' with 1 dimension, received a read-only array"):
        fx.touch_u8(Producer(cai_dict(typestr="|u1", readonly=True)))
    assert fx.touch_u8(Producer(cai_dict(typestr="|u1"))) == 4
    # read-only extraction accepts both
    assert fx.describe_f32(Producer(cai_dict(readonly=True)))[3] is True


def test_not_a_producer():
    with pytest.raises(TypeError, match=r"expected a CUDA array of '<f4', received array\(\[0\., 0\.\]\) \(ndarray\)"):
        fx.describe_f32(np.zeros(2))
    with pytest.raises(TypeError, match=r"received None \(NoneType\)"):
        fx.describe_f32(None)


def test_invalid_dict_errors_pass_through():
    with pytest.raises(ValueError, match="stream: 0 is disallowed"):
        fx.describe_f32(Producer(cai_dict(stream=0)))


def test_strides_in_whole_elements():
    assert fx.element_strides_f64_2d(Producer(cai_dict(typestr="<f8", shape=(3, 2), strides=(8, 24)))) == [1, 3]
    assert fx.element_strides_f64_2d(Producer(cai_dict(typestr="<f8", shape=(3, 2), strides=(-16, 8), ptr=PTR + 64))) == [-2, 1]
    with pytest.raises(ValueError, match="strides: .* are not whole multiples of the element size 8"):
        fx.element_strides_f64_2d(Producer(cai_dict(typestr="<f8", shape=(3, 2), strides=(12, 4))))


def test_overlapping_read_write_arguments_are_refused():
    whole = Producer(cai_dict(shape=(8,)))
    tail = Producer(cai_dict(shape=(4,), ptr=PTR + 16))
    elsewhere = Producer(cai_dict(shape=(8,), ptr=PTR + 4096))
    with pytest.raises(
        BufferError,
        match=rf"^bytes 0x{PTR + 16:x}..0x{PTR + 32:x} overlap bytes 0x{PTR:x}..0x{PTR + 32:x} of an earlier array "
        r"argument of this call \(read-write, the 1st that reaches memory\); a read-write and a read-only argument "
        r"may not share memory",
    ):
        fx.add_into(whole, tail)
    with pytest.raises(BufferError, match=r"overlap .*\(read-write, the 1st .*a read-write and a read-only argument"):
        fx.add_into(whole, whole)
    # Empty arrays take no memory, so they are not counted.
    empty = Producer(cai_dict(shape=(0,), ptr=0))
    with pytest.raises(BufferError, match=r"of an earlier array argument of this call \(read-only, the 1st that"):
        fx.add_into_three(empty, whole, whole)
    with pytest.raises(BufferError, match=r"of an earlier array argument of this call \(read-only, the 2nd that"):
        fx.add_into_three(elsewhere, tail, whole)
    assert fx.add_into(whole, elsewhere) == (8, 8)
    # Two read-only arguments may overlap.
    assert fx.sum_lengths(whole, tail) == 12
    # Adjacent ranges do not overlap; the registry is emptied after each call.
    assert fx.add_into(Producer(cai_dict(shape=(4,))), tail) == (4, 4)
    assert fx.add_into(whole, elsewhere) == (8, 8)


def test_arguments_whose_elements_interleave_do_not_overlap():
    # The real and imaginary parts of a complex array, and the columns of a matrix, reach
    # the same byte range but share no byte.
    real = Producer(cai_dict(shape=(4,), strides=(8,)))
    imag = Producer(cai_dict(shape=(4,), strides=(8,), ptr=PTR + 4))
    assert fx.add_into(real, imag) == (4, 4)
    columns = [Producer(cai_dict(shape=(5, 1), strides=(12, 4), ptr=PTR + 4 * j)) for j in range(3)]
    assert fx.add_into(columns[0], columns[2]) == (5, 5)
    # With a stride of 12 from the imaginary part's start, an element meets the real
    # part's third (at PTR + 16); a row and a column share an element.
    other_stride = Producer(cai_dict(shape=(4,), strides=(12,), ptr=PTR + 4))
    with pytest.raises(BufferError, match="overlap .* of an earlier array argument of this call"):
        fx.add_into(real, other_stride)
    row = Producer(cai_dict(shape=(3,), ptr=PTR + 12))
    with pytest.raises(BufferError, match="overlap .* of an earlier array argument of this call"):
        fx.add_into(columns[1], row)


def test_empty_arrays_never_overlap():
    empty = Producer(cai_dict(shape=(0,), ptr=0))
    assert fx.add_into(empty, empty) == (0, 0)

def test_a_call_is_told_by_the_python_frame_it_is_made_from():
    # As the README says: a call made from an argument's property through a Python
    # function is another call; one made with no Python frame between (here the getter
    # is a functools.partial of the extractor function itself) counts as the outer call.
    out = Producer(cai_dict(shape=(8,)))
    elsewhere = cai_dict(shape=(4,), ptr=PTR + 4096)
    inner = []

    def through_python(_):
        inner.append(fx.add_into(Producer(cai_dict(shape=(8,))), Producer(elsewhere)))
        return elsewhere

    class ThroughPython:
        __cuda_array_interface__ = property(through_python)

    assert fx.add_into(out, ThroughPython()) == (8, 4)
    assert inner == [(8, 4)]

    class ThroughC:
        __cuda_array_interface__ = property(functools.partial(fx.add_into, Producer(cai_dict(shape=(8,)))))

    with pytest.raises(
        BufferError,
        match=r"overlap .* of an earlier array argument of this call .*two read-write arguments may not share "
        r"memory \(a call made from another with no Python frame between, as through functools.partial, counts as "
        r"that call\)",
    ):
        fx.add_into(out, ThroughC())



def test_writes_reach_the_producer_memory():
    arr = np.zeros(5, np.float32)
    fx.fill_host_backed(host_backed(arr), 2.5)
    np.testing.assert_array_equal(arr, np.full(5, 2.5, np.float32))
    ro = np.zeros(5, np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError):
        fx.fill_host_backed(host_backed(ro), 1.0)
    assert not ro.any()
    # An empty view exports pointer 0: the fixture makes no slice of it.
    empty = cai.as_cuda_array(host_backed(np.zeros(0, np.float32)), check_pointers=False)
    assert empty.__cuda_array_interface__["data"] == (0, False)
    fx.fill_host_backed(empty, 1.0)


def test_integer_stream_is_synchronized_or_refused():
    p = Producer(cai_dict(stream=0x5000))
    try:
        fx.describe_f32(p)
    except cai.CudaDriverError as e:  # the same class from every module built on cai-py
        assert "stream: cannot synchronize on stream 20480" in str(e)


def test_refcount_after_failed_extractions():
    p = Producer(cai_dict(typestr="<i8"))
    start = sys.getrefcount(p)
    for _ in range(10_000):
        with pytest.raises(TypeError):
            fx.describe_f32(p)
    assert sys.getrefcount(p) == start
