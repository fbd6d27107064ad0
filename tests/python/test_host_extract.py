"""Host array arguments (`PyHostArray*`): NumPy, `__array_interface__` producers, cai
views, derived host containers and DLPack CPU producers, read through safe slices and
`ndarray` views; and the views of other modules being `cai`'s own classes."""

import subprocess
import sys
import textwrap

import threading

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import OnlyDLPack, Producer, cai_dict


def address(a):
    return a.__array_interface__["data"][0]


def test_numpy_in_rust_reads_and_writes_the_same_memory():
    x = np.arange(6, dtype=np.float64)
    assert fx.host_sum(x) == 15.0
    assert fx.host_sum(x.reshape(2, 3)) == 15.0
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = address(m)
    fx.host_scale(m, 2.0)
    assert m.tolist() == [[0, 2, 4], [6, 8, 10]] and address(m) == before
    a, s, strides, ro, n = fx.host_describe(m)
    assert (a, s, strides, ro, n) == (before, [2, 3], [12, 4], False, 6)


def test_zero_d_and_empty_arrays():
    assert fx.host_sum(np.array(2.5)) == 2.5
    assert fx.host_sum(np.zeros((0, 5))) == 0.0
    fx.host_scale(np.zeros((0, 3), dtype=np.float32), 2.0)
    assert fx.host_nd_elements(np.zeros((4, 0), dtype=np.int64)) == []


def test_every_host_producer_is_accepted():
    m = fx.HostMatrix(2, 3)  # a derived host container
    a, shape, *_ = fx.host_describe(m)
    assert shape == [2, 3] and a == m.address()
    fx.host_scale(m, 3.0)
    assert m.get(1, 2) == 15.0
    view = cai.as_array(np.ones((2, 2), dtype=np.float32))
    assert fx.host_describe(view)[1] == [2, 2]
    cloud = fx.HostCloud(2)
    assert fx.host_describe(cloud.xyz)[1] == [2, 3]
    # any object with __array_interface__
    backing = np.arange(4, dtype=np.float64)
    producer = Producer(dict(backing.__array_interface__), host=True)
    assert fx.host_sum(producer) == 6.0


def test_a_dlpack_cpu_producer_is_accepted():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jnp.arange(12, dtype=jnp.int32).reshape(3, 4), cpu)
    assert not hasattr(x, "__array_interface__")
    assert fx.host_nd_rows(x) == np.arange(12).reshape(3, 4).tolist()


def test_dlpack_carries_read_only_and_writes_reach_the_producer():
    ro = np.arange(6, dtype=np.float32).reshape(2, 3)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        fx.host_scale(OnlyDLPack(ro), 2.0)
    rw = np.arange(6, dtype=np.float32).reshape(2, 3)
    fx.host_scale(OnlyDLPack(rw), 2.0)
    assert rw.tolist() == [[0, 2, 4], [6, 8, 10]]


def test_checks_and_their_messages():
    with pytest.raises(TypeError, match=r"expected a host array of '<f8', received .* '<f4' .*wrong element type"):
        fx.host_sum(np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match=r"with 2 dimensions.*wrong number of dimensions"):
        fx.host_describe(np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match="wrong element type"):
        fx.host_sum(np.zeros(3, dtype=">f8"))
    ro = np.zeros((2, 2), dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match=r"expected a writable host array .*read-only"):
        fx.host_scale(ro, 1.0)
    with pytest.raises(TypeError, match=r"expected a host array of '<f8', received \[1.0\] \(list\) \(an object with __array_interface__"):
        fx.host_sum([1.0])


def test_device_memory_is_refused_with_the_way_out():
    device = Producer(cai_dict(shape=(3,), typestr="<f8"))
    with pytest.raises(TypeError, match=r"__cuda_array_interface__, CUDA memory: take it with a device array argument, PyCudaArray, or copy it to the host first"):
        fx.host_sum(device)

    class DeviceDLPack:
        called = False

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            DeviceDLPack.called = True
            raise AssertionError("a device tensor must not be exported for a host argument")

    with pytest.raises(TypeError, match="DLPack device is CUDA memory"):
        fx.host_sum(DeviceDLPack())
    assert not DeviceDLPack.called


