"""Stream semantics on a real device: contexts, threads, per-thread streams, extractors
launching on their own streams, and graph capture."""

import threading
import time

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from gpu_helpers import Dict, cai_dict

N = 64 << 20  # 256 MiB of f32: 100 memsets keep a stream busy for milliseconds


def last_value(cupy, ptr, stream_ptr, count=N):
    """The last f32 of `count` at `ptr`, copied on `stream_ptr` and waited for."""
    host = np.empty(1, np.float32)
    cupy.cuda.runtime.memcpyAsync(host.ctypes.data, ptr + (count - 1) * 4, 4, cupy.cuda.runtime.memcpyDeviceToHost, stream_ptr)
    cupy.cuda.runtime.streamSynchronize(stream_ptr)
    return float(host[0])


# -- extractors: a Rust function launching on a stream of its own ----------------------------


@pytest.mark.parametrize("how", ["stream", "host", "cudarc"])
def test_a_rust_function_on_a_non_blocking_stream_runs_after_the_producer(how):
    """100 trials: the producer leaves 100 memsets pending on its stream, then a Rust
    function writes on a new non-blocking cudarc stream. Its value must be the last."""
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([N])
    ptr = buf.__cuda_array_interface__["data"][0]
    for trial in range(100):
        buf.fill(float(trial), side=trial % 2 == 1, repeat=100)
        fx.fill_on_new_stream(buf, -1.0, how)
        cupy.cuda.runtime.deviceSynchronize()
        got = last_value(cupy, ptr, 0)
        assert got == -1.0, f"trial {trial}: read {got}: the producer's pending work ran after the Rust function's"


def test_the_producer_work_after_a_rust_function_waits_for_the_function_stream():
    """The specification's other half, 20 trials: a Rust function leaves 20 memsets pending
    on a stream of its own and returns; the producer's next write, on its own stream, must
    land after them (the extractor made the producer's stream wait as the argument went)."""
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([N])
    ptr = buf.__cuda_array_interface__["data"][0]
    for trial in range(20):
        fx.fill_on_new_stream(buf, -1.0, "stream, pending")
        buf.fill(float(trial))
        cupy.cuda.runtime.deviceSynchronize()
        got = last_value(cupy, ptr, 0)
        assert got == float(trial), f"trial {trial}: read {got}: the Rust function's pending work ran after the producer's"


def test_the_producer_work_after_a_rust_function_waits_for_a_stream_it_named_by_handle():
    """The other half again, for a stream the function names by its handle (a `Stream`
    value: a CuPy stream's pointer), 20 trials: 20 memsets left pending on that stream by
    the function's body must land before the producer's next write on its own stream."""
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([N])
    ptr = buf.__cuda_array_interface__["data"][0]
    consumer = cupy.cuda.Stream(non_blocking=True)

    def pending():
        for _ in range(20):
            cupy.cuda.runtime.memsetAsync(ptr, 0xFF, N * 4, consumer.ptr)  # f32 NaN

    for trial in range(20):
        fx.order_on_streams(buf, [consumer.ptr], pending)
        buf.fill(float(trial))
        cupy.cuda.runtime.deviceSynchronize()
        got = last_value(cupy, ptr, 0)
        assert got == float(trial), f"trial {trial}: read {got}: the function's pending work ran after the producer's"


def test_a_function_ordering_on_a_capturing_stream_leaves_the_capture_valid():
    """A function orders a busy producer before a stream that captures a graph (the host
    waits for the producer once, at capture time) and hands the memory back as the
    argument goes: neither joins nor invalidates the capture, and no failure reaches
    sys.unraisablehook."""
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([N])
    s = cupy.cuda.Stream(non_blocking=True)
    out = cupy.zeros(1 << 16, cupy.float32)
    # Compile and load the kernel before the capture (drivers before CUDA 12.3 refuse a
    # load while a capture is under way), and let the zeros land.
    out += 1.0
    out -= 1.0
    cupy.cuda.runtime.deviceSynchronize()
    buf.fill(3.0, repeat=100)
    with s:
        s.begin_capture()
        try:
            fx.order_on_streams(buf, [s.ptr], lambda: None)
            out += 1.0  # captured, not run
        finally:
            graph = s.end_capture()
    graph.launch(stream=s)
    s.synchronize()
    assert float(out.min()) == 1.0 == float(out.max())


