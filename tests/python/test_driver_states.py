"""A CUDA driver library that loads but cannot be used: `cuInit` fails (no device, a
driver too old), or functions cai calls are missing. Stand-in libraries built here with
the C compiler take the real driver's place through LD_LIBRARY_PATH, so these run on any
Linux machine, with or without a GPU."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(__file__)

COMMON = r"""
typedef int CUresult;
static const char *name_of(CUresult e) { return e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN"; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = name_of(e); return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) {
    *s = e == 100 ? "no CUDA-capable device is detected" : "unknown error";
    return 0;
}
"""

STUBS = {
    "no-device": COMMON + "CUresult cuInit(unsigned int flags) { (void)flags; return 100; }\n",
    "too-old": COMMON + "CUresult cuInit(unsigned int flags) { (void)flags; return 0; }\n",
}

PROBE = textwrap.dedent(
    """
    import cai, cai_fixtures as fx
    from producers import Producer, cai_dict
    print("present:", cai.cuda_driver_present())
    for call in (
        lambda: cai.as_cuda_array(Producer(cai_dict(stream=7))),
        lambda: cai.pointer_attributes(0x7F0000000000),
        lambda: fx.describe_f32(Producer(cai_dict(stream=7))),
    ):
        try:
            call()
            print("no error")
        except cai.CudaDriverError as e:
            print("CudaDriverError:", e)
    # Stream None needs no driver: the import works, with nothing to check.
    print("ptr:", hex(cai.as_cuda_array(Producer(cai_dict())).ptr))
    """
)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler on Linux to build the stand-in driver libraries")
    built = {}
    for name, source in STUBS.items():
        folder = tmp_path_factory.mktemp(name)
        c = folder / "stub.c"
        c.write_text(source)
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(folder / "libcuda.so"), str(c)], check=True)
        (folder / "libcuda.so.1").symlink_to("libcuda.so")
        built[name] = str(folder)
    return built


def probe(folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env["LD_LIBRARY_PATH"] = folder + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=HERE, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "PanicException" not in r.stderr and "panicked" not in r.stderr, r.stderr
    return r.stdout.splitlines()


def test_a_driver_whose_cuinit_fails_is_a_clear_driver_error(stubs):
    lines = probe(stubs["no-device"])
    assert lines[0] == "present: True"
    reason = "the CUDA driver library was found but cannot be used: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
    assert lines[1] == f"CudaDriverError: stream: cannot synchronize on stream 7: {reason}; pass sync=False (or set CAI_IMPORT_SYNC=ignore) to skip synchronization and order the work yourself"
    assert lines[2] == f"CudaDriverError: ptr: cannot query pointer 0x7f0000000000: {reason}"
    assert lines[3].startswith(f"CudaDriverError: stream: cannot synchronize on stream 7: {reason}; set CAI_IMPORT_SYNC=ignore, or call cai.configure(import_sync='ignore')")
    assert lines[4] == "ptr: 0x7f0000000000"


def test_a_driver_without_the_functions_cai_calls_is_a_clear_driver_error(stubs):
    lines = probe(stubs["too-old"])
    assert lines[0] == "present: True"
    assert lines[1].startswith(
        "CudaDriverError: stream: cannot synchronize on stream 7: the CUDA driver library was found but cannot be used: "
        "it lacks cuCtxGetCurrent, cuCtxSetCurrent,"
    ), lines[1]
    assert "(a driver for CUDA 12.0 or later is needed)" in lines[1]
    assert lines[4] == "ptr: 0x7f0000000000"
