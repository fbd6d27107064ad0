"""Bad input: the documented exception class, a message naming the key and the value."""

import re
import sys

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis (tests/python/requirements.txt)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cai
from producers import Producer, cai_dict

PTR = 0x7F00_0000_0000


def bad(**changes):
    d = cai_dict()
    for k, v in changes.items():
        if v is KeyError:
            del d[k]
        else:
            d[k] = v
    return d


TYPE_ERRORS = [
    (bad(shape=KeyError), "shape: required key is missing"),
    (bad(typestr=KeyError), "typestr: required key is missing"),
    (bad(data=KeyError), "data: required key is missing"),
    (bad(version=KeyError), "version: required key is missing"),
    (bad(shape=[4]), r"shape: expected a tuple of non-negative ints, received \[4\] \(list\)"),
    (bad(shape=(4.0,)), r"shape: expected a tuple of non-negative ints, received 4.0 \(float\)"),
    (bad(shape=(True,)), r"shape: .* received True \(bool\)"),
    (bad(typestr=4), r"typestr: expected a str such as '<f4', received 4 \(int\)"),
    (bad(data=PTR), r"data: expected a \(pointer: int, readonly: bool\) tuple, received \d+ \(int\)"),
    (bad(data=(PTR,)), r"data: expected .* tuple, received \(\d+,\) \(tuple\)"),
    (bad(data=(PTR, 0)), r"data: expected a bool as the read-only flag \(item 1 of .* received 0 \(int\)$"),
    (bad(data=("x", False)), r"data: expected .* received 'x' \(str\)"),
    (bad(version="3"), r"version: expected an int, received '3' \(str\)"),
    (bad(version=3.0), r"version: expected an int, received 3.0 \(float\)"),
    (bad(strides=[4]), r"strides: expected None or a tuple of ints, received \[4\] \(list\)"),
    (bad(stream="1"), r"stream: expected None or an int, received '1' \(str\)"),
    (bad(stream=1.0), r"stream: expected None or an int, received 1.0 \(float\)"),
    (bad(descr="<f4"), r"descr: expected a list of \(name, type\[, shape\]\) tuples, received '<f4' \(str\)"),
]

VALUE_ERRORS = [
    (bad(stream=0), "stream: 0 is disallowed"),
    (bad(stream=-3), "stream: -3 is not a stream"),
    (bad(typestr="<f3"), "typestr: '<f3' is malformed"),
    (bad(typestr="f4"), "typestr: 'f4' is malformed"),
    (bad(typestr=""), "typestr: '' is malformed"),
    (bad(strides=(4, 4)), r"strides: \(4, 4\) has 2 entries, but shape \(4,\) has 1 dimensions"),
    (bad(data=(0, False)), r"data: pointer 0 \(null\) received for an array of shape \(4,\)"),
    (bad(data=(-1, False)), "data: the pointer is negative: -1"),
    (bad(data=(2**64, False)), "data: .* does not fit in 64 bits"),
    (bad(shape=(-1,)), r"shape: \(-1,\) \(tuple\) has a dimension that is negative: -1"),
    (bad(shape=(2**62, 2**62)), r"shape: \(4611686018427387904, 4611686018427387904\) overflows: the number of elements"),
    (bad(shape=(2**60, 2)), r"shape: .* overflows: the number of bytes exceeds isize$"),
    # Bounded as NumPy bounds it, though there is no element to count.
    (bad(shape=(0, 2**62, 2**62)), r"shape: .* overflows: the product of its non-zero dimensions exceeds usize"),
    (bad(shape=(2**60, 0, 2)), r"shape: .* the product of its non-zero dimensions and the item size exceeds isize"),
    # cai counts an item of 0 bytes as 1 (NumPy does not bound these): the elements are too many.
    (bad(shape=(2**63,), typestr="|V0"), r"shape: .* overflows: the number of elements exceeds isize \(cai counts an item of 0 bytes as 1 byte; NumPy does not bound such arrays\)$"),
    (bad(shape=(2**63, 0), typestr="|V0"), r"product of its non-zero dimensions exceeds isize \(cai counts an item of 0 bytes as 1 byte, though the array is empty; NumPy"),
    (bad(strides=(2**62,), shape=(4,)), "strides: .* overflows"),
    (bad(version=-1), "version: -1 is negative"),
    (bad(version=4, stream=None, extra=1), "version: 4 is newer"),
    (bad(descr=[("a",)]), "descr: .* entry 0 has 1 items"),
    (bad(descr=[("a", "<f8")]), "descr: .* is invalid"),
    (bad(data=(2**64 - 8, False)), "data: .*"),
    (
        bad(typestr="|V4", descr=[("\udc80", "<f4")]),
        r"descr: .* entry 0: the name '\\udc80' \(str\) is not valid Unicode text \(a lone surrogate\)",
    ),
    (
        bad(typestr="|V4", descr=[(("t\udc80", "a"), "<f4")]),
        r"descr: .* entry 0: the name \('t\\udc80', 'a'\) \(tuple\) is not valid Unicode text",
    ),
    (
        bad(typestr="|V4", descr=[("a", "<f\udc80")]),
        r"descr: .* field 'a': the type '<f\\udc80' \(str\) is not valid Unicode text \(a lone surrogate\)",
    ),
    (bad(typestr="|O"), r"typestr: '\|O' holds Python object references, which mean nothing in device memory"),
    (bad(typestr="<O8"), r"typestr: '<O8' holds Python object references"),
    (
        bad(typestr="|V16", descr=[("a", "<f8"), ("b", [("o", "|O")])]),
        r"descr: \[\('a', '<f8'\), \('b', \[\('o', '\|O'\)\]\)\] has a field of Python object references",
    ),
]


