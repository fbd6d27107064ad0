"""cai's benchmark table: each case's median time per operation and its ratio to a
reference measured in the same process, on this machine, their repeats interleaved.

    bash scripts/bench            # builds release wheels into .venv, runs criterion and this

Cases and targets are those of BENCHMARKS.md. GPU cases run when a GPU, the CUDA driver
and the peer libraries are present, and are listed as skipped otherwise.
"""

import argparse
import collections
import itertools
import os
import platform
import statistics
import sys
import time
import timeit

import numpy as np

import cai
import cai_fixtures as fx

PTR = 0x7F00_0000_0000
ROWS, COLS = 256, 256
rows = []  # (group, case, ns, reference, ref_ns, target_text, ok)


def loops(timer, budget=0.15):
    number, _ = timer.autorange()
    return max(1, int(number * budget / 0.2))


def per_op_ns(fn, repeats=9):
    timer = timeit.Timer(fn)
    number = loops(timer)
    times = timer.repeat(repeat=repeats, number=number)
    return statistics.median(times) / number * 1e9


def paired_ns(fn, ref_fn, repeats=41, budget=0.02, namespace=None):
    """A case and its reference, alternated in short runs: their medians, and the medians
    of the ratio and of the difference of each adjacent pair. This machine has slow phases
    of some seconds (the same call measured up to twice as slow); runs of 20 ms put both
    sides of a pair in the same phase, so the pairs' ratio keeps steady where a ratio of
    two medians taken 0.15 s apart moved by 0.5x from run to run."""
    # A statement (a str, read in `namespace`) runs in timeit's loop, in one frame; a
    # callable runs in a frame of its own on each call.
    timers = (timeit.Timer(fn, globals=namespace), timeit.Timer(ref_fn, globals=namespace))
    numbers = [loops(t, budget) for t in timers]
    times = ([], [])
    for _ in range(repeats):
        for timer, number, out in zip(timers, numbers, times):
            out.append(timer.timeit(number) / number * 1e9)
    a, b = times
    return Paired(
        statistics.median(a),
        statistics.median(b),
        statistics.median(x / y for x, y in zip(a, b)),
        statistics.median(x - y for x, y in zip(a, b)),
    )


Paired = collections.namedtuple("Paired", "ns ref_ns ratio overhead")


def case(group, name, fn, reference=None, ref_fn=None, target=None, check=None, namespace=None):
    if ref_fn is None:
        rows.append((group, name, per_op_ns(fn), reference, None, target, None))
        return
    p = paired_ns(fn, ref_fn, namespace=namespace)
    ok = check(p) if check else None
    if target is not None and "overhead" in target:
        # The figure an overhead target is checked on: the median of the pairs' differences.
        target = f"{target}: {p.overhead:.0f} ns"
    rows.append((group, name, p.ns, reference, p.ref_ns, target, ok, p.ratio))


def figure(group, name, ns, target=None, ok=None):
    rows.append((group, name, ns, None, None, target, ok))


def skipped(group, name, why):
    rows.append((group, name, None, why, None, None, None))


