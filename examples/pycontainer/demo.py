"""The cai round trip: a Rust container handed to Python's array libraries without a copy.

Without a GPU, the host image goes to NumPy; with one (and CuPy or PyTorch installed),
the device image goes to CuPy or PyTorch and a CuPy/torch array comes back into Rust.
"""

import numpy as np

import cai
import pycontainer


def host_round_trip():
    print("== host: a Rust Image seen by NumPy through __array_interface__")
    img = pycontainer.Image(2, 3)
    img.fill(1.5)
    a = np.asarray(img)
    print("numpy sees     ", a.dtype, a.shape, "writeable" if a.flags.writeable else "read-only")
    a[1, 2] = 10.0
    print("Rust sum after a NumPy write:", img.sum(), "(6 x 1.5 - 1.5 + 10)")
    view = cai.as_array(img)
    print("cai view       ", view)
    print("validate(img)  ", cai.validate(img) or "conforms")


def extractor_errors():
    print("\n== the extractor refuses what it cannot use, with the reason")
    # The descriptors below describe a made-up pointer: where a CUDA driver is present,
    # its pointer check would refuse them before anything else, so it is off here.
    before = cai.configure()
    cai.configure(check_pointers=False)
    try:
        _extractor_errors()
    finally:
        cai.configure(**before)


def _extractor_errors():
    for arg in (np.zeros((2, 2), np.float32), cai.from_cuda_array_interface(
            {"shape": (4,), "typestr": "<f4", "data": (0x7F0000000000, False), "version": 3})):
        try:
            pycontainer.describe(arg)
        except TypeError as e:
            print(f"TypeError: {e}")
    desc = {"shape": (3, 4), "typestr": "<f4", "data": (0x7F0000000000, True), "version": 3, "stream": None}
    print("describe:", pycontainer.describe(cai.from_cuda_array_interface(desc)))
    try:
        pycontainer.fill(cai.from_cuda_array_interface(desc), 0.0)
    except BufferError as e:
        print(f"BufferError: {e}")


def gpu_round_trip():
    try:
        img = pycontainer.DeviceImage(2, 3)
    except cai.CudaDriverError as e:
        print(f"\n== no GPU here ({e}); the device round trip runs where one is present")
        return
    print("\n== device: a Rust DeviceImage seen by CuPy / PyTorch through __cuda_array_interface__")
    print("interface      ", img.__cuda_array_interface__)
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
