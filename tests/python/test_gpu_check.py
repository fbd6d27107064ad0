"""scripts/gpu-check's `run` on a machine without a GPU, and its summary's verdicts: a
run that tested nothing on the GPU must fail."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SUMMARY = os.path.join(ROOT, "scripts", "gpu_summary.py")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi (a GPU machine)")
def test_run_refuses_without_a_gpu(tmp_path):
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu-check"), "run", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "gpu-check FAILED: nvidia-smi did not run: no GPU here" in r.stdout
    assert (tmp_path / "summary.md").read_text().startswith("gpu-check FAILED: nvidia-smi did not run")


def test_run_refuses_without_a_build(tmp_path):
    # A checkout with no .gpu-check, on a machine that looks like a GPU machine.
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA Stand-in, 580.0, 1 MiB'\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(
        ["bash", "-c", f'cd "{tmp_path}" && mkdir -p scripts && cp "{ROOT}/scripts/gpu-check" scripts/ && bash scripts/gpu-check run out'],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert r.returncode == 1
    assert "no .gpu-check/wheels: run 'bash scripts/gpu-check build' first and carry .gpu-check" in r.stdout


def stand_in_gpu_machine(tmp_path):
    """A checkout with scripts/gpu-check and a stand-in nvidia-smi first on PATH, and a
    build folder whose record of the sources matches them."""
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA Stand-in, 580.0, 1 MiB'\n")
    smi.chmod(0o755)
    (tmp_path / "scripts").mkdir()
    for name in ("gpu-check", "gpu_summary.py"):
        shutil.copy(os.path.join(ROOT, "scripts", name), tmp_path / "scripts" / name)
    record_sources(tmp_path, ["scripts/gpu-check", "scripts/gpu_summary.py"])
    return dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


def record_sources(root, files):
    """What `gpu-check build` records of the sources it built: the list and their hash."""
    build = root / ".gpu-check"
    build.mkdir(exist_ok=True)
    (build / "files").write_bytes(b"".join(f.encode() + b"\0" for f in files))
    (build / "commit").write_text("abc1234\n")
    script = f'source <(sed -n "/^tree_hash()/,/^}}/p" "{ROOT}/scripts/gpu-check"); BUILD=.gpu-check; tree_hash > .gpu-check/tree'
    subprocess.run(["bash", "-c", script], cwd=root, check=True)


def test_run_refuses_a_build_of_other_sources(tmp_path):
    env = stand_in_gpu_machine(tmp_path)
    wheel(tmp_path / ".gpu-check" / "wheels", "cai_stand_in", "cai_stand_in")
    with open(tmp_path / "scripts" / "gpu_summary.py", "a") as f:
        f.write("# changed after the build\n")
    r = subprocess.run(["bash", "scripts/gpu-check", "run", "out"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert "build of abc1234" in r.stdout, r.stdout
    assert "gpu-check FAILED: the sources here are not the ones .gpu-check was built from" in r.stdout, r.stdout


def test_every_step_ends_by_the_deadline_and_a_test_that_hangs_is_counted(tmp_path):
    # A Python with numpy and pytest and a stand-in CuPy that sees one device gets past the
    # peer libraries; then a test binary that lists nothing, one test that passes and one
    # that hangs. The hang takes what is left of a 15 s budget: every later step is
    # recorded as not run, and the summary is still written.
    env = stand_in_gpu_machine(tmp_path)
    wheel(tmp_path / ".gpu-check" / "wheels", "cai_stand_in", "cai_stand_in")
    # Stand-ins of the test tools this Python lacks (backports and the like, which neither
    # pytest nor hypothesis imports here).
    import importlib.util

    for tool, module in TOOLS.items():
        if importlib.util.find_spec(module) is None:
            wheel(tmp_path / ".gpu-check" / "pywheels", tool, module)
    cupy = tmp_path / "stand_in" / "cupy"
    cupy.mkdir(parents=True)
    (cupy / "__init__.py").write_text(
        "class cuda:\n    class runtime:\n        getDeviceCount = staticmethod(lambda: 1)\n"
        "        driverGetVersion = runtimeGetVersion = staticmethod(lambda: 13000)\n"
    )
    # A JAX that imports at once, and no torch, Numba or cuda.core (the budget is for the
    # steps below; on a GPU machine the real ones take seconds to import).
    (tmp_path / "stand_in" / "jax.py").write_text("def devices():\n    return []\n")
    for peer in ("torch", "numba", "cuda"):
        (tmp_path / "stand_in" / f"{peer}.py").write_text("raise ImportError('a stand-in: not this test')\n")
    bins = tmp_path / ".gpu-check" / "bin"
    bins.mkdir()
    (bins / "a_broken").write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n")
    (bins / "b_tests").write_text(
        '#!/bin/bash\ncase "$1" in\n--list) echo "quick: test"; echo "slow: test" ;;\n'
        '--exact) if [ "$2" = slow ]; then printf "test slow ... "; exec sleep 60; fi; echo "test quick ... ok" ;;\nesac\n'
    )
    # Left without the execute bit, as a copy may leave them: the run sets it.
    pythonpath = os.pathsep.join([str(tmp_path / "stand_in"), os.environ.get("PYTHONPATH", "")])
    env = dict(env, PYTHON=sys.executable, PYTHONPATH=pythonpath, GPU_CHECK_SECONDS="30")
    r = subprocess.run(["bash", "scripts/gpu-check", "run", "out"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stdout
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| Rust GPU tests | 1 | 1 | 0 |" in summary, summary
    assert "- passed: quick" in summary and "- FAILED: slow (timed out after" in summary, summary
    for part in ("Rust a_broken (listed no tests)", "pytest gpu (not run: no time left)",
                 "pytest cpu (not run: no time left)", "demo (not run: no time left)"):
        assert part in summary, (part, summary)
    assert "No test of the GPU pytest suite passed" in summary, summary


# The test tools gpu-check installs where they are missing, as wheel: module.
TOOLS = {t: t for t in "pytest pluggy iniconfig packaging pygments exceptiongroup tomli hypothesis sortedcontainers typing_extensions".split()}
TOOLS["attrs"] = "attr"


def wheel(folder, name, module):
    """A pure-Python wheel of `name` holding the module `module` (a marker file)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-0-py3-none-any.whl", "w") as z:
        z.writestr(f"{module}.py", f"MARK = {name!r}\n")
        z.writestr(f"{name}-0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
        z.writestr(f"{name}-0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{name}-0.dist-info/RECORD", "")


def bare(env, python):
    """`env` for a run with the bare Python `python`: without the PYTHONPATH of the run of
    this suite, whose packages (pytest among them) the bare Python must not see."""
    return {**{k: v for k, v in env.items() if k != "PYTHONPATH"}, "PYTHON": str(python)}


def test_run_installs_the_test_tools_a_python_without_pip_lacks(tmp_path):
    # The GPU machine's Python may have neither pip (a venv made by uv) nor pytest: the
    # build's wheels are unpacked, the tools from the build's pure-Python wheels. (The run
    # then stops here, at the peer libraries this Python does not have.)
    import venv

    env = stand_in_gpu_machine(tmp_path)
    venv.create(tmp_path / "py", with_pip=False)
    python = tmp_path / "py" / "bin" / "python"
    wheel(tmp_path / ".gpu-check" / "wheels", "cai_stand_in", "cai_stand_in")
    for tool, module in TOOLS.items():
        wheel(tmp_path / ".gpu-check" / "pywheels", tool, module)
    r = subprocess.run(
        ["bash", "scripts/gpu-check", "run", "out"], cwd=tmp_path, capture_output=True, text=True,
        env=bare(env, python), timeout=120,
    )
    assert r.returncode == 1
    assert "installing what this Python lacks: pytest-0-py3-none-any.whl" in r.stdout, r.stdout
    assert "gpu-check FAILED: a peer library did not import" in r.stdout, r.stdout
    machine = (tmp_path / "out" / "machine.md").read_text()
    assert "- pytest" in machine and "pytest: FAILED" not in machine, machine
    assert "- numpy: FAILED to import" in machine, machine
    # A peer that only some tests need is named, and does not stop the run by itself.
    assert "- torch: does not import (ModuleNotFoundError" in machine and "its tests skip" in machine, machine


def test_run_names_a_missing_test_tool_without_a_wheel(tmp_path):
    import venv

    env = stand_in_gpu_machine(tmp_path)
    venv.create(tmp_path / "py", with_pip=False)
    wheel(tmp_path / ".gpu-check" / "wheels", "cai_stand_in", "cai_stand_in")
    r = subprocess.run(
        ["bash", "scripts/gpu-check", "run", "out"], cwd=tmp_path, capture_output=True, text=True,
        env=bare(env, tmp_path / "py" / "bin" / "python"), timeout=120,
    )
    assert r.returncode == 1
    assert "gpu-check FAILED: pytest does not import and .gpu-check/pywheels has no wheel of it" in r.stdout, r.stdout


def junit(path, outcomes):
    cases = []
    for i, outcome in enumerate(outcomes):
        inner = {"passed": "", "skipped": '<skipped message="no GPU"/>', "failed": '<failure message="boom"/>'}[outcome]
        cases.append(f'<testcase classname="gpu.test_x" name="t{i}">{inner}</testcase>')
    path.write_text(f'<testsuites><testsuite>{"".join(cases)}</testsuite></testsuites>')


def summarize(out, *failed):
    return subprocess.run([sys.executable, SUMMARY, "summary", str(out), "abc123", "65", *failed], capture_output=True, text=True)


def test_summary_fails_a_run_where_every_gpu_test_was_skipped(tmp_path):
    junit(tmp_path / "pytest-gpu.xml", ["skipped", "skipped"])
    (tmp_path / "rust.log").write_text("test a ... ignored, needs a GPU\n")
    r = summarize(tmp_path)
    assert r.returncode == 1
    assert "No test of the GPU pytest suite passed: this run tested nothing on the GPU." in r.stdout
    assert "| pytest tests/python/gpu | 0 | 0 | 2 |" in r.stdout


def test_summary_does_not_count_rust_tests_that_pass_without_a_device(tmp_path):
    # A Rust GPU test that finds no second device returns early and passes: with the GPU
    # pytest suite all skipped, the run still tested nothing on the GPU.
    junit(tmp_path / "pytest-gpu.xml", ["skipped"])
    (tmp_path / "rust.log").write_text("test two_devices ... ok\n")
    r = summarize(tmp_path)
    assert r.returncode == 1
    assert "| Rust GPU tests | 1 | 0 | 0 |" in r.stdout


def test_summary_lists_every_outcome(tmp_path):
    junit(tmp_path / "pytest-gpu.xml", ["passed", "failed", "skipped"])
    (tmp_path / "rust.log").write_text("test a ... ok\ntest b ... FAILED\n")
    (tmp_path / "bench.md").write_text("| gpu | row |\n")
    r = summarize(tmp_path, "pytest gpu")
    assert r.returncode == 0, r.stdout  # the runner fails the run on its failed parts
    assert "## gpu-check at abc123: 1 min 5 s" in r.stdout
    for line in ("- passed: test_x::t0", "- FAILED: test_x::t1 (boom)", "- skipped: test_x::t2 (no GPU)",
                 "- passed: a", "- FAILED: b", "| gpu | row |", "Failed parts: pytest gpu"):
        assert line in r.stdout, line


def test_summary_reads_the_log_where_the_gpu_suite_left_no_junit_file(tmp_path):
    # A run killed inside a driver call writes no JUnit file: the -v lines in run.log
    # still say what ran. The verdict comes again after the benchmark table.
    (tmp_path / "run.log").write_text(
        "gpu/test_streams.py::test_a PASSED   [ 50%]\n"
        "gpu/test_memory.py::test_b[x] FAILED   [100%]\n"
        "test_cpu.py::test_c PASSED\n"
    )
    (tmp_path / "bench.md").write_text("| gpu | row |\n")
    r = summarize(tmp_path, "pytest gpu (no JUnit file)")
    assert "| pytest tests/python/gpu | 1 | 1 | 0 |" in r.stdout, r.stdout
    assert "- passed: test_streams::test_a" in r.stdout and "- FAILED: test_memory::test_b[x]" in r.stdout
    verdict = r.stdout.rindex("### Verdict")
    assert r.stdout.rindex("| gpu | row |") < verdict
    assert "- pytest tests/python/gpu: 1 passed, 1 failed, 0 skipped" in r.stdout[verdict:]
    assert "Failed parts: pytest gpu (no JUnit file)" in r.stdout[verdict:]
