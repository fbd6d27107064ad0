"""GPU conformance suite: runs only where a CUDA driver and a device are present."""

import pathlib

import numpy as np
import pytest

import cai
from gpu_helpers import Driver

# numba-cuda registers an overload of `np.row_stack`, which NumPy 2.5 removed; without
# this alias every Numba kernel fails to compile on such a NumPy (numba-cuda's defect,
# not cai's). `row_stack` was an alias of `vstack`.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack


def device_count():
    if not cai.cuda_driver_present():
        return 0
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - any failure means no usable device here
        return 0


GPUS = device_count()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy (none found here); run scripts/gpu-check where one is")
    # A failure cai reports to sys.unraisablehook (the extractors' hand-back of the
    # memory to the producer's stream, as an argument goes) fails the test: pytest would
    # only warn. So does any other unraisable exception, a peer library's included,
    # charged to the test during which it is reported.
    unraisable = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
    here = pathlib.Path(__file__).parent
    for item in items:
        if here not in pathlib.Path(item.path).parents:
            continue
        item.add_marker(pytest.mark.gpu)
        item.add_marker(unraisable)
        if GPUS == 0:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def checked_pointers():
    before = cai.configure()
    cai.configure(check_pointers=True, import_sync="wait")
    yield
    cai.configure(**before)


@pytest.fixture(scope="session")
def driver():
    return Driver()