def test_extractor_ordering_errors_name_the_process_wide_opt_outs():
    cupy = pytest.importorskip("cupy")
    s = cupy.cuda.Stream(non_blocking=True)
    s.begin_capture()
    try:
        a = Dict(cai_dict(0, 0, typestr="<f4", stream=s.ptr))  # an empty array: no pointer to check
        with pytest.raises(cai.CudaDriverError, match=r"capturing a CUDA graph.*CAI_IMPORT_SYNC=ignore.*cai\.configure"):
            fx.extract_and_settle(a)
    finally:
        s.end_capture()


# -- contexts and threads ----------------------------------------------------------------------


def test_entry_points_leave_the_current_context_as_found(driver):
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(1 << 16, dtype=cupy.float32)
    buf = fx.CudarcBuffer([1 << 16])
    side = cupy.cuda.Stream(non_blocking=True)
    busy = Dict(cai_dict(a.data.ptr, a.nbytes, "<f4", stream=side.ptr), owner=a)
    calls = {
        "as_cuda_array": lambda: cai.as_cuda_array(busy),
        "as_cuda_array(stream=)": lambda: cai.as_cuda_array(busy, stream=side.ptr),
        "synchronize policy": lambda: cai.as_cuda_array(busy, policy="synchronize"),
        "from_cuda_array_interface": lambda: cai.from_cuda_array_interface(busy.desc),
        "pointer_attributes": lambda: cai.pointer_attributes(a.data.ptr),
        "export of a Rust producer": lambda: buf.__cuda_array_interface__,
        "as_cuda_array of a Rust producer": lambda: cai.as_cuda_array(buf),
        "extractor": lambda: fx.describe_f32(busy),
        "extractor, host wait": lambda: fx.extract_and_settle(busy),
        "cudarc view": lambda: fx.zero_with_cudarc(busy),
        "extractor on a cudarc stream": lambda: fx.fill_on_new_stream(busy, 1.0, "stream"),
    }
    failures = []

    def run(where):
        before = driver.current_context()
        for name, call in calls.items():
            call()
            after = driver.current_context()
            if after != before:
                failures.append(f"{where}: {name} left context {after} current (was {before})")
        return before

    t = threading.Thread(target=lambda: failures.append(("thread", run("a thread with no context"))))
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "the thread did not finish in 60 s"
    assert ("thread", None) in failures, "the new thread had a context current before any call"
    failures.remove(("thread", None))
    main = run("the main thread")
    assert main is not None
    assert not failures, failures


def test_an_import_from_a_thread_without_context_works_and_leaves_none(driver):
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([N])
    own, _ = buf.streams()
    results = []

    def consumer():
        before = driver.current_context()
        buf.fill(7.0, repeat=50)
        v = cai.as_cuda_array(buf)  # stream 1 of device 0's primary context waits
        results.append((before, driver.current_context(), v.ptr))

    t = threading.Thread(target=consumer)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "the thread did not finish in 60 s"
    (before, after, ptr) = results[0]
    assert before is None and after is None
    # The legacy default stream of the primary context (CuPy's) was made to wait.
    assert last_value(cupy, ptr, 0) == 7.0


