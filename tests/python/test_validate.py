"""cai.validate: every problem of a producer, by the version it declares."""

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import Producer, cai_dict


def test_conforming_producers_have_no_findings():
    assert cai.validate(Producer(cai_dict())) == []
    assert cai.validate(np.zeros((3, 4))) == []
    assert cai.validate(fx.DeviceMatrix(0x7000_0000, 12, [3, 4], stream=1)) == []
    assert cai.validate(fx.Particles(2)) == []
    assert cai.validate(cai_dict(version=0)) == []


def test_every_problem_is_listed():
    desc = cai_dict(stream=0, typestr="<f3", extra=1)
    desc["shape"] = [2]
    del desc["version"]
    findings = cai.validate(desc)
    assert any(f.startswith("version: required key is missing") for f in findings)
    assert any(f.startswith("stream: 0 is disallowed") for f in findings)
    assert any(f.startswith("typestr: '<f3' is malformed") for f in findings)
    assert any(f.startswith("shape: expected a tuple") for f in findings)
    assert "__cuda_array_interface__: key 'extra' is not defined by any version of the interface" in findings


def test_every_rule_broken_by_a_readable_descriptor_is_listed():
    # The descriptor's rules go on past the first broken: a null pointer, strides of the
    # wrong length, a stream in version 2.
    null_and_stream = cai.validate(cai_dict(data=(0, False), version=2, stream=5))
    assert [f.split(":")[0] for f in null_and_stream] == ["data", "stream"], null_and_stream
    strides_and_stream = cai.validate(cai_dict(version=2, stream=5, strides=(4, 4)))
    assert [f.split(":")[0] for f in strides_and_stream] == ["strides", "stream"], strides_and_stream
    assert strides_and_stream[1] == "stream: received 5 in a version 2 descriptor; streams exist from version 3"
    # With the version missing, the rules of every version are still checked.
    no_version = cai_dict(data=(0, False))
    del no_version["version"]
    findings = cai.validate(no_version)
    assert [f.split(":")[0] for f in findings] == ["version", "data"], findings
    # Where the descriptor cannot be read, the rules that need only the version still are.
    findings = cai.validate(cai_dict(typestr="<f3", version=2, stream=5))
    assert [f.split(":")[0] for f in findings] == ["typestr", "stream"], findings
    mask = Producer(cai_dict(shape=(3,)))
    findings = cai.validate(cai_dict(shape="x", version=0, mask=mask))
    assert [f.split(":")[0] for f in findings] == ["shape", "mask"], findings
    assert "version 0" in findings[1], findings
    # A mask's shape against the array's, and the array's rules past a broken mask.
    findings = cai.validate(cai_dict(mask=Producer(cai_dict(shape=(3,))), version=2, stream=5))
    assert [f.split(":")[0] for f in findings] == ["mask", "stream"], findings
    assert findings[0] == "mask: shape (3,) does not match the array's shape (4,)"
    findings = cai.validate(cai_dict(mask=Producer(cai_dict(data=(0, False))), version=2, stream=5))
    assert [f.split(":")[0] for f in findings] == ["mask", "stream"], findings
    assert findings[0].startswith("mask: data: pointer 0 (null)"), findings


def test_a_mapping_that_is_not_a_dict_is_validated_as_the_imports_read_it():
    import collections
    import types

    good = types.MappingProxyType(cai_dict())
    assert cai.from_cuda_array_interface(good, check_pointers=False).shape == cai_dict()["shape"]
    assert cai.validate(good) == []
    assert cai.validate(collections.ChainMap(cai_dict(typestr="<f3"))) == [
        "typestr: '<f3' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes"
    ]
    host = types.MappingProxyType({"shape": (2,), "typestr": "<f4", "data": (64, False), "version": 3, "stream": 5})
    assert cai.validate(host, interface="host") == [
        "__array_interface__: key 'stream' is not defined by any version of the interface"
    ]
    # A mapping that exports an interface is read by its interface.
    class Both(collections.abc.Mapping):
        __cuda_array_interface__ = cai_dict(typestr="<f9")

        def __getitem__(self, key):
            raise KeyError(key)

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

    assert cai.validate(Both()) == ["typestr: '<f9' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes"]