@pytest.mark.parametrize("desc,message", TYPE_ERRORS, ids=[m[:40] for _, m in TYPE_ERRORS])
def test_type_errors(desc, message):
    with pytest.raises(TypeError, match=message):
        cai.as_cuda_array(Producer(desc))


@pytest.mark.parametrize("desc,message", VALUE_ERRORS, ids=[m[:40] for _, m in VALUE_ERRORS])
def test_value_errors(desc, message):
    with pytest.raises(ValueError, match=message):
        cai.as_cuda_array(Producer(desc))


@pytest.mark.parametrize("value", [None, 3, "dict", [("shape", (4,))], (1, 2)])
def test_non_mapping_is_a_type_error(value):
    with pytest.raises(TypeError, match=r"__cuda_array_interface__: expected a dict, received"):
        cai.as_cuda_array(Producer(value))


@pytest.mark.parametrize("flag", [0, 1, None, "False", 0.0, [False]])
def test_a_read_only_flag_that_is_not_a_bool_is_named(flag):
    expected = "data: expected a bool as the read-only flag (item 1 of the (pointer: int, readonly: bool) tuple), received "
    with pytest.raises(TypeError, match="^" + re.escape(expected + f"{flag!r} ({type(flag).__name__})") + "$"):
        cai.as_cuda_array(Producer(cai_dict(data=(PTR, flag))), check_pointers=False)
    with pytest.raises(TypeError, match="^" + re.escape(expected)):
        cai.as_array(Producer(cai_dict(data=(PTR, flag)), host=True))
    assert cai.validate(cai_dict(data=(PTR, flag))) == [expected + f"{flag!r} ({type(flag).__name__})"]


def test_numpy_bools_are_read_only_flags_too():
    for flag in (np.True_, np.False_):
        v = cai.as_cuda_array(Producer(cai_dict(data=(PTR, flag))), check_pointers=False)
        assert v.readonly is bool(flag) and v.ptr == PTR
        assert cai.validate(cai_dict(data=(PTR, flag))) == []


@pytest.mark.parametrize("desc", [[1], 3, None, "dict", (("shape", (4,)),)])
def test_a_desc_that_is_no_mapping_is_named(desc):
    received = f"{desc!r} ({type(desc).__name__})"
    with pytest.raises(TypeError, match="^" + re.escape(f"desc: expected a __cuda_array_interface__ dict (or another mapping), received {received}") + "$"):
        cai.from_cuda_array_interface(desc)


class Broken:
    """An int-like value whose `__index__` raises."""

    def __index__(self):
        raise ZeroDivisionError("inner detail")

    def __repr__(self):
        return "Broken()"


