"""The example module `pycontainer` (examples/pycontainer): sizes from Python are checked."""

import platform
import subprocess
import sys

import numpy as np
import pytest

import pycontainer

# Where the modules built on cai-py find their one slice table through the loader.
LOADER_TABLE = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def test_an_image_too_large_to_address_is_an_overflow_error():
    # An empty image with a huge other dimension too: NumPy sizes it as one with a row or
    # column, and its export would be refused.
    for rows, cols in [(2**40, 2**40), (2**62, 1), (2**64 - 1, 2), (2**64 - 1, 0), (0, 2**62)]:
        with pytest.raises(OverflowError, match=rf"a {rows} x {cols} image of f32 is too large to address"):
            pycontainer.Image(rows, cols)
    img = pycontainer.Image(3, 0)
    with pytest.raises(OverflowError, match=rf"a {2**64 - 1} x 0 image of f32 is too large to address"):
        img.add_rows(2**64 - 4, 5.0)
    assert np.asarray(img).shape == (3, 0)
    assert np.asarray(pycontainer.Image(2**61 - 1, 0)).shape == (2**61 - 1, 0)


def test_slices_are_exclusive_across_modules():
    # Each module built on cai-py links its own copy of cai-py: the slices one takes must
    # still bar the others (the registry is shared through the dynamic loader on Unix).
    cai_fixtures = pytest.importorskip("cai_fixtures")
    x = np.zeros(4, np.float64)
    brighten = lambda: pycontainer.brighten(x.view(np.float32).reshape(2, 4), 1.0)  # noqa: E731
    with pytest.raises(BufferError, match=r"as_slice_mut: bytes .* overlap bytes .* that another call in progress"):
        cai_fixtures.host_hold(x, brighten)
    with pytest.raises(BufferError, match=r"as_slice_mut: bytes .* overlap"):
        cai_fixtures.host_hold_ro(x, brighten)
    # Both gave their entries back.
    brighten()
    assert (x.view(np.float32) == 1.0).all()
    assert cai_fixtures.host_hold(x, lambda: "held") == "held"


SPLIT_ATTEMPT = r"""
import gc, sys
import numpy as np
import cai_fixtures, pycontainer
# The interpreter's state dict made reachable, as CPython 3.13's `datetime` makes it.
cai_fixtures.track_interpreter_dict()
# Python code that meddles with sys before, between and after the modules' first slices
# (a registry published in sys was split this way: two `&mut` slices of the same bytes).
sys._cai_slices_v1 = None
cai_fixtures.host_sum(np.zeros(1))
for name in [n for n in vars(sys) if "cai" in n]:
    delattr(sys, name)
# Every dict the collector hands out loses its entries that name cai (a registry published
# in the interpreter's state dict was split this way once the dict was reachable).
state = [o for o in gc.get_objects() if isinstance(o, dict) and "cai_fixtures.tracked" in o]
print("state dict reachable:", len(state) == 1)
for d in gc.get_objects():
    if isinstance(d, dict) and d is not globals():
        for key in [k for k in d if isinstance(k, str) and "slices" in k]:
            del d[key]
x = np.zeros(4)
try:
    cai_fixtures.host_hold(x, lambda: pycontainer.brighten(x.view(np.float32).reshape(2, 4), 1.0))
except BufferError as e:
    print("refused:", e)
"""