def test_an_attribute_must_be_a_dict_as_numpy_and_pytorch_read_it():
    import types

    arr = np.arange(3.0)
    host = type("H", (), {"__array_interface__": types.MappingProxyType(dict(arr.__array_interface__)), "base": arr})()
    with pytest.raises(ValueError, match="must be a dict"):
        np.asarray(host)
    with pytest.raises(TypeError, match=r"^__array_interface__: expected a dict, received mappingproxy\(\{"):
        cai.as_array(host)
    with pytest.raises(TypeError, match=r"__array_interface__: expected a dict, received mappingproxy"):
        fx.host_sum(host)
    (finding,) = cai.validate(host)
    assert finding.startswith("__array_interface__: expected a dict, received mappingproxy({") and finding.endswith(" (mappingproxy)")
    # The dict itself, given to cai, is read (through a copy) as before.
    assert cai.validate(host.__array_interface__, interface="host") == []

    device = Producer(types.MappingProxyType(cai_dict(typestr="<f3")))
    with pytest.raises(TypeError, match=r"^__cuda_array_interface__: expected a dict, received mappingproxy"):
        cai.as_cuda_array(device, check_pointers=False)
    with pytest.raises(TypeError, match=r"__cuda_array_interface__: expected a dict, received mappingproxy"):
        fx.describe_f32(device)
    # Every problem: the type of the attribute, then what its items hold.
    not_a_dict, typestr = cai.validate(device)
    assert not_a_dict.startswith("__cuda_array_interface__: expected a dict, received mappingproxy({")
    assert typestr == "typestr: '<f3' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes"
    # A dict subclass is a dict.
    sub = Producer(type("D", (dict,), {})(cai_dict()))
    assert cai.as_cuda_array(sub, check_pointers=False).shape == (4,) and cai.validate(sub) == []


def test_a_non_dict_attribute_is_one_finding_however_its_class_answers():
    import types

    class Flip:
        # `__class__` fails at one ask and says dict at the next: one mapping check only.
        asks = 0

        @property
        def __class__(self):
            Flip.asks += 1
            if Flip.asks % 2:
                raise AttributeError("first")
            return dict

        def __init__(self, d):
            self.d = d

        def keys(self):
            return self.d.keys()

        def __getitem__(self, k):
            return self.d[k]

    producer = Producer(Flip(cai_dict()))
    for start in (0, 1):
        Flip.asks = start
        findings = cai.validate(producer)
        not_a_dict = [f.startswith("__cuda_array_interface__: expected a dict, received <") for f in findings]
        assert not_a_dict[0] and not_a_dict.count(True) == 1, findings
        Flip.asks = start
        with pytest.raises(TypeError, match="^__cuda_array_interface__: expected a dict, received <"):
            cai.as_cuda_array(producer, check_pointers=False)

    # A chain of masks whose interfaces are mappings ends in the finding of a plain chain,
    # not in a RecursionError.
    class SelfMask:
        @property
        def __cuda_array_interface__(self):
            return types.MappingProxyType(cai_dict(mask=self))

    class PlainSelfMask:
        @property
        def __cuda_array_interface__(self):
            return cai_dict(mask=self)

    findings = cai.validate(SelfMask())
    assert findings[0].startswith("__cuda_array_interface__: expected a dict, received mappingproxy(")
    assert findings[-1:] == cai.validate(PlainSelfMask()) and "masks nest deeper than cai reads" in findings[-1]

    # A dict of a subclass that exports an interface is read by it, as the imports read it.
    class D(dict):
        __cuda_array_interface__ = types.MappingProxyType(cai_dict())

    (finding,) = cai.validate(D(cai_dict()))
    assert finding.startswith("__cuda_array_interface__: expected a dict, received mappingproxy(")
    with pytest.raises(TypeError, match="expected a dict, received mappingproxy"):
        cai.as_cuda_array(D(cai_dict()), check_pointers=False)


