"""Shared set-up of the pytest suite.

The CPU suite describes made-up device pointers and streams that no driver knows. Where a
CUDA driver is present, its tests run with pointer checks and stream ordering off, so
that they test what they were written for; tests/python/gpu (real arrays on a GPU) and
tests/python/fakecuda (the stand-in driver) keep both on.
"""

import pathlib

import pytest

import cai

GPU_DIR = pathlib.Path(__file__).parent / "gpu"
FAKE_DIR = pathlib.Path(__file__).parent / "fakecuda"


@pytest.fixture(autouse=True)
def _fake_pointers_with_a_driver(request):
    parents = pathlib.Path(str(request.node.path)).parents
    if not cai.cuda_driver_present() or GPU_DIR in parents or FAKE_DIR in parents:
        yield
        return
    before = cai.configure()
    cai.configure(check_pointers=False, import_sync="ignore")
    yield
    cai.configure(**before)


def pytest_terminal_summary(terminalreporter):
    """One line per reason for skipped tests, instead of a line per test location."""
    reasons = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"skipped {count}: {reason}")