def test_a_slice_needs_c_order_and_says_so():
    x = np.arange(6, dtype=np.float64)
    with pytest.raises(ValueError, match=r"as_slice: the <f8 array of shape \(3,\) with strides \(16,\) .*not C-contiguous"):
        fx.host_sum(x[::2])
    m = np.zeros((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="as_slice_mut: .*not C-contiguous"):
        fx.host_scale(m.T, 2.0)


def test_unaligned_memory_is_refused():
    raw = np.zeros(9 * 8, dtype=np.uint8)
    unaligned = raw[1 : 1 + 8 * 8].view(np.float64)
    assert address(unaligned) % 8 == 1
    with pytest.raises(ValueError, match="not aligned to 8 bytes"):
        fx.host_sum(unaligned)
    with pytest.raises(ValueError, match="not aligned"):
        fx.host_nd_elements(raw[1 : 1 + 8 * 8].view(np.int64))


def test_bools_must_be_zero_or_one():
    assert fx.host_bools(np.array([True, False, True])) == [True, False, True]
    bad = np.array([0, 2, 1], dtype=np.uint8).view(np.bool_)
    with pytest.raises(ValueError, match="bool element holds the byte 2"):
        fx.host_bools(bad)
    particles = fx.Particles(4)
    assert fx.host_alive(particles) == [True, False, True, False]
    records = np.asarray(particles).copy()
    assert fx.host_alive(records) == [True, False, True, False]
    raw = records.view(np.uint8).reshape(4, -1)
    raw[3, fx.Particles.layout()[1][3][1]] = 7  # the `alive` byte of particle 3
    with pytest.raises(ValueError, match="byte 7"):
        fx.host_alive(records)


def test_bools_broadcast_along_an_axis_are_checked_once():
    # One byte behind 2**60 elements: the check reads it once, not once per index.
    huge = np.lib.stride_tricks.as_strided(np.array([True]), shape=(2**30, 2**30), strides=(0, 0))
    assert fx.host_nd_first_bool(huge) is True
    byte = np.array([2], dtype=np.uint8).view(np.bool_)
    with pytest.raises(ValueError, match="bool element holds the byte 2"):
        fx.host_nd_first_bool(np.lib.stride_tricks.as_strided(byte, shape=(2**30, 2**30), strides=(0, 0)))
    # The other axes are read in full: the bad byte is the last element's.
    rows = np.array([[1, 1, 0], [0, 1, 3]], dtype=np.uint8).view(np.bool_)
    spread = np.lib.stride_tricks.as_strided(rows, shape=(2, 2**40, 3), strides=(3, 0, 1))
    with pytest.raises(ValueError, match="byte 3"):
        fx.host_nd_first_bool(spread)
    assert fx.host_nd_first_bool(spread[:, :, :2]) is True


def test_bools_whose_elements_overlap_are_checked_once_per_address():
    # 2**28 indices over 32 KiB: each address the elements start at is read once, through
    # the set of those addresses (element by element, this took hours).
    b = np.ones(2 * 2**14, bool)
    assert fx.host_nd_first_bool(np.lib.stride_tricks.as_strided(b, shape=(2**14, 2**14), strides=(1, 1))) is True
    # Only the bytes elements reach count: with strides of 2, odd bytes are not elements.
    raw = np.ones(4 * 2**10, np.uint8)
    raw[1::2] = 7
    even = np.lib.stride_tricks.as_strided(raw.view(bool), shape=(2**10, 2**10), strides=(2, 2))
    assert fx.host_nd_first_bool(even) is True
    raw[3000] = 9
    with pytest.raises(ValueError, match="bool element holds the byte 9"):
        fx.host_nd_first_bool(even)
    # Negative strides reach the same addresses from the other end.
    raw[3000] = 1
    raw[0] = 5
    back = np.lib.stride_tricks.as_strided(raw[4092:].view(bool), shape=(2**10, 2**10), strides=(-2, -2))
    with pytest.raises(ValueError, match="bool element holds the byte 5"):
        fx.host_nd_first_bool(back)
    raw[0] = 1
    assert fx.host_nd_first_bool(back) is True
