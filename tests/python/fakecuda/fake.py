"""The stand-in CUDA driver's control functions, through ctypes, on the library cai loads.

Only usable where `test_fake_driver.py` runs the cases with the stand-in library first on
LD_LIBRARY_PATH (`CAI_FAKE_CUDA` set to its folder).
"""

import ctypes
import os

import numpy as np

FOLDER = os.environ.get("CAI_FAKE_CUDA")
lib = ctypes.CDLL(os.path.join(FOLDER, "libcuda.so.1")) if FOLDER else None

if lib is not None:
    lib.fakeAddAllocation.argtypes = [ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint, ctypes.c_int]
    lib.fakeAddMapping.argtypes = [ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_size_t]
    lib.fakeAddStream.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong, ctypes.c_int]
    lib.fakeFail.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.fakePointersNeedContext.argtypes = [ctypes.c_int]
    lib.fakeLog.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.fakeLog.restype = ctypes.c_size_t
    lib.fakeCaptureStatus.argtypes = [ctypes.c_size_t]

HOST, DEVICE = 1, 2


def device_memory(arr, device=0, kind=DEVICE, managed=False):
    """Registers `arr`'s bytes as memory of `device` (device memory unless `kind=HOST`)."""
    start = arr.__array_interface__["data"][0]
    assert lib.fakeAddAllocation(start, arr.nbytes, device, kind, int(managed)) == 0
    return start


def mapping(start, size, reservation, device=0):
    """Registers `size` bytes at `start` as one mapping, through the virtual memory API, in
    the reservation `(start, size)`."""
    assert lib.fakeAddMapping(start, size, device, reservation[0], reservation[1]) == 0


def stream(handle, device=0, capture=0, capture_id=0, implicit=False):
    """Registers a stream handle on `device`; `capture`: 0 none, 1 active, 2 invalidated;
    `implicit`: a blocking stream whose capture makes the legacy stream unusable."""
    assert lib.fakeAddStream(handle, device, capture, capture_id, int(implicit)) == 0
    return handle


def fail(name, code):
    """Makes the driver function `name` fail with `code` (0: succeed again)."""
    lib.fakeFail(name.encode(), code)


def log():
    """The calls logged since the last `clear_log`, one per line."""
    n = lib.fakeLog(None, 0)
    buffer = ctypes.create_string_buffer(n + 1)
    lib.fakeLog(buffer, n + 1)
    return buffer.value.decode().splitlines()


def calls(prefix):
    """The logged calls that start with `prefix` (a str or a tuple of them)."""
    return [line for line in log() if line.startswith(prefix)]


def clear_log():
    lib.fakeClearLog()


def reset():
    """No registered memory or stream, no injected failure, an empty log."""
    lib.fakeClearAllocations()
    lib.fakeClearStreams()
    lib.fakeClearFailures()
    clear_log()


def live_events():
    return lib.fakeLiveEvents()


def pointers_need_context(need):
    """Makes pointer queries fail with CUDA_ERROR_INVALID_CONTEXT on a thread without a
    current context, as some drivers do (False: they work there, as documented)."""
    lib.fakePointersNeedContext(int(need))


def current_device():
    """The device of this thread's current context, or -1 for none."""
    return lib.fakeCurrentDevice()


def capture_mode():
    return lib.fakeCaptureMode()


def capture_status(handle):
    """A registered stream's capture status: 0 none, 1 active, 2 invalidated."""
    return lib.fakeCaptureStatus(handle)


def array(n=64, dtype=np.float32, device=0, **kw):
    """A host array registered as `device`'s memory, and its address."""
    arr = np.arange(n, dtype=dtype)
    return arr, device_memory(arr, device, **kw)

