"""The sync engine from Python on a machine without a CUDA driver, and the options.

With a driver present these tests are skipped: tests/python/gpu/ covers that machine.
"""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import Producer, cai_dict

no_driver = pytest.mark.skipif(cai.cuda_driver_present(), reason="a CUDA driver is present (see tests/python/gpu)")
PTR = 0x7F00_0000_0000


@pytest.fixture(autouse=True)
def restore_config():
    before = cai.configure()
    yield
    cai.configure(**before)


@no_driver
@pytest.mark.parametrize("policy", ["wait", "synchronize"])
def test_integer_stream_without_driver_is_a_driver_error(policy):
    with pytest.raises(cai.CudaDriverError, match=r"stream: cannot synchronize on stream 7: the CUDA driver library \(libcuda\) was not found"):
        cai.as_cuda_array(Producer(cai_dict(stream=7)), policy=policy)
    with pytest.raises(cai.CudaDriverError):
        cai.from_cuda_array_interface(cai_dict(stream=1), policy=policy)
    with pytest.raises(cai.CudaDriverError):
        fx.describe_f32(Producer(cai_dict(stream=2)))


@no_driver
def test_ignore_and_stream_none_need_no_driver():
    assert cai.as_cuda_array(Producer(cai_dict(stream=7)), policy="ignore").stream == 7
    assert cai.as_cuda_array(Producer(cai_dict(stream=7)), sync=False).stream == 7
    assert cai.as_cuda_array(Producer(cai_dict(stream=None)), policy="synchronize").stream is None
    # Pointer checks need the driver: without one they are skipped (with a warning), not failed.
    with pytest.warns(RuntimeWarning, match="pointers are not checked"):
        assert cai.as_cuda_array(Producer(cai_dict()), check_pointers=True).ptr == PTR


@no_driver
def test_pointer_attributes_without_driver():
    assert cai.cuda_driver_present() is False
    with pytest.raises(cai.CudaDriverError, match="ptr: cannot query pointer 0x7f0000000000"):
        cai.pointer_attributes(PTR)
    with pytest.raises(cai.CudaDriverError, match="ptr: cannot query pointer 0x10"):
        cai.pointer_attributes(np.uint64(16))


def test_pointer_attributes_refuses_what_is_not_an_address_naming_it():
    for bad in (-1, 2**64):
        with pytest.raises(ValueError, match=rf"^ptr: {bad} \(int\) is not an address"):
            cai.pointer_attributes(bad)
    for bad, shown in ((True, r"True \(bool\)"), ("0x10", r"'0x10' \(str\)"), (1.0, r"1.0 \(float\)")):
        with pytest.raises(TypeError, match=rf"^ptr: expected an int, received {shown}$"):
            cai.pointer_attributes(bad)


@no_driver
def test_cudarc_entry_points_without_driver():
    import numpy as np

    from producers import host_backed

    with pytest.raises(cai.CudaDriverError, match="data: cannot make a cudarc view: the CUDA driver library"):
        fx.zero_with_cudarc(host_backed(np.ones(4, np.float32)))
    with pytest.raises(cai.CudaDriverError, match="the CUDA driver library"):
        fx.CudarcBuffer([4])


def test_a_cudarc_view_of_bools_is_refused_before_the_driver_is_needed():
    import numpy as np

    from producers import host_backed

    with pytest.raises(TypeError, match=r"^typestr: a cudarc view of '\|b1' elements would hand Rust bool values"):
        fx.cudarc_view_of_bools(host_backed(np.ones(4, np.bool_)))


@no_driver
def test_process_wide_policy_reaches_other_modules():
    cai.configure(import_sync="ignore")
    assert cai.as_cuda_array(Producer(cai_dict(stream=7))).stream == 7
    # The fixtures module shares the options of the cai package.
    assert fx.describe_f32(Producer(cai_dict(stream=7)))[4] == 7
    cai.configure(import_sync="wait")
    with pytest.raises(cai.CudaDriverError):
        fx.describe_f32(Producer(cai_dict(stream=7)))