def test_an_index_that_raises_is_named_with_its_exception():
    raised = r"received Broken\(\) \(Broken\), whose __index__ failed with ZeroDivisionError: inner detail$"
    cases = [
        (dict(shape=(Broken(),)), "shape: expected a tuple of non-negative ints, "),
        (dict(strides=(Broken(),)), "strides: expected None or a tuple of ints, "),
        (dict(data=(Broken(), False)), "data: expected a (pointer: int, readonly: bool) tuple, "),
        (dict(version=Broken()), "version: expected an int, "),
    ]
    for changes, start in cases:
        with pytest.raises(TypeError, match="^" + re.escape(start) + ".*" + raised) as e:
            cai.as_cuda_array(Producer(cai_dict(**changes)), check_pointers=False)
        assert "PanicException" not in repr(e.value)
        assert any(f.endswith("whose __index__ failed with ZeroDivisionError: inner detail") for f in cai.validate(cai_dict(**changes)))
    # An exception without text is named alone; a `__repr__` that must propagate does, and
    # the exception's own text is then not asked for.
    class Quiet:
        def __index__(self):
            raise ZeroDivisionError

        def __repr__(self):
            return "Quiet()"

    with pytest.raises(TypeError, match=r"received Quiet\(\) \(Quiet\), whose __index__ failed with ZeroDivisionError$"):
        cai.as_cuda_array(Producer(cai_dict(shape=(Quiet(),))))
    asked = []

    class Loud(Exception):
        def __str__(self):
            asked.append("str")
            return "loud"

    class Interrupting:
        def __index__(self):
            raise Loud

        def __repr__(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cai.as_cuda_array(Producer(cai_dict(shape=(Interrupting(),))))
    assert asked == []
    # An object with no __index__ at all is only named.
    with pytest.raises(TypeError, match=r"received <object object at 0x[0-9a-f]+> \(object\)$"):
        cai.as_cuda_array(Producer(cai_dict(shape=(object(),))))


def test_every_int_read_names_an_index_that_fails():
    tail = re.escape("Broken() (Broken), whose __index__ failed with ZeroDivisionError: inner detail")
    p = Producer(cai_dict())
    view = cai.as_cuda_array(p, check_pointers=False)
    calls = [
        lambda: cai.as_cuda_array(Producer(cai_dict(typestr="|V8", descr=[("a", "<f4", (Broken(),))])), check_pointers=False),
        lambda: cai.as_cuda_array(p, stream=Broken(), check_pointers=False),
        lambda: view.__dlpack__(stream=Broken()),
        lambda: cai.pointer_attributes(Broken()),
        lambda: cai.configure(export_version=Broken()),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError), match=tail):
            call()
    stream = type("S", (), {"cuda_stream": Broken()})()
    handle = re.escape("(the handle's __index__ failed with ZeroDivisionError: inner detail)")
    with pytest.raises(TypeError, match=rf"^stream: \.cuda_stream gave Broken\(\) \(Broken\), expected an int handle {handle}$"):
        cai.as_cuda_array(p, stream=stream, check_pointers=False)


def test_object_without_interface():
    with pytest.raises(TypeError, match="__cuda_array_interface__: objects of type 'object' do not export it"):
        cai.as_cuda_array(object())
    with pytest.raises(TypeError, match="__array_interface__: objects of type 'int' do not export it"):
        cai.as_array(3)


def test_exception_raised_by_the_property_propagates():
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        cai.as_cuda_array(Broken())


class BigIndex:
    """An int-like whose text does not show the int its __index__ gives."""

    calls = 0

    def __index__(self):
        BigIndex.calls += 1
        return 2**70


GAVE = r"<.*BigIndex object at 0x[0-9a-f]+> \(BigIndex; its __index__ gave 1180591620717411303424\)"


@pytest.mark.parametrize("key", ["version", "shape", "strides", "data", "stream"])
def test_an_int_like_past_64_bits_is_named_with_the_int_it_gave(key):
    desc = {"version": 3, "shape": (2,), "typestr": "<f4", "data": (PTR, False), "stream": None}
    value = BigIndex()
    desc[key] = {"shape": (value,), "strides": (value,), "data": (value, False)}.get(key, value)
    BigIndex.calls = 0
    with pytest.raises(ValueError, match=rf"^{key}: {GAVE} does not fit in 64 bits"):
        cai.as_cuda_array(Producer(desc))
    assert BigIndex.calls == 1, "the producer's __index__ runs once"


