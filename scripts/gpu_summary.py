"""Helpers of scripts/gpu-check, run with the GPU machine's Python (standard library only).

    python scripts/gpu_summary.py machine
        prints the device, the driver and the peer libraries' versions as Markdown; exits 1
        when CuPy sees no device or one of NEEDED does not import (the tests of another
        peer that does not import skip, and the line says so)
    python scripts/gpu_summary.py summary OUTDIR COMMIT SECONDS [FAILED_PART ...]
        prints the outcome of every test (pytest JUnit files and the Rust log in OUTDIR)
        and the benchmark rows; exits 1 when no test of the GPU pytest suite passed (a Rust
        GPU test that finds no second device passes without testing: they do not count)
"""

import importlib
import os
import platform
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

PEERS = ["numpy", "cupy", "torch", "numba", "numba.cuda", "jax", "cuda.core", "pytest"]
# Without these the run tests nothing; every test that needs another peer skips without it.
NEEDED = {"numpy", "cupy", "pytest"}


def machine():
    ok = True
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True, text=True,
    ).stdout.strip()
    print(f"- GPU: {smi or 'none'}")
    # The kernel's release tells a sandboxed runtime (gVisor reports 4.4.0), where some
    # driver calls (virtual memory, managed memory) may fail for reasons not cai's.
    print(f"- kernel {platform.release()}")
    print(f"- Python {sys.version.split()[0]} ({sys.executable})")
    for name in PEERS:
        try:
            m = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure to import is reported
            if name in NEEDED:
                print(f"- {name}: FAILED to import: {type(e).__name__}: {e}")
                ok = False
            else:
                print(f"- {name}: does not import ({type(e).__name__}: {e}); its tests skip")
            continue
        version = getattr(m, "__version__", "")
        print(f"- {name} {version}".rstrip())
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        print(f"- CUDA driver {cupy.cuda.runtime.driverGetVersion()}, runtime {cupy.cuda.runtime.runtimeGetVersion()}, {count} device(s)")
        ok &= count > 0
    except Exception as e:  # noqa: BLE001
        print(f"- CuPy sees no device: {type(e).__name__}: {e}")
        ok = False
    try:
        import jax

        devices = jax.devices()
        print(f"- JAX devices: {devices}")
        if not any(d.platform == "gpu" for d in devices):
            print("- JAX has no GPU device: its GPU tests fail or skip")
    except Exception as e:  # noqa: BLE001
        print(f"- JAX has no GPU backend ({type(e).__name__}: {e}): its GPU tests fail or skip")
    return 0 if ok else 1


def verbose_lines(log, prefix):
    """(name, outcome, "") for each `-v` result line of a pytest run in `log` whose test
    path starts with `prefix`: what is left when a run killed before its end wrote no
    JUnit file. None when there is none."""
    if not os.path.exists(log):
        return None
    rows = []
    outcomes = {"PASSED": "passed", "FAILED": "FAILED", "ERROR": "FAILED", "SKIPPED": "skipped", "XFAIL": "skipped"}
    for line in open(log, errors="replace"):
        m = re.match(rf"^{re.escape(prefix)}(\S*?)::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL)\b", line.strip())
        if m:
            module = os.path.splitext(os.path.basename(m.group(1)))[0]
            rows.append((f"{module}::{m.group(2)}", outcomes[m.group(3)], ""))
    return rows or None


def junit(path, log=None, prefix=None):
    """(name, outcome, detail) for each test case of a pytest JUnit file; without the file,
    the `-v` lines of `log` for tests under `prefix`, if any."""
    if not os.path.exists(path):
        return verbose_lines(log, prefix) if log else None
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"
        outcome, detail = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, detail = "FAILED", (child.get("message") or "").splitlines()[0][:200] if child.get("message") else ""
            elif child.tag == "skipped":
                outcome, detail = "skipped", (child.get("message") or "")[:200]
        rows.append((name, outcome, detail))
    return rows


def rust(path):
    if not os.path.exists(path):
        return None
    rows = []
    for line in open(path, errors="replace"):
        m = re.match(r"^test (\S+) \.\.\. (ok|FAILED|ignored)(?:, (.*))?$", line.strip())
        if m:
            outcome = {"ok": "passed", "FAILED": "FAILED", "ignored": "skipped"}[m.group(2)]
            rows.append((m.group(1), outcome, m.group(3) or ""))
    return rows


def counts(rows):
    c = {"passed": 0, "FAILED": 0, "skipped": 0}
    for _, outcome, _ in rows:
        c[outcome] += 1
    return c


def summary(out, commit, seconds, failed_parts):
    print(f"\n## gpu-check at {commit}: {int(seconds) // 60} min {int(seconds) % 60} s\n")
    if os.path.exists(os.path.join(out, "machine.md")):
        print(open(os.path.join(out, "machine.md")).read())
    suites = [
        ("Rust GPU tests", rust(os.path.join(out, "rust.log"))),
        ("pytest tests/python/gpu", junit(os.path.join(out, "pytest-gpu.xml"), os.path.join(out, "run.log"), "gpu/")),
        ("pytest tests/python (CPU suite)", junit(os.path.join(out, "pytest-cpu.xml"))),
    ]
    print("| suite | passed | failed | skipped |\n|---|---|---|---|")
    for title, rows in suites:
        if rows is None:
            print(f"| {title} | did not run | | |")
        else:
            c = counts(rows)
            print(f"| {title} | {c['passed']} | {c['FAILED']} | {c['skipped']} |")
    for title, rows in suites[:2]:
        print(f"\n### {title}\n")
        for name, outcome, detail in rows or []:
            print(f"- {outcome}: {name}" + (f" ({detail})" if detail else ""))
    for title, rows in suites[2:]:
        bad = [r for r in rows or [] if r[1] != "passed"]
        if bad:
            print(f"\n### {title}: not passed\n")
            for name, outcome, detail in bad:
                print(f"- {outcome}: {name}" + (f" ({detail})" if detail else ""))
    bench = os.path.join(out, "bench.md")
    if os.path.exists(bench):
        print("\n### Benchmarks\n")
        print(open(bench).read())
    # The verdict again, last: a reader of the output's tail (the benchmark table is long)
    # sees it.
    print("\n### Verdict\n")
    for title, rows in suites:
        c = counts(rows) if rows is not None else None
        print(f"- {title}: " + (f"{c['passed']} passed, {c['FAILED']} failed, {c['skipped']} skipped" if c else "did not run"))
    if failed_parts:
        print(f"\nFailed parts: {', '.join(failed_parts)}")
    passed = sum(1 for r in suites[1][1] or [] if r[1] == "passed")
    if passed == 0:
        print("\nNo test of the GPU pytest suite passed: this run tested nothing on the GPU.")
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["machine"]:
        sys.exit(machine())
    if sys.argv[1:2] == ["summary"] and len(sys.argv) >= 5:
        sys.exit(summary(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]))
    sys.exit(__doc__)