def test_bad_policy_and_stream_arguments():
    with pytest.raises(ValueError, match="policy: 'later' is not a sync policy"):
        cai.as_cuda_array(Producer(cai_dict()), policy="later")
    # None is the legacy default stream for a consumer's stream, not "no synchronization".
    with pytest.raises(ValueError, match=r"stream: 0 is disallowed \(ambiguous between the legacy and the per-thread "
                       r"default stream\); pass None or 1 for the legacy default stream, 2 for the per-thread default "
                       r"stream, or sync=False to skip synchronization$"):
        cai.as_cuda_array(Producer(cai_dict()), stream=0)
    with pytest.raises(ValueError, match=r"stream: 0 is disallowed .* 2 for the per-thread default stream, -1 for no "
                       r"synchronization$"):
        cai.from_dlpack(fx.DeviceMatrix(PTR, 12, [3, 4]), stream=0)
    with pytest.raises(ValueError, match="stream: -4 is not a stream"):
        cai.as_cuda_array(Producer(cai_dict()), stream=-4)
    with pytest.raises(TypeError, match=r"stream: expected None, an int or a stream object .* received 'x' \(str\)"):
        cai.as_cuda_array(Producer(cai_dict()), stream="x")
    with pytest.raises(TypeError, match="stream: expected"):
        cai.as_cuda_array(Producer(cai_dict()), stream=True)


class CupyLikeStream:
    ptr = 0x5000


class TorchLikeStream:
    cuda_stream = 0


class CudaCoreLikeStream:
    def __cuda_stream__(self):
        return (0, 0x6000)


class IntLikeVersionStream:
    def __cuda_stream__(self):
        return (np.int64(0), np.uint64(0x6000))


@pytest.mark.parametrize(
    "stream", [None, 1, 2, 0x5000, CupyLikeStream(), TorchLikeStream(), CudaCoreLikeStream(), IntLikeVersionStream()]
)
def test_consumer_stream_forms_are_accepted(stream):
    assert cai.as_cuda_array(Producer(cai_dict()), stream=stream).stream is None


def test_configure_reports_and_validates():
    c = cai.configure()
    assert set(c) == {"import_sync", "check_pointers", "export_stream", "export_version"}
    c = cai.configure(import_sync="synchronize", check_pointers=False, export_stream="none", export_version=2)
    assert c == {"import_sync": "synchronize", "check_pointers": False, "export_stream": "none", "export_version": 2}
    with pytest.raises(ValueError, match="import_sync: 'x' is not a sync policy"):
        cai.configure(import_sync="x")
    with pytest.raises(ValueError, match="export_stream: 'all' is not 'report' or 'none'"):
        cai.configure(export_stream="all")
    with pytest.raises(ValueError, match=r"export_version: 1 \(int\) is not 2 or 3"):
        cai.configure(export_version=1)
    # Values of the wrong type or range are named, with the option.
    with pytest.raises(ValueError, match=r"export_version: -1 \(int\) is not 2 or 3"):
        cai.configure(export_version=-1)
    with pytest.raises(ValueError, match=r"export_version: 1180591620717411303424 \(int\) is not 2 or 3"):
        cai.configure(export_version=2**70)
    assert cai.configure(export_version=np.int64(3))["export_version"] == 3
    # An int-like's message says what its __index__ gave.
    with pytest.raises(ValueError, match=r"export_version: (np\.int64\()?7\)? \(int64\) is not 2 or 3"):
        cai.configure(export_version=np.int64(7))

    class Seven:
        def __index__(self):
            return 7

    with pytest.raises(ValueError, match=r"export_version: <.*\(Seven; its __index__ gave 7\) is not 2 or 3"):
        cai.configure(export_version=Seven())
    for wrong in (True, "3", 3.0):
        with pytest.raises(TypeError, match=rf"export_version: expected 2 or 3, received {re.escape(repr(wrong))} \("):
            cai.configure(export_version=wrong)
    with pytest.raises(TypeError, match=r"import_sync: expected 'wait', 'synchronize' or 'ignore', received 5 \(int\)"):
        cai.configure(import_sync=5)
    with pytest.raises(TypeError, match=r"check_pointers: expected True or False, received 'yes' \(str\)"):
        cai.configure(check_pointers="yes")
    with pytest.raises(TypeError, match=r"export_stream: expected 'report' or 'none', received 2 \(int\)"):
        cai.configure(export_stream=2)
    assert cai.configure(check_pointers=np.True_)["check_pointers"] is True
    # A str with no UTF-8 form (a lone surrogate) is named too.
    with pytest.raises(ValueError, match=r"import_sync: expected 'wait', 'synchronize' or 'ignore', received '\\udcff'"):
        cai.configure(import_sync="\udcff")


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda p: cai.as_cuda_array(p, policy=5), TypeError, r"policy: expected 'wait', .* received 5 \(int\)"),
        (lambda p: cai.as_cuda_array(p, policy="\udcff"), ValueError, r"policy: expected .* received '\\udcff'"),
        (lambda p: cai.as_cuda_array(p, policy="often"), ValueError, "policy: 'often' is not a sync policy"),
        (lambda p: cai.as_cuda_array(p, sync=False, policy="often"), ValueError, "policy: 'often' is not a sync policy"),
        (
            lambda p: cai.as_cuda_array(p, sync=False, policy="sync"),
            ValueError,
            r"^policy: 'sync' \('synchronize'\) contradicts sync=False, which is policy='ignore'; give one of the two$",
        ),
        (
            lambda p: cai.from_cuda_array_interface(p.__cuda_array_interface__, sync=False, policy="wait"),
            ValueError,
            r"^policy: 'wait' contradicts sync=False, which is policy='ignore'; give one of the two$",
        ),
        (lambda p: cai.validate(p, interface=5), TypeError, r"interface: expected 'cuda', 'host' or None, received 5"),
        (lambda p: cai.validate(p, interface="\udcff"), ValueError, r"interface: expected .* received '\\udcff'"),
        (lambda p: cai.validate(p, interface="gpu"), ValueError, "interface: 'gpu' is not 'cuda', 'host' or None"),
    ],
)
def test_text_arguments_of_the_wrong_kind_are_named_with_the_value(call, error, message):
    with pytest.raises(error, match=message):
        call(Producer(cai_dict()))