def test_int_like_arguments_past_64_bits_are_named_with_the_int_they_gave():
    view = cai.as_cuda_array(Producer(cai_dict()), sync=False)
    with pytest.raises(ValueError, match=rf"^max_version: {GAVE} is out of range"):
        view.__dlpack__(max_version=(BigIndex(), 0))
    with pytest.raises(ValueError, match=rf"^dl_device: {GAVE} is out of range"):
        view.__dlpack__(dl_device=(BigIndex(), 0))
    with pytest.raises(ValueError, match=rf"^stream: {GAVE} is not a stream handle"):
        cai.as_cuda_array(Producer(cai_dict()), stream=BigIndex())
    with pytest.raises(ValueError, match=rf"^ptr: {GAVE} is not an address"):
        cai.pointer_attributes(BigIndex())
    # A sub-array dimension: the shape is shown, and what its int-like gave.
    desc = cai_dict(shape=(2,), typestr="|V8", descr=[("a", "<f4", (BigIndex(),))])
    with pytest.raises(
        ValueError, match=r"the dimension <.*BigIndex object at 0x[0-9a-f]+> gave 1180591620717411303424 through its "
    ):
        cai.as_cuda_array(Producer(desc))
    before = cai.configure()
    with pytest.raises(ValueError, match=rf"^export_version: {GAVE} is not 2 or 3"):
        cai.configure(export_version=BigIndex())
    assert cai.configure() == before

    class Stream:
        cuda_stream = BigIndex()

    with pytest.raises(
        ValueError,
        match=r"^stream: \.cuda_stream gave <.*> \(BigIndex\), which is not a stream handle "
        r"\(the handle's __index__ gave 1180591620717411303424\)",
    ):
        cai.as_cuda_array(Producer(cai_dict()), stream=Stream())
    # NumPy's integers show their value: it is not repeated.
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match=r"^max_version: np.uint64\(9223372036854775808\) \(uint64\) is out of range"):
        view.__dlpack__(max_version=(np.uint64(2**63), 0))

    class NumPyStream:
        cuda_stream = np.int64(-5)

    with pytest.raises(ValueError, match=r"^stream: \.cuda_stream gave np.int64\(-5\) \(int64\), which is not a stream handle$"):
        cai.as_cuda_array(Producer(cai_dict()), stream=NumPyStream())

    # Shown only as a whole number: a longer number in the text that contains it is not it.
    class Longer:
        def __index__(self):
            return 2**64

        def __repr__(self):
            return "Longer(184467440737095516160)"

    with pytest.raises(
        ValueError, match=r"^ptr: Longer\(184467440737095516160\) \(Longer; its __index__ gave 18446744073709551616\)"
    ):
        cai.pointer_attributes(Longer())


def test_an_int_subclass_that_hides_its_value_is_named_with_it():
    class Hidden(int):
        def __repr__(self):
            raise RuntimeError("no repr")

        def __index__(self):  # Python reads an int subclass by its value, never by this
            return 99

    before = cai.configure()
    with pytest.raises(
        ValueError, match=r"^export_version: <repr\(\) raised RuntimeError> \(Hidden; its value is 7\) is not 2 or 3"
    ):
        cai.configure(export_version=Hidden(7))
    assert cai.configure() == before
    with pytest.raises(ValueError, match=r"^ptr: <repr\(\) raised RuntimeError> \(Hidden; its value is -4\)"):
        cai.pointer_attributes(Hidden(-4))
    # An int subclass whose text shows its value is named as before.
    with pytest.raises(ValueError, match=r"^export_version: 7 \(Shown\) is not 2 or 3$"):
        cai.configure(export_version=type("Shown", (int,), {})(7))


def test_integer_stream_needs_a_driver_to_synchronize():
    from cai_fixtures import DeviceMatrix  # noqa: F401  (same machine facts for both modules)

    try:
        cai.as_cuda_array(Producer(cai_dict(stream=1)))
    except cai.CudaDriverError as e:
        assert "stream: cannot synchronize on stream 1" in str(e)
        assert "sync=False" in str(e)
        assert isinstance(e, RuntimeError)
    else:  # a driver is present: synchronizing worked or raised a driver error above
        pass
    assert cai.as_cuda_array(Producer(cai_dict(stream=1)), sync=False).stream == 1


# Values that a careless or hostile producer might put anywhere.
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.binary(max_size=4),
    st.lists(st.integers(min_value=-5, max_value=2**65), max_size=4),
    st.tuples(st.integers(min_value=-5, max_value=2**65), st.booleans()),
    st.lists(st.integers(min_value=-(2**64), max_value=2**64), max_size=3).map(tuple),
    st.sampled_from(["<f4", "|b1", "<U2", "|V8", ">c16", "<M8[ns]", "<f3", "|O", "x"]),
    st.lists(st.tuples(st.text(max_size=2), st.sampled_from(["<f4", "|u1", "<i8", "q"])), max_size=3),
)
KEYS = ["shape", "typestr", "data", "version", "strides", "descr", "mask", "stream", "other"]
dicts = st.dictionaries(st.sampled_from(KEYS), junk, max_size=9)
mutated = st.builds(
    lambda base, changes: {**base, **changes},
    st.builds(lambda s, v: cai_dict(shape=s, version=v), st.lists(st.integers(0, 5), max_size=3).map(tuple), st.integers(0, 3)),
    st.dictionaries(st.sampled_from(KEYS), junk, max_size=3),
)