def test_eight_threads_import_at_once():
    cupy = pytest.importorskip("cupy")
    n = 8 << 20
    bufs = [fx.CudarcBuffer([n]) for _ in range(8)]
    barrier = threading.Barrier(8, timeout=60)
    errors = []

    def work(i):
        try:
            cupy.cuda.Device(0).use()
            stream = cupy.cuda.Stream(non_blocking=True)
            barrier.wait()
            for trial in range(25):
                value = float(100 * i + trial)
                bufs[i].fill(value, side=trial % 2 == 1, repeat=20)
                if trial % 3 == 0:
                    fx.fill_on_new_stream(bufs[i], value, "stream")
                v = cai.as_cuda_array(bufs[i], stream=stream)
                got = last_value(cupy, v.ptr, stream.ptr, n)
                if got != value:
                    errors.append(f"thread {i} trial {trial}: read {got}, expected {value}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a thread did not finish in 120 s"
    assert not errors, errors[:5]


# -- per-thread default stream -------------------------------------------------------------------


def test_a_producer_on_the_per_thread_stream():
    cupy = pytest.importorskip("cupy")
    ptds = cupy.cuda.Stream.ptds
    c = cupy.zeros(N, cupy.float32)
    consumer = cupy.cuda.Stream(non_blocking=True)
    for trial in range(20):
        with ptds:
            for _ in range(20):
                c.fill(float(trial))
            exported = c.__cuda_array_interface__
            assert exported["stream"] == 2, exported
            v = cai.as_cuda_array(c, stream=consumer)
        assert last_value(cupy, v.ptr, consumer.ptr) == float(trial), f"trial {trial}"
    # A cudarc view never carries the marker 2: it works on a stream of its own that
    # waited for this thread's per-thread stream.
    with ptds:
        for _ in range(20):
            c.fill(5.0)
        fx.zero_with_cudarc(c)
    cupy.cuda.runtime.deviceSynchronize()
    assert float(abs(c).max()) == 0.0
    with ptds:
        for _ in range(20):
            c.fill(5.0)
        fx.fill_on_new_stream(c, 6.0, "stream")
    cupy.cuda.runtime.deviceSynchronize()
    assert float(c.min()) == 6.0 == float(c.max())


# -- CuPy to torch through cai -------------------------------------------------------------------


def test_cupy_on_its_stream_through_a_cai_view_to_torch():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    s = cupy.cuda.Stream(non_blocking=True)
    for trial in range(10):
        with s:
            c = cupy.zeros(N, cupy.float32)
            for _ in range(20):
                c += 1.0
            # The view is a Rust producer that re-exports CuPy's stream.
            v = cai.as_cuda_array(c, stream=torch.cuda.current_stream())
        assert v.stream == s.ptr
        t = torch.as_tensor(v, device="cuda")
        assert t.data_ptr() == c.data.ptr, "torch copied"
        # On torch's stream, which waited for CuPy's work.
        low, high = float(t.min()), float(t.max())
        assert low == 20.0 == high, f"trial {trial}: torch read values from {low} to {high}"
        s.synchronize()


# -- graph capture -------------------------------------------------------------------------------


def test_imports_inside_a_torch_graph_capture():
    torch = pytest.importorskip("torch")
    n = 1 << 20
    buf = fx.CudarcBuffer([n])
    buf.fill(3.0)
    source = torch.as_tensor(cai.as_cuda_array(buf, policy="synchronize"), device="cuda")
    out = torch.zeros(n, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    buf.fill(4.0, repeat=20)  # eager work pending on the producer's stream
    with torch.cuda.graph(g, stream=s):
        # The consumer captures and the producer does not: the host waits once, and the
        # capture stays valid.
        v = cai.as_cuda_array(buf, stream=torch.cuda.current_stream())
        assert v.ptr == source.data_ptr()
        fx.describe_f32(buf)
        fx.extract_and_settle(buf)
        out.copy_(source)
    g.replay()
    torch.cuda.synchronize()
    assert float(out.min()) == 4.0 == float(out.max())


def test_imports_of_an_array_whose_stream_captures_with_cupy():
    cupy = pytest.importorskip("cupy")
    c = cupy.zeros(1 << 20, cupy.float32)
    c += 1.0  # compile and load the kernel before any capture
    c -= 1.0
    cupy.cuda.runtime.deviceSynchronize()
    other = cupy.cuda.Stream(non_blocking=True)
    # CuPy captures in relaxed mode unless told otherwise; PyTorch in global mode, in which
    # the driver also forbids calls that are unsafe during a capture from other code.
    rt = cupy.cuda.runtime
    cases = [(mode, blocking) for mode in ("global", "relaxed") for blocking in (False, True)]
    for mode, blocking in cases:
        s = cupy.cuda.Stream(non_blocking=not blocking)
        with s:
            s.begin_capture(mode=rt.streamCaptureModeGlobal if mode == "global" else rt.streamCaptureModeRelaxed)
            try:
                c += 1.0  # captured, not run
                assert c.__cuda_array_interface__["stream"] == s.ptr
                # The capturing stream itself: already ordered.
                assert cai.as_cuda_array(c, stream=s).ptr == c.data.ptr
                # Any other stream would run before the graph: refused, capture intact.
                with pytest.raises(cai.CudaDriverError, match="capturing a CUDA graph"):
                    cai.as_cuda_array(c, stream=other)
                with pytest.raises(cai.CudaDriverError, match="capturing a CUDA graph|legacy default stream"):
                    cai.as_cuda_array(c)
                with pytest.raises(cai.CudaDriverError, match="cannot be synchronized|legacy default stream"):
                    cai.as_cuda_array(c, policy="synchronize")
                with pytest.raises(cai.CudaDriverError, match="capturing a CUDA graph"):
                    fx.extract_and_settle(c)
            finally:
                graph = s.end_capture()
        graph.launch(stream=s)
        s.synchronize()
    assert float(c.min()) == len(cases) == float(c.max())