def test_sync_false_agrees_with_policy_ignore():
    p = Producer(cai_dict(stream=7))
    for options in ({"sync": False}, {"sync": False, "policy": "ignore"}, {"policy": "0"}):
        assert cai.as_cuda_array(p, check_pointers=False, **options).stream == 7


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda p, v: cai.as_cuda_array(p, sync=v), "sync"),
        (lambda p, v: cai.as_cuda_array(p, check_pointers=v), "check_pointers"),
        (lambda p, v: cai.as_cuda_array(p, allow_other_device=v), "allow_other_device"),
        (lambda p, v: cai.from_cuda_array_interface(p.__cuda_array_interface__, sync=v), "sync"),
        (lambda p, v: cai.from_cuda_array_interface(p.__cuda_array_interface__, check_pointers=v), "check_pointers"),
        (
            lambda p, v: cai.from_cuda_array_interface(p.__cuda_array_interface__, allow_other_device=v),
            "allow_other_device",
        ),
        (lambda p, v: cai.from_dlpack(np.arange(3.0), copy=v), "copy"),
        (lambda p, v: cai.from_dlpack(np.arange(3.0), check_pointers=v), "check_pointers"),
        (lambda p, v: cai.configure(check_pointers=v), "check_pointers"),
    ],
)
def test_flag_arguments_of_the_wrong_kind_are_named_with_the_value(call, name):
    p = Producer(cai_dict())
    # A Python class that names itself as NumPy's bool is not it.
    poser = type("bool", (), {"__module__": "numpy", "__bool__": lambda s: True})()
    # `copy` says None, as `__dlpack__(copy=...)` does: None (either) is a value of its own.
    expected = "None, True or False" if name == "copy" else "True or False"
    for value, shown in [
        (1, r"1 \(int\)"),
        ("yes", r"'yes' \(str\)"),
        ([True], r"\[True\] \(list\)"),
        (poser, r"<numpy\.bool object at 0x[0-9a-f]+> \(bool\)"),
    ]:
        with pytest.raises(TypeError, match=rf"^{name}: expected {expected}, received {shown}$"):
            call(p, value)
    # True, False, NumPy's bools and None (the default) are flags.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # check_pointers=True without a driver
        for value in (True, False, np.True_, np.False_, None):
            try:
                call(p, value)
            except ValueError as e:
                # With a driver, check_pointers=True checks the made-up pointer, and refuses
                # it: the flag was read.
                assert name == "check_pointers" and cai.cuda_driver_present(), e
                assert "is not memory the CUDA driver knows" in str(e), e