class DictProperty:
    """A pure-Python producer whose property returns the equivalent dict literal."""

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": (256, 256),
            "typestr": "<f4",
            "data": (0x7F0000000000, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


class HostDictProperty:
    def __init__(self, arr):
        self.base = arr
        self.ai = arr.__array_interface__

    @property
    def __array_interface__(self):
        ai = self.ai
        return {"shape": ai["shape"], "typestr": ai["typestr"], "data": ai["data"], "version": 3, "strides": None}


class StoredDict:
    """A producer whose interface is a stored dict (reading it costs an attribute lookup)."""

    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


def cpu_cases():
    m = fx.BenchMatrix(PTR, ROWS, COLS)
    py = DictProperty()
    arr = np.zeros((ROWS, COLS), np.float32)
    assert m.__cuda_array_interface__ == py.__cuda_array_interface__

    case("export", "derived #[pyclass] .__cuda_array_interface__", lambda: m.__cuda_array_interface__,
         "pure-Python dict-literal property", lambda: py.__cuda_array_interface__,
         "<= 0.5x", lambda p: p.ratio <= 0.5)
    case("export", "derived #[pyclass] .__cuda_array_interface__", lambda: m.__cuda_array_interface__,
         "numpy ndarray.__array_interface__", lambda: arr.__array_interface__,
         "<= 0.1x", lambda p: p.ratio <= 0.1)
    floor = fx.ExportFloor(py.__cuda_array_interface__)
    case("export", "derived #[pyclass] .__cuda_array_interface__", lambda: m.__cuda_array_interface__,
         "floor: a #[pyclass] getter copying a stored dict", lambda: floor.__cuda_array_interface__)
    figure("export", "its dict from the thread's cache, copied (Rust loop, ns/dict)", fx.bench_dict_build(m, 200_000))
    view = cai.as_cuda_array(StoredDict(py.__cuda_array_interface__))
    case("export", "cai.CudaArray view .__cuda_array_interface__", lambda: view.__cuda_array_interface__,
         "pure-Python dict-literal property", lambda: py.__cuda_array_interface__,
         "<= 0.40x", lambda p: p.ratio <= 0.40)
    # A fresh view's first export: of the one array, each view finds the thread's dict of
    # it; of sixteen arrays in turn, each builds its own (the thread keeps eight).
    for n in (1, 16):
        d = py.__cuda_array_interface__
        producers = itertools.cycle([StoredDict(dict(d, data=(d["data"][0] + 4096 * i, False))) for i in range(n)])
        case("export", f"a fresh view's first export, {'one array' if n == 1 else f'{n} arrays in turn'}",
             lambda: cai.as_cuda_array(next(producers)).__cuda_array_interface__,
             "the view alone", lambda: cai.as_cuda_array(next(producers)), "overhead (information)")

    case("import", "cai.as_cuda_array(p), p pure-Python, stream None", lambda: cai.as_cuda_array(py),
         "p.__cuda_array_interface__ alone", lambda: py.__cuda_array_interface__,
         "<= 2.0x", lambda p: p.ratio <= 2.0)
    case("import", "floor: a #[pyfunction] reading p's attribute, returning a view-like object", lambda: fx.read_floor(py),
         "p.__cuda_array_interface__ alone", lambda: py.__cuda_array_interface__)
    figure("import", "the reader alone (Rust loop, ns/dict)", fx.bench_parse(py.__cuda_array_interface__, 200_000))
    stored = StoredDict(py.__cuda_array_interface__)
    case("import", "cai.as_cuda_array(s), s with a stored dict", lambda: cai.as_cuda_array(stored),
         "floor: a #[pyfunction] returning a view-like object", lambda: fx.view_floor(stored))
    hp = HostDictProperty(arr)
    case("import", "cai.as_array(p), p pure-Python __array_interface__", lambda: cai.as_array(hp),
         "numpy.asarray(p)", lambda: np.asarray(hp),
         "<= 0.5x", lambda p: p.ratio <= 0.5)
    case("import", "floor: a #[pyfunction] reading p's attribute, returning a view-like object",
         lambda: fx.read_host_floor(hp), "numpy.asarray(p)", lambda: np.asarray(hp))

    view = cai.as_array(arr)
    case("dlpack", "np.from_dlpack(cai.HostArray view)", lambda: np.from_dlpack(view),
         "np.from_dlpack(ndarray)", lambda: np.from_dlpack(arr),
         "<= 1.2x", lambda p: p.ratio <= 1.2)
    case("dlpack", "cai.from_dlpack(ndarray)", lambda: cai.from_dlpack(arr),
         "cai.as_array(ndarray)", lambda: cai.as_array(arr))

    case("extractor", "#[pyfunction] f(x: PyCudaArrayRo<f32, Ix2>)", lambda: fx.takes_array(stored),
         "the same taking a plain object", lambda: fx.takes_object(stored),
         "overhead <= 200 ns", lambda p: p.overhead <= 200)
    # The overlap registry asks CPython for the caller's frame object, which CPython makes
    # at the first ask in each frame: a lambda's frame each call above, the loop's frame
    # once here (as in `python -m timeit 'f(x)'`). Information, not the target's figure.
    case("extractor", "the same f(x), called in a loop in one frame (a timeit statement)", "fx.takes_array(stored)",
         "the same taking a plain object", "fx.takes_object(stored)",
         "overhead (information)", namespace={"fx": fx, "stored": stored})
    case("extractor", "#[pyfunction] f(x: PyHostArrayRo<f32, Ix2>), x an ndarray", lambda: fx.takes_host_array(arr),
         "the same taking a plain object", lambda: fx.takes_object(arr))
    case("extractor", "#[pyfunction] f(x: PyHostArrayRo<f32, Ix2>), x an ndarray", lambda: fx.takes_host_array(arr),
         "reading ndarray.__array_interface__ alone", lambda: arr.__array_interface__)


def gpu_cases():
    if not cai.cuda_driver_present():
        skipped("gpu", "every GPU case", "no CUDA driver on this machine")
        return
    peers = {}
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise ImportError("no device")
        peers["cupy.asarray"] = cupy.asarray
    except Exception as e:  # noqa: BLE001
        skipped("gpu", "every GPU case", f"CuPy with a device is needed ({type(e).__name__}: {e})")
        return
    try:
        import torch

        peers["torch.as_tensor"] = lambda o: torch.as_tensor(o, device="cuda")
    except ImportError:
        torch = None
    try:
        import numba.cuda

        peers["numba.cuda.as_cuda_array"] = numba.cuda.as_cuda_array
    except ImportError:
        numba = None

    producers = {"CuPy array": ("cupy.asarray", cupy.zeros((ROWS, COLS), cupy.float32))}
    if torch is not None:
        producers["torch tensor"] = ("torch.as_tensor", torch.zeros((ROWS, COLS), device="cuda"))
    if numba is not None:
        producers["Numba device array"] = ("numba.cuda.as_cuda_array", numba.cuda.to_device(np.zeros((ROWS, COLS), np.float32)))
    for label, (own, obj) in producers.items():
        others = {k: f for k, f in peers.items() if k != own}  # the producer's own asarray is a no-op
        timings = {k: per_op_ns(lambda f=f: f(obj)) for k, f in others.items()}
        fastest = min(timings, key=timings.get)
        ns = per_op_ns(lambda: cai.as_cuda_array(obj))
        rows.append(("gpu import", f"cai.as_cuda_array({label})", ns, f"{fastest} (fastest peer)", timings[fastest],
                     ">= 5x faster", ns * 5 <= timings[fastest]))

    # A producer with ~10 ms of work pending on its stream.
    buf = fx.CudarcBuffer([64 << 20])
    own_stream, _ = buf.streams()
    repeat = 1
    while True:
        t0 = time.perf_counter()
        buf.fill(1.0, repeat=repeat)
        cupy.cuda.ExternalStream(own_stream).synchronize()
        if time.perf_counter() - t0 > 0.010 or repeat > 4096:
            break
        repeat *= 2
    consumer = cupy.cuda.Stream(non_blocking=True)

    def pending(import_fn):
        samples = []
        for _ in range(20):
            buf.fill(2.0, repeat=repeat)
            t0 = time.perf_counter()
            import_fn()
            samples.append(time.perf_counter() - t0)
            cupy.cuda.ExternalStream(own_stream).synchronize()
        return statistics.median(samples) * 1e9

    ours = pending(lambda: cai.as_cuda_array(buf, stream=consumer))
    unchecked = pending(lambda: cai.as_cuda_array(buf, stream=consumer, check_pointers=False))
    export_only = pending(lambda: buf.__cuda_array_interface__)
    rows.append(("gpu pending 10 ms", "  of which: the producer's export (its streams joined)", export_only, None, None, None, None))
    rows.append(("gpu pending 10 ms", "  cai.as_cuda_array without pointer checks", unchecked, None, None, None, None))
    for peer, fn in [("cupy.asarray", lambda: cupy.asarray(buf))] + (
        [("numba.cuda.as_cuda_array", lambda: numba.cuda.as_cuda_array(buf))] if numba is not None else []
    ):
        rows.append(("gpu pending 10 ms", "cai.as_cuda_array, default policy", ours, peer, pending(fn), "< 50 us", ours < 50_000))


def criterion_rows(path):
    if not path or not os.path.exists(path):
        return
    for line in open(path):
        name, _, ns = line.strip().rpartition(" ")
        figure("rust (criterion)", name, float(ns))


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = "none"
    try:
        import subprocess

        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip() or "none"
    except Exception:  # noqa: BLE001
        pass
    return (f"machine: {cpu}, {os.cpu_count()} cores; GPU: {gpu}; Python {platform.python_version()}, "
            f"NumPy {np.__version__}, cai {cai.__version__}")


def fmt_ns(ns):
    if ns is None:
        return ""
    return f"{ns / 1000:.1f} us" if ns >= 10_000 else f"{ns:.0f} ns"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--criterion", help="file of 'name ns' lines from cargo bench")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    # The CPU cases describe a made-up pointer, which a driver's pointer check would refuse;
    # the GPU cases import real arrays with the default options.
    before = cai.configure()
    cai.configure(check_pointers=False)
    cpu_cases()
    cai.configure(**before)
    gpu_cases()
    criterion_rows(args.criterion)
    print(machine())
    header = ("group", "case", "median", "reference", "ref median", "ratio", "target", "met")
    table = []
    for group, name, ns, ref, ref_ns, target, ok, *paired in rows:
        # A paired case's ratio is the median of its pairs' ratios (see paired_ns).
        ratio = paired[0] if paired else (ns / ref_ns if ns and ref_ns else None)
        ratio = f"{ratio:.2f}x" if ratio is not None else ""
        met = {True: "yes", False: "NO", None: ""}[ok]
        table.append((group, name, fmt_ns(ns) if ns is not None else "skipped", ref or "", fmt_ns(ref_ns), ratio, target or "", met))
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in table:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
        for r in [header] + table:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    sys.exit(main())
