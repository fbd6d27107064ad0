"""A view keeps its owner alive, and lets it go when dropped."""

import gc
import weakref

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import Legacy, Producer, cai_dict, host_backed


def test_cuda_view_keeps_owner_alive():
    owner = Producer(cai_dict())
    ref = weakref.ref(owner)
    view = cai.as_cuda_array(owner)
    del owner
    gc.collect()
    assert ref() is not None and view.owner is ref()
    del view
    gc.collect()
    assert ref() is None


def test_host_view_keeps_numpy_array_alive():
    arr = np.arange(10.0)
    ref = weakref.ref(arr)
    view = cai.as_array(arr)
    del arr
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(np.asarray(view), np.arange(10.0))
    del view
    gc.collect()
    assert ref() is None


def test_chained_views_and_numpy_keep_the_chain_alive():
    arr = np.arange(6.0)
    ref = weakref.ref(arr)
    back = np.asarray(cai.as_array(cai.as_array(arr)))
    del arr
    gc.collect()
    assert ref() is not None
    assert back[5] == 5.0
    del back
    gc.collect()
    assert ref() is None


def test_reference_cycle_through_a_view_is_collected():
    owner = Producer(cai_dict())
    owner.view = cai.as_cuda_array(owner)
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def referents(obj):
    """What the collector is shown `obj` holds, its class aside."""
    return [r for r in gc.get_referents(obj) if r is not type(obj)]


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_a_cycle_through_a_dlpack_export_of_cais_own_is_collected(versioned):
    # The object keeps cai.from_dlpack of a view of itself: the view's export holds the
    # view, the imported tensor holds the export, and the collector is shown that link.
    base = np.arange(8.0)

    class Holder:
        pass

    refs = []
    for _ in range(50):
        h = Holder()
        h.__array_interface__ = base.__array_interface__
        view = cai.as_array(h)
        h.back = cai.from_dlpack(view) if versioned else cai.from_dlpack(Legacy(view))
        assert referents(h.back.owner) == [view]
        refs.append(weakref.ref(h))
        del h, view
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    np.testing.assert_array_equal(base, np.arange(8.0))


def test_a_tensor_of_another_producer_shows_the_collector_nothing():
    # NumPy's export holds its array where no collector looks: the tensor visits nothing
    # (a wrong visit would free what is still held).
    arr = np.arange(4.0)
    t = cai.from_dlpack(arr)
    gc.collect()
    assert referents(t.owner) == []
    assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_mask_is_kept_alive():
    mask = Producer(cai_dict(typestr="|b1"))
    ref = weakref.ref(mask)
    view = cai.as_cuda_array(Producer(cai_dict(mask=mask)))
    del mask
    gc.collect()
    assert ref() is not None and view.mask is ref()


def test_view_is_weak_referenceable():
    view = cai.as_cuda_array(host_backed(np.zeros(3, np.float32)))
    assert weakref.ref(view)() is view


class MemoryInTheDict:
    """Makes its memory on each read of its interface and ties it to the dict alone (the
    dict's `'__ref'`), as a NumPy scalar's `__array_interface__` does; `owners` holds weak
    references to the memory of each read."""

    def __init__(self, dtype=np.float64, host=True, **extra):
        self.dtype, self.host, self.extra, self.owners = dtype, host, extra, []

    def _dict(self):
        arr = np.arange(1, 5, dtype=self.dtype)
        self.owners.append(weakref.ref(arr))
        return dict(arr.__array_interface__, __ref=arr, **self.extra)

    @property
    def __array_interface__(self):
        if not self.host:
            raise AttributeError("__array_interface__")
        return self._dict()

    @property
    def __cuda_array_interface__(self):
        if self.host:
            raise AttributeError("__cuda_array_interface__")
        return self._dict()

    def alive(self):
        gc.collect()
        return [r() is not None for r in self.owners]


