"""The cai round trip: a Rust container handed to Python's array libraries without a copy.

Without a GPU, the host image goes to NumPy; with one (and CuPy or PyTorch installed),
the device image goes to CuPy or PyTorch and a CuPy/torch array comes back into Rust.
"""

import numpy as np

import cai
import pycontainer


def host_round_trip():
    print("== host: a Rust Image seen by NumPy through __array_interface__ (zero copy)")
    img = pycontainer.Image(2, 3)
    img.fill(1.5)
    a = np.asarray(img)
    same = a.__array_interface__["data"][0] == img.address()
    print("numpy sees       ", a.dtype, a.shape, "writeable" if a.flags.writeable else "read-only")
    print("same memory      ", f"numpy 0x{a.__array_interface__['data'][0]:x} == Rust 0x{img.address():x}: {same}")
    a[1, 2] = 10.0
    print("Rust sum after a NumPy write:", img.sum(), "(6 x 1.5 - 1.5 + 10)")
    d = np.from_dlpack(img)
    print("through DLPack   ", f"np.from_dlpack(img) at 0x{d.__array_interface__['data'][0]:x}: same memory "
          f"{d.__array_interface__['data'][0] == img.address()}")
    print("cai view         ", cai.as_array(img))
    print("validate(img)    ", cai.validate(img) or "conforms")

    print("\n== host: NumPy arrays into Rust functions (PyHostArray, safe slices, zero copy)")
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    pycontainer.brighten(m, 0.5)
    print("brighten(m, 0.5) wrote into NumPy's memory:", m.tolist())
    print("total(m)         ", pycontainer.total(m), "and total(img):", pycontainer.total(img))

    print("\n== host: a Rust container that grows while NumPy views it")
    before = img.address()
    img.add_rows(1000, 2.0)
    print("pixels moved     ", f"0x{before:x} -> 0x{img.address():x}; the old view still reads its memory:",
          a[1].tolist(), "(StableVec keeps the old allocation until the image is dropped)")


def extractor_errors():
    print("\n== refusals: each error below is expected, and says what was wrong")
    # The descriptors below describe a made-up pointer: where a CUDA driver is present,
    # its pointer check would refuse them before anything else, so it is off here.
    before = cai.configure()
    cai.configure(check_pointers=False)
    try:
        _extractor_errors()
    finally:
        cai.configure(**before)


def expected(call, *args):
    try:
        call(*args)
    except (TypeError, ValueError, BufferError) as e:
        print(f"(expected) {type(e).__name__}: {e}".replace("\n", " "))
    else:
        raise AssertionError("this call should have been refused")


def _extractor_errors():
    expected(pycontainer.describe, np.zeros((2, 2), np.float32))  # host memory for a device argument
    expected(pycontainer.describe, cai.from_cuda_array_interface(
        {"shape": (4,), "typestr": "<f4", "data": (0x7F0000000000, False), "version": 3}))  # 1-d for 2-d
    desc = {"shape": (3, 4), "typestr": "<f4", "data": (0x7F0000000000, True), "version": 3, "stream": None}
    print("describe:", pycontainer.describe(cai.from_cuda_array_interface(desc)))
    expected(pycontainer.fill, cai.from_cuda_array_interface(desc), 0.0)  # read-only for writing
    expected(pycontainer.brighten, np.zeros((2, 2), np.float64), 1.0)  # f64 for f32
    expected(pycontainer.brighten, np.zeros((3, 2), np.float32).T, 1.0)  # not C-contiguous
    a = np.zeros(4, np.float32)
    ro = a.reshape(2, 2)
    ro.flags.writeable = False
    expected(pycontainer.brighten, ro, 1.0)  # read-only for writing


def gpu_round_trip():
    try:
        img = pycontainer.DeviceImage(2, 3)
    except cai.CudaDriverError as e:
        print(f"\n== no GPU here ({e}); the device round trip runs where one is present")
        return
    print("\n== device: a Rust DeviceImage seen by CuPy / PyTorch through __cuda_array_interface__")
    print("interface      ", img.__cuda_array_interface__)
    empty = pycontainer.DeviceImage(0, 3)
    assert empty.to_list() == [] and empty.__cuda_array_interface__["data"] == (0, False)
    print("an empty image exports pointer 0:", empty.__cuda_array_interface__["data"])
    try:
        import cupy

        c = cupy.asarray(img)
        c += 2.0
        cupy.cuda.runtime.deviceSynchronize()
        print("after a CuPy write, Rust reads", img.to_list())
        pycontainer.fill(c, 7.0)
        print("after a Rust fill of the CuPy array:", c.get().ravel().tolist())
    except ImportError:
        print("CuPy is not installed")
    try:
        import torch

        t = torch.as_tensor(img, device="cuda")
        t.mul_(3.0)
        torch.cuda.synchronize()
        print("after a torch write, Rust reads", img.to_list())
        print("describe(torch tensor):", pycontainer.describe(torch.zeros(4, 5, device="cuda").T))
    except ImportError:
        print("PyTorch is not installed")


if __name__ == "__main__":
    host_round_trip()
    extractor_errors()
    gpu_round_trip()
