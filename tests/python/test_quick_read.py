"""The reader's quick path (exact dicts of exact values, read without running Python code)
gives exactly what the full reader gives, and declines everything else."""

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis (tests/python/requirements.txt)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cai  # noqa: E402
import cai_fixtures as fx  # noqa: E402

# The full reader warns about versions above 3 (its own tests check the warning).
pytestmark = pytest.mark.filterwarnings("ignore:version:RuntimeWarning")

PTR = 0x7F00_0000_0000


class Int(int):
    pass


class Str(str):
    pass


def base():
    return {"shape": (4, 5), "typestr": "<f4", "data": (PTR, False), "version": 3, "strides": None, "stream": None}


def agree(desc, host=False):
    quick, full = fx.both_reads(desc, host)
    if quick is not None:
        assert quick == full, (desc, quick, full)
    return quick, full


def test_the_common_dicts_take_the_quick_path():
    for desc in [
        base(),
        {**base(), "strides": (20, 4)},
        {**base(), "stream": 1},
        {**base(), "stream": 2**40},
        {**base(), "version": 2, "stream": None},
        {**base(), "descr": [("", "<f4")]},
        {**base(), "mask": None},
        {**base(), "shape": (), "strides": ()},
        {**base(), "shape": (0, 5)},
        {**base(), "data": (PTR, True)},
        {**base(), "shape": (1,) * 6, "strides": (4,) * 6},
    ]:
        quick, full = agree(desc)
        assert quick is not None, desc
    assert agree({k: v for k, v in base().items() if k != "stream"}, host=True)[0] is not None


@pytest.mark.parametrize(
    "change",
    [
        {"version": 4},
        {"version": Int(3)},
        {"version": True},
        {"shape": (Int(4), 5)},
        {"shape": [4, 5]},
        {"shape": (-1, 5)},
        {"shape": (2**64, 5)},
        {"typestr": Str("<f4")},
        {"typestr": "<f\ud800"},
        {"typestr": "<q7"},
        {"data": (PTR, 0)},
        {"data": (Int(PTR), False)},
        {"data": (PTR, False, 1)},
        {"data": (-PTR, False)},
        {"strides": (4,)},
        {"strides": [20, 4]},
        {"stream": 0},
        {"stream": -1},
        {"stream": True},
        {"descr": [("", "<i4")]},
        {"descr": [("a", "<f4")]},
        {"descr": [("", "<f4"), ("", "<f4")]},
        {"descr": ("", "<f4")},
        {"mask": object()},
        {"extra": 1},
        {"data": (1, False), "shape": (2**62, 2**62)},
        # More dimensions than a shape holds inline: the full reader's, which allocates.
        {"shape": (1,) * 7},
        {"shape": (1,) * 6, "strides": (4,) * 7},
    ],
)
def test_the_rest_is_left_to_the_full_reader(change):
    desc = {**base(), **change}
    quick, full = agree(desc)
    assert quick is None, (desc, quick)


def test_a_key_that_is_not_the_interned_string_is_left_to_the_full_reader():
    desc = {Str("shape"): (4, 5), **{k: v for k, v in base().items() if k != "shape"}}
    assert agree(desc)[0] is None
    desc = {"".join(["sha", "pe"]): (4, 5), **{k: v for k, v in base().items() if k != "shape"}}
    assert agree(desc)[0] is None


def test_many_dimensions_read_the_same_either_way():
    for ndim in [6, 7, 12, 32]:
        desc = {**base(), "shape": (2,) * ndim, "strides": tuple(4 * 2**i for i in reversed(range(ndim)))}
        quick, full = agree(desc)
        assert "shape" in full and (quick is None) == (ndim > 6), (ndim, quick, full)
        view = cai.from_cuda_array_interface(desc, sync=False, check_pointers=False)
        assert view.shape == (2,) * ndim and view.strides == desc["strides"]


def test_the_host_interface_leaves_a_stream_to_the_full_reader():
    assert agree(base(), host=True)[0] is None


def test_a_dict_subclass_is_left_to_the_full_reader():
    class D(dict):
        pass

    assert agree(D(base()))[0] is None


ints = st.one_of(
    st.integers(-3, 3), st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63)]),
    st.builds(Int, st.integers(0, 8)), st.booleans(), st.none(),
)
tuples = st.one_of(st.tuples(), st.tuples(ints), st.tuples(ints, ints), st.tuples(ints, ints, ints), st.lists(ints, max_size=3))
typestrs = st.one_of(st.sampled_from(["<f4", ">f8", "|u1", "|b1", "<c8", "|V4", "<q7", "f4", "<f\ud800", ""]), st.builds(Str, st.just("<f4")))
values = {
    "shape": tuples,
    "typestr": typestrs,
    "data": st.one_of(st.tuples(ints, st.one_of(st.booleans(), ints)), tuples),
    "version": ints,
    "strides": st.one_of(st.none(), tuples),
    "stream": ints,
    "descr": st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["", "a"]), typestrs), max_size=2)),
    "mask": st.one_of(st.none(), st.just(object())),
}
dicts = st.fixed_dictionaries({}, optional=values)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dicts, st.booleans())
def test_quick_and_full_reads_agree(desc, host):
    agree(desc, host)