@pytest.mark.skipif(
    not LOADER_TABLE,
    reason="elsewhere than on Linux (glibc) the table is published in the interpreter's state dict, which this "
    "test makes reachable",
)
def test_python_code_cannot_split_the_slice_registry():
    pytest.importorskip("cai_fixtures")
    out = subprocess.run([sys.executable, "-c", SPLIT_ATTEMPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # The attempt reached the dict it meant to change.
    assert "state dict reachable: True" in out.stdout, out.stdout
    assert "refused: as_slice_mut: bytes" in out.stdout and "that another call in progress" in out.stdout, out.stdout


LOADER_ORDERS = r"""
import importlib.util, os, shutil, sys, tempfile
import numpy as np
mode, first = sys.argv[1:]
import cai_fixtures
fixtures = sys.modules["cai_fixtures.cai_fixtures"]
# Flags Python code may set for the next module's load.
sys.setdlopenflags({"global": os.RTLD_GLOBAL, "deep": os.RTLD_DEEPBIND}.get(mode, 0) | os.RTLD_NOW)
import pycontainer
sys.setdlopenflags(os.RTLD_NOW)
other = pycontainer
if mode == "copy":
    # The same module's file loaded again from another place: another object, loaded later.
    path = os.path.join(tempfile.mkdtemp(), os.path.basename(fixtures.__file__))
    shutil.copy(fixtures.__file__, path)
    spec = importlib.util.spec_from_file_location("cai_fixtures", path)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    assert other is not fixtures and other.__file__ == path
if mode == "reopen":
    # The first module's file opened again, global, under another name (the import fails
    # after the loader has opened it).
    sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
    try:
        importlib.util.module_from_spec(importlib.util.spec_from_file_location("other", fixtures.__file__))
    except ImportError:
        pass
    sys.setdlopenflags(os.RTLD_NOW)
x = np.zeros(4)
def other_writes():
    if other is pycontainer:
        pycontainer.brighten(x.view(np.float32).reshape(2, 4), 1.0)
    else:
        other.host_hold(x, lambda: None)
# Which module takes its first slice (and looks for the table) first.
if first == "other":
    if other is pycontainer:
        pycontainer.brighten(np.zeros((2, 4), np.float32), 1.0)
    else:
        other.host_sum(np.zeros(1))
else:
    fixtures.host_sum(np.zeros(1))
outcomes = []
for hold in ([fixtures.host_hold] if other is pycontainer else [fixtures.host_hold, other.host_hold]):
    inner = other_writes if hold is fixtures.host_hold else (lambda: fixtures.host_hold(x, lambda: None))
    try:
        hold(x, inner)
        outcomes.append("NOT refused")
    except BufferError as e:
        outcomes.append("refused" if "that another call in progress" in str(e) else repr(e))
print(outcomes)
"""


@pytest.mark.skipif(not LOADER_TABLE, reason="the modules find one table through the loader on Linux (glibc) only")
@pytest.mark.parametrize("mode", ["plain", "global", "deep", "copy", "reopen"])
@pytest.mark.parametrize("first", ["fixtures", "other"])
def test_every_module_finds_the_same_slice_table_whatever_the_loading(mode, first):
    # Modules built on cai-py find one table through the loader: the first loaded module's,
    # whichever takes a slice first, however Python code has them loaded or opened again.
    pytest.importorskip("cai_fixtures")
    out = subprocess.run(
        [sys.executable, "-c", LOADER_ORDERS, mode, first], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    expected = ["refused"] if mode != "copy" else ["refused", "refused"]
    assert out.stdout.strip() == str(expected), out.stdout + out.stderr


def test_rows_that_cannot_be_added_leave_the_image_as_it_was():
    img = pycontainer.Image(2, 3)
    img.fill(1.5)
    view = np.asarray(img)
    address = img.address()
    with pytest.raises(OverflowError, match=rf"add_rows: 2 \+ {2**64 - 1} rows are too many to address"):
        img.add_rows(2**64 - 1, 0.0)
    with pytest.raises(OverflowError, match=rf"a {2**61 + 2} x 3 image of f32 is too large to address"):
        img.add_rows(2**61, 0.0)
    # 2**52 rows of 3 pixels: 54 PiB, which no allocator gives.
    with pytest.raises(MemoryError, match=rf"no memory for a {2**52 + 2} x 3 image of f32: memory allocation failed"):
        img.add_rows(2**52, 0.0)
    assert img.address() == address and np.asarray(img).shape == (2, 3) and img.sum() == 9.0
    img.add_rows(1, 2.0)
    assert np.asarray(img).tolist() == [[1.5] * 3, [1.5] * 3, [2.0] * 3]
    assert view.tolist() == [[1.5] * 3] * 2
