"""cai's driver paths, run on any Linux machine against a stand-in CUDA driver.

fakecuda/fake_cuda.c is built here with the C compiler and put first on LD_LIBRARY_PATH of
a pytest process that runs fakecuda/cases.py: pointer checks, the wait and synchronize
policies, graph captures, failing driver calls, the extractors' host wait, DLPack device
export and copies, threads. It checks cai's side of the driver API (what it calls, in
which context, what it restores and releases), not the real driver: the GPU suite does
that where a GPU is lent.
"""

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
FAKE = os.path.join(HERE, "fakecuda")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler on Linux to build the stand-in driver library")
    folder = tmp_path_factory.mktemp("fakecuda")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libcuda.so.1",
         "-o", str(folder / "libcuda.so"), os.path.join(FAKE, "fake_cuda.c"), "-lpthread"],
        check=True,
    )
    (folder / "libcuda.so.1").symlink_to("libcuda.so")
    return str(folder)


def test_driver_paths_against_the_stand_in_driver(stand_in):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env["CAI_FAKE_CUDA"] = stand_in
    env["LD_LIBRARY_PATH"] = stand_in + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    env["PYTHONPATH"] = FAKE + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(FAKE, "cases.py")],
        env=env, cwd=HERE, capture_output=True, text=True, timeout=300,
    )
    output = r.stdout + r.stderr
    assert r.returncode == 0, output
    assert "skipped" not in r.stdout.splitlines()[-1], output
    assert "PanicException" not in output and "panicked" not in output, output


def test_a_driver_whose_cuinit_fails_is_named_and_pointers_go_unchecked_with_a_warning(stand_in):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env["LD_LIBRARY_PATH"] = stand_in + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    env["PYTHONPATH"] = FAKE + os.pathsep + HERE + os.pathsep + env.get("PYTHONPATH", "")
    env["FAKE_CUDA_INIT_FAILS"] = "100"  # CUDA_ERROR_NO_DEVICE
    script = """
import warnings
import cai
from producers import Producer, cai_dict
assert cai.cuda_driver_present()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    view = cai.as_cuda_array(Producer(cai_dict()), check_pointers=True)
print(view.ptr == cai_dict()["data"][0])
print([str(w.message) for w in caught if w.category is RuntimeWarning])
try:
    cai.as_cuda_array(Producer(cai_dict(stream=7)))
except cai.CudaDriverError as e:
    print(e)
"""
    r = subprocess.run([sys.executable, "-c", script], env=env, cwd=HERE, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    accepted, warned, refused = r.stdout.splitlines()
    assert accepted == "True"
    assert warned.startswith(
        "['check_pointers=True: the CUDA driver library was found but cannot be used: cuInit failed: "
        "CUDA_ERROR_NO_DEVICE (100)"
    ), warned
    assert warned.endswith(", so pointers are not checked']"), warned
    assert refused.startswith("stream: cannot synchronize on stream 7: the CUDA driver library was found but cannot be "
                              "used: cuInit failed: CUDA_ERROR_NO_DEVICE (100)"), refused