def _reads():
    def dict_given(p):
        d = p._dict()
        return cai.from_cuda_array_interface(d, p)

    def factory_v1(p):
        # The factory of modules from before v2: the view keeps the dict it is made from.
        return cai._cai._make_view_v1(True, p._dict(), p)

    def factory_v2(p):
        lifeline = p._dict()
        plain = {k: v for k, v in lifeline.items() if k != "__ref"}
        return cai._cai._make_view_v2(True, plain, p, lifeline)

    def factory_v3(p):
        lifeline = p._dict()
        plain = {k: v for k, v in lifeline.items() if k != "__ref"}
        return cai._cai._make_view_v3(True, plain, p, lifeline, 3)

    return {
        "as_array": (True, cai.as_array),
        "as_cuda_array": (False, cai.as_cuda_array),
        "from_cuda_array_interface": (False, dict_given),
        "_make_view_v1": (True, factory_v1),
        "_make_view_v2": (True, factory_v2),
        "_make_view_v3": (True, factory_v3),
        # A module built on cai-py, whose views the package's factory makes.
        "from_rust_in_another_module": (True, fx.rust_as_array),
    }


@pytest.mark.parametrize("name", list(_reads()))
def test_a_view_keeps_the_interface_value_it_was_read_from_alive(name):
    host, read = _reads()[name]
    p = MemoryInTheDict(host=host)
    view = read(p)
    assert p.alive() == [True]
    if host:
        np.testing.assert_array_equal(np.asarray(view), [1.0, 2.0, 3.0, 4.0])
    del view
    assert p.alive() == [False]


def test_a_view_made_for_another_module_reads_a_newer_version_and_quickly():
    # The producer's dict is handed to the package's factory beside the dict cai builds,
    # not inside it: a key of cai's own there made a version-4 dict a ValueError.
    p = Producer(cai_dict(version=4))
    with pytest.warns(RuntimeWarning, match="version: 4 is newer"):
        view = fx.rust_as_cuda_array(p)
    assert type(view) is cai.CudaArray and view.owner is p


def test_a_cycle_through_the_kept_interface_value_is_collected():
    box = []
    p = MemoryInTheDict(box=box)
    box.append(cai.as_array(p))  # the view holds the dict, which holds the box
    p.extra = {}
    ref = weakref.ref(box[0])
    del box
    assert p.alive() == [False] and ref() is None


def test_an_argument_keeps_the_interface_value_it_was_read_from_alive_for_the_call():
    p = MemoryInTheDict()
    # host_hold writes x[0] = 1 after `during` returns: into the memory the dict described.
    arr = fx.host_hold(p, lambda: p.owners[0]())
    assert arr.tolist() == [1.0, 2.0, 3.0, 4.0]
    del arr
    assert p.alive() == [False]
    assert fx.host_hold_ro(p, p.alive) == [False, True]
    device = MemoryInTheDict(np.float32, host=False)
    assert fx.device_hold(device, device.alive) == [True]
    assert device.alive() == [False]


def test_a_numpy_scalar_is_read_from_memory_that_stays_alive():
    # Its `__array_interface__` describes a 0-d array made for the read, which only the
    # dict's '__ref' keeps alive.
    view = cai.as_array(np.float64(2.5))
    reused = [np.full(1, 7.0) for _ in range(50)]
    assert np.asarray(view)[()] == 2.5
    assert fx.host_sum(np.float64(2.5)) == 2.5
    assert fx.host_hold_ro(np.float64(2.5), lambda: [np.array(7.0) for _ in range(20)]) == [7.0] * 20


def test_a_numpy_scalar_is_not_a_writing_argument():
    # Writes would reach the 0-d copy made for the read, never the scalar.
    # From NumPy 2.5 the scalar's interface says so itself: read-only.
    with pytest.raises(
        BufferError,
        match=r"received np.float64\(2.5\) \(float64\), a NumPy scalar: its __array_interface__ describes a copy"
        r"|received a read-only array of '<f8' with shape \(\) \(the producer marked it read-only\)",
    ):
        fx.host_hold(np.float64(2.5), lambda: None)
    # A 0-d array is an array.
    zero_d = np.array(2.5)
    fx.host_hold(zero_d, lambda: None)
    assert zero_d[()] == 1.0