def test_flag_arguments_keep_their_defaults_in_the_signature():
    import inspect

    for f in (cai.as_cuda_array, cai.from_cuda_array_interface):
        params = inspect.signature(f).parameters
        assert params["sync"].default is True
        assert params["allow_other_device"].default is False
        assert params["check_pointers"].default is None


def test_from_dlpack_takes_minus_one_as_any_int_and_as_cuda_array_does_not():
    from test_dlpack import HandMade

    for no_sync in (-1, np.int64(-1)):
        # A device producer is asked for no synchronization (host memory takes no stream).
        p = HandMade(np.arange(4, dtype=np.float32), (4,), device=(2, 0))
        assert cai.from_dlpack(p, stream=no_sync, check_pointers=False).shape == (4,)
        assert p.kwargs["stream"] == -1
        assert cai.from_dlpack(np.arange(3.0), stream=no_sync).shape == (3,)
    with pytest.raises(ValueError, match="stream: -2 is not a stream"):
        cai.from_dlpack(np.arange(3.0), stream=np.int64(-2))
    with pytest.raises(ValueError, match="stream: -1 is not a stream"):
        cai.as_cuda_array(Producer(cai_dict()), stream=np.int64(-1))


class Returns:
    """A stream object whose __cuda_stream__ returns `value`."""

    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        return self.value


@pytest.mark.parametrize(
    "stream,error,message",
    [
        (2**64, ValueError, r"stream: 18446744073709551616 \(int\) is not a stream handle"),
        (-3, ValueError, "stream: -3 is not a stream"),
        (Returns((0, -1)), ValueError, r"stream: __cuda_stream__\(\) gave \(0, -1\) \(tuple\), which is not a stream handle"),
        # A value of the wrong type is a TypeError; a handle or version out of range a ValueError.
        (Returns(7), TypeError, r"^stream: __cuda_stream__\(\) gave 7 \(int\), expected a \(version: 0, handle: int\) tuple$"),
        (Returns((1,)), TypeError, r"^stream: __cuda_stream__\(\) gave \(1,\) \(tuple\), expected a \(version: 0, handle: int\) tuple$"),
        (Returns(("0", 5)), TypeError, r"gave \('0', 5\) \(tuple\), expected a \(version: 0, handle: int\) tuple \(its version is not an int\)$"),
        (Returns((0, "x")), TypeError, r"^stream: __cuda_stream__\(\) gave \(0, 'x'\) \(tuple\), expected an int handle$"),
        # The protocol's one version is 0, and a handle is an int, never a bool.
        (Returns((99, 5)), ValueError, r"gave \(99, 5\) \(tuple\), which is not a stream handle \(its version is not 0"),
        (Returns((True, 5)), TypeError, r"gave \(True, 5\) \(tuple\), expected a \(version: 0, handle: int\) tuple \(its version is not an int\)$"),
        (Returns((-1, 5)), ValueError, r"gave \(-1, 5\) \(tuple\), which is not a stream handle \(its version is not 0"),
        (Returns((0, True)), TypeError, r"gave \(0, True\) \(tuple\), expected an int handle \(a bool\)"),
        (type("S", (), {"__cuda_stream__": 5})(), TypeError, r"stream: __cuda_stream__ is not a method, received 5 \(int\)"),
        (type("T", (), {"cuda_stream": True})(), TypeError, r"stream: .cuda_stream gave True \(bool\), expected an int handle \(a bool\)"),
        (type("C", (), {"ptr": False})(), TypeError, r"stream: .ptr gave False \(bool\), expected an int handle \(a bool\)"),
        (type("P", (), {"ptr": -1})(), ValueError, r"stream: .ptr gave -1 \(int\), which is not a stream handle"),
        (type("I", (), {"__index__": lambda s: 2**64})(), ValueError, r"stream: <.*I object at .*> \(I; its __index__ gave 18446744073709551616\) is not a stream handle"),
        ("7", TypeError, r"stream: expected None, an int or a stream object .* received '7' \(str\)"),
    ],
)
def test_a_stream_that_is_not_one_is_refused_naming_what_it_gave(stream, error, message):
    with pytest.raises(error, match=message):
        cai.as_cuda_array(Producer(cai_dict()), stream=stream)


