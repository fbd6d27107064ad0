"""A view keeps its owner alive, and lets it go when dropped."""

import gc
import weakref

import numpy as np

import cai
from producers import Producer, cai_dict, host_backed


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
