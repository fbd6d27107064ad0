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