def test_an_array_is_not_a_stream_though_it_has_a_ptr():
    arr = np.zeros(3, np.float32)
    for array in (cai.as_array(arr), cai.as_cuda_array(Producer(cai_dict()))):
        assert isinstance(array.ptr, int)
        with pytest.raises(TypeError, match="stream: expected None, an int or a stream object"):
            cai.as_cuda_array(Producer(cai_dict()), stream=array)
    # NumPy's integers are ints, though they have __array_interface__.
    assert cai.as_cuda_array(Producer(cai_dict()), stream=np.int64(0x5000)).stream is None


def test_export_stream_none_and_version_2_process_wide():
    d = fx.DeviceMatrix(PTR, 4, [4], stream=0x5000)
    assert d.__cuda_array_interface__["stream"] == 0x5000
    cai.configure(export_stream="none")
    assert d.__cuda_array_interface__["stream"] is None
    cai.configure(export_stream="report", export_version=2)
    e = d.__cuda_array_interface__
    assert e["version"] == 2 and "stream" not in e


def test_export_options_per_object_override_process_wide():
    cai.configure(export_stream="none")
    assert fx.OptionsDevice(PTR, 4, 0x5000).__cuda_array_interface__["stream"] is None
    assert fx.OptionsDevice(PTR, 4, 0x5000, stream_none=False).__cuda_array_interface__["stream"] == 0x5000
    cai.configure(export_stream="report")
    assert fx.OptionsDevice(PTR, 4, 0x5000, stream_none=True).__cuda_array_interface__["stream"] is None
    v2 = fx.OptionsDevice(PTR, 4, 0x5000, version=2).__cuda_array_interface__
    assert v2["version"] == 2 and "stream" not in v2


def run_with_env(code, **env):
    # A fresh process with only the variables given: none inherited from the runner.
    full = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    full.update(env)
    here = os.path.dirname(__file__)
    return subprocess.run([sys.executable, "-c", code], env=full, cwd=here, capture_output=True, text=True)


def test_configure_overrides_a_malformed_environment_variable():
    code = (
        "import cai, numpy as np\n"
        "try:\n"
        "    cai.configure(check_pointers=True)\n"
        "except ValueError as e:\n"
        "    print('still', e)\n"
        "print(cai.configure(import_sync='ignore')['import_sync'])\n"
        "print(cai.configure()['import_sync'], cai.from_dlpack(np.zeros(2)).shape)\n"
    )
    r = run_with_env(code, CAI_IMPORT_SYNC="bogus")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("still CAI_IMPORT_SYNC: 'bogus' is not a sync policy"), "an option not set still reads the variable"
    assert lines[1:] == ["ignore", "ignore (2,)"]
    # Host memory needs no option: a malformed variable does not stop its import.
    r = run_with_env("import cai, numpy as np\nprint(cai.from_dlpack(np.zeros(2)).shape)", CAI_IMPORT_SYNC="bogus")
    assert r.stdout.strip() == "(2,)", r.stderr