@pytest.mark.filterwarnings("ignore:version.*is newer:RuntimeWarning")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(dicts, mutated))
def test_malformed_dicts_raise_only_documented_exceptions(desc):
    try:
        v = cai.as_cuda_array(Producer(desc), sync=False)
    except (TypeError, ValueError) as e:
        assert type(e).__name__ != "PanicException"
        assert str(e).split(":")[0] in KEYS + ["__cuda_array_interface__"], str(e)
    else:
        assert v.__cuda_array_interface__["shape"] == v.shape
    findings = cai.validate(desc)
    assert isinstance(findings, list)


def test_refcount_is_unchanged_after_many_failed_imports():
    p = Producer(bad(stream=0))
    q = Producer(bad(shape=[1]))
    payload = p.desc["data"]
    start = (sys.getrefcount(p), sys.getrefcount(q), sys.getrefcount(payload))
    for _ in range(100_000):
        try:
            cai.as_cuda_array(p)
        except ValueError:
            pass
    for _ in range(1_000):
        try:
            cai.as_cuda_array(q)
        except TypeError:
            pass
    assert (sys.getrefcount(p), sys.getrefcount(q), sys.getrefcount(payload)) == start


@pytest.mark.skipif(cai.cuda_driver_present(), reason="the warning is for machines without a CUDA driver")
def test_check_pointers_asked_for_without_a_driver_warns():
    with pytest.warns(RuntimeWarning, match="check_pointers=True: no CUDA driver .* pointers are not checked"):
        cai.as_cuda_array(Producer(cai_dict()), check_pointers=True)
    with pytest.warns(RuntimeWarning, match="pointers are not checked"):
        cai.from_cuda_array_interface(cai_dict(), check_pointers=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cai.as_cuda_array(Producer(cai_dict()))  # the default: silent
        cai.as_cuda_array(Producer(cai_dict()), check_pointers=False)


@pytest.mark.parametrize("key, n", [("shape", 65), ("shape", 10**6), ("strides", 65), ("strides", 10**6)])
def test_more_than_64_dimensions_are_refused_with_a_short_message(key, n):
    # NumPy and every DLPack consumer stop at 64: a view with more could go nowhere.
    d = cai_dict(shape=(1,) * (n if key == "shape" else 2), strides=(4,) * n if key == "strides" else None)
    message = rf"^{key}: {n} entries; at most 64 dimensions are read \(NumPy's limit\)$"
    with pytest.raises(ValueError, match=message):
        cai.as_cuda_array(Producer(d))
    with pytest.raises(ValueError, match=message):
        cai.as_array(Producer(d, host=True))
    findings = cai.validate(d)
    assert [f for f in findings if "64 dimensions" in f] and max(map(len, findings)) < 300


def test_64_dimensions_are_read():
    view = cai.as_cuda_array(Producer(cai_dict(shape=(1,) * 64)))
    assert view.ndim == 64


@pytest.mark.parametrize(
    "desc", [cai_dict(typestr="<f" + "x" * 10**7), cai_dict(typestr="|V4", descr=[("a", "<f" + "9" * 10**7)])]
)
def test_a_ten_megabyte_value_makes_a_short_message(desc):
    with pytest.raises(ValueError) as info:
        cai.from_cuda_array_interface(desc)
    assert len(str(info.value)) < 400 and "characters)" in str(info.value)
    assert max(map(len, cai.validate(desc))) < 400


def test_object_references_are_refused_on_the_device_interface_only():
    import numpy as np

    objects = np.array([None, 1, "x"], dtype=object)
    # NumPy's own interface carries objects; cai reads it as NumPy does.
    assert cai.as_array(objects).typestr == "|O"
    assert cai.validate(objects, interface="host") == []
    objects_finding = "typestr: '|O' holds Python object references, which mean nothing in device memory"
    assert cai.validate(bad(typestr="|O")) == [objects_finding]
    # Found whatever else is wrong with the dict.
    findings = cai.validate(bad(typestr="|O", descr="notalist"))
    assert objects_finding in findings and any(f.startswith("descr: expected a list") for f in findings)