def test_numpy_s_offset_key_is_named_as_numpy_reads_it():
    arr = np.arange(4.0)
    ai = dict(arr.__array_interface__, offset=8)
    producer = type("Offset", (), {"__array_interface__": ai, "base": arr})()
    # With a data tuple, NumPy applies no offset; neither does cai, and validate says so.
    assert np.asarray(producer).ctypes.data == cai.as_array(producer).ptr == arr.ctypes.data
    assert cai.validate(producer) == [
        "__array_interface__: key 'offset' applies to buffer data only, which cai does not read; with a (pointer, "
        "read-only) data tuple NumPy ignores it, and so does cai"
    ]
    # The CUDA interface has no such key.
    assert cai.validate(cai_dict(offset=8)) == [
        "__cuda_array_interface__: key 'offset' is not defined by any version of the interface"
    ]


def test_numpy_scalars_conform():
    # A NumPy scalar's interface keeps the array made for the read alive through NumPy's
    # own key '__ref', which is no finding of the host interface (nor ignored elsewhere).
    # (NumPy 2.4 puts it in a scalar's interface; 2.5 no longer does.)
    for scalar in (np.float64(1.5), np.int8(-3), np.bool_(True), np.complex64(1j)):
        assert cai.validate(scalar) == [], scalar
        arr = np.asarray(scalar)
        assert cai.validate(dict(arr.__array_interface__, __ref=arr), interface="host") == []
    assert cai.validate(cai_dict(__ref=1)) == [
        "__cuda_array_interface__: key '__ref' is not defined by any version of the interface"
    ]


def test_version_rules():
    assert cai.validate(cai_dict(version=2, stream=1)) == [
        "stream: received 1 in a version 2 descriptor; streams exist from version 3"
    ]
    assert cai.validate(cai_dict(version=2, stream=None)) == []
    assert cai.validate(cai_dict(shape=(0,), version=2)) == [
        "data: an empty array exports pointer 0 from version 2 on, received 0x7f0000000000 for shape (0,)"
    ]
    assert cai.validate(cai_dict(shape=(0,), version=1)) == []
    assert "version: 4 is newer" in cai.validate(cai_dict(version=4))[0]


def test_mask_findings_are_prefixed():
    mask = Producer(cai_dict(typestr="<f3"))
    assert cai.validate(cai_dict(mask=mask)) == [
        "mask: typestr: '<f3' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes"
    ]


def test_raising_property_is_a_finding():
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise ValueError("device lost")

    assert cai.validate(Broken()) == [
        "__cuda_array_interface__: reading the attribute raised ValueError: device lost"
    ]


def test_no_interface_raises():
    with pytest.raises(TypeError, match="'int' export neither __cuda_array_interface__ nor __array_interface__"):
        cai.validate(42)


def test_which_interface_was_checked_is_said():
    host_only = Producer({"shape": (3,), "typestr": "<f9", "data": (0, False), "version": 3}, host=True)
    assert cai.validate(host_only) == ["__array_interface__: typestr: '<f9' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes"]
    assert cai.validate(host_only, interface="host") == cai.validate(host_only)
    with pytest.raises(TypeError, match="__cuda_array_interface__: objects of type 'ndarray' do not export it"):
        cai.validate(np.zeros(3), interface="cuda")
    assert cai.validate(np.zeros(3), interface="host") == []
    assert cai.validate({"shape": (2,), "typestr": "<f4", "data": (64, False), "version": 3}, interface="host") == []
    with pytest.raises(ValueError, match="interface: 'gpu' is not 'cuda', 'host' or None"):
        cai.validate(np.zeros(3), interface="gpu")

    class BrokenHost:
        @property
        def __array_interface__(self):
            raise ValueError("gone")

    assert cai.validate(BrokenHost()) == ["__array_interface__: reading the attribute raised ValueError: gone"]


def test_recursion_through_the_mapping_check_ends_in_recursion_error():
    # An object with no interface whose __class__ calls cai.validate on itself: each level
    # is one nested read, so the recursion ends in RecursionError, never in an overflow of
    # the C stack (in a child interpreter, with Python's own limit set high).
    import subprocess
    import sys

    code = (
        "import sys, cai\n"
        "sys.setrecursionlimit(100000)\n"
        "class Loop:\n"
        "    @property\n"
        "    def __class__(self):\n"
        "        cai.validate(self)\n"
        "        return Loop\n"
        "try:\n"
        "    cai.validate(Loop())\n"
        "except RecursionError as e:\n"
        "    print('RecursionError', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("RecursionError maximum recursion depth exceeded while reading "), r.stdout