@pytest.mark.parametrize("name,option", [("CAI_IMPORT_SYNC", "import_sync='wait'"), ("CAI_CHECK_POINTERS", "check_pointers=True")])
def test_configure_overrides_a_variable_that_is_not_text(name, option):
    # "\udcff" reaches the process as the byte 0xff, which is no UTF-8.
    code = (
        "import cai\n"
        "try:\n"
        "    cai.configure()\n"
        "except ValueError as e:\n"
        "    print('still', e)\n"
        f"print(sorted(cai.configure({option})))\n"
    )
    r = run_with_env(code, **{name: "\udcff"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"still {name}: environment variable was not valid unicode"), lines
    assert lines[1] == "['check_pointers', 'export_stream', 'export_version', 'import_sync']"


def test_a_malformed_variable_stops_only_the_calls_that_need_its_option():
    code = (
        "import cai, cai_fixtures as fx\n"
        "d = dict(shape=(4,), typestr='<f4', data=(0x7f0000000000, False), version=3)\n"
        "def attempt(what, f):\n"
        "    try:\n"
        "        f()\n"
        "        print(what, 'ok')\n"
        "    except ValueError as e:\n"
        "        print(what, str(e).split(':')[0])\n"
        "attempt('export', lambda: fx.DeviceMatrix(0x7f0000000000, 4, [4], stream=7).__cuda_array_interface__)\n"
        "attempt('given', lambda: cai.from_cuda_array_interface(d, sync=False, check_pointers=False))\n"
        "attempt('default', lambda: cai.from_cuda_array_interface(d))\n"
        "attempt('own', lambda: fx.OptionsDevice(0x7f0000000000, 4, 5, stream_none=False, version=3).__cuda_array_interface__)\n"
        "try:\n"
        "    cai.configure(check_pointers=False)\n"
        "except ValueError as e:\n"
        "    print('configure', e)\n"
    )
    # An import-only variable: exports, and imports that give both import options, go on.
    r = run_with_env(code, CAI_IMPORT_SYNC="bogus", CAI_CHECK_POINTERS="0")
    lines = r.stdout.split("\n")
    assert lines[:4] == ["export ok", "given ok", "default CAI_IMPORT_SYNC", "own ok"], r.stderr
    assert lines[4].startswith("configure CAI_IMPORT_SYNC: 'bogus' is not a sync policy"), lines
    assert lines[4].endswith("; pass import_sync= to cai.configure to set it"), lines
    # An export-only variable: imports go on.
    r = run_with_env(code, CAI_EXPORT_VERSION="4", CAI_CHECK_POINTERS="0", CAI_IMPORT_SYNC="ignore")
    lines = r.stdout.split("\n")
    # An object whose own options set both export options reads neither variable.
    assert lines[:4] == ["export CAI_EXPORT_VERSION", "given ok", "default ok", "own ok"], r.stderr
    assert lines[4] == "configure CAI_EXPORT_VERSION: '4' is not 2 or 3; pass export_version= to cai.configure to set it"


def test_environment_variables():
    code = (
        "import cai, cai_fixtures as fx\n"
        "d = fx.DeviceMatrix(0x7f0000000000, 4, [4], stream=0x5000).__cuda_array_interface__\n"
        "print(d.get('stream', 'absent'), d['version'], cai.configure()['import_sync'])\n"
    )
    r = run_with_env(code, CAI_EXPORT_VERSION="2", CAI_IMPORT_SYNC="ignore")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["absent", "2", "ignore"]
    r = run_with_env(code, CAI_EXPORT_STREAM="none")
    assert r.stdout.split() == ["None", "3", "wait"], r.stderr


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("CAI_IMPORT_SYNC", "later", "CAI_IMPORT_SYNC: 'later' is not a sync policy"),
        ("CAI_CHECK_POINTERS", "maybe", "CAI_CHECK_POINTERS: 'maybe' is not a flag (expected 1, true, yes or on; or 0, false, no or off)"),
        ("CAI_EXPORT_STREAM", "all", "CAI_EXPORT_STREAM: 'all' is not 'report' or 'none'"),
        ("CAI_EXPORT_VERSION", "1", "CAI_EXPORT_VERSION: '1' is not 2 or 3"),
        # As received (not trimmed nor lower-cased), and a long value by its start.
        ("CAI_EXPORT_STREAM", " ALL ", "CAI_EXPORT_STREAM: ' ALL ' is not 'report' or 'none'"),
        ("CAI_CHECK_POINTERS", "x" * 1000, "CAI_CHECK_POINTERS: '" + "x" * 80 + "'... (1000 characters) is not a flag"),
    ],
)
def test_malformed_environment_variables_are_value_errors(name, value, message):
    code = (
        "import cai\n"
        "try:\n"
        "    cai.configure()\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n"
    )
    r = run_with_env(code, **{name: value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(f"ValueError: {message}"), r.stdout
