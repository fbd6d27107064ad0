"""cai's driver paths against the stand-in CUDA driver (fake_cuda.c).

Run by test_fake_driver.py in a process whose LD_LIBRARY_PATH puts the stand-in first;
not collected on its own (the name does not start with test_). The stand-in's "device
memory" is host memory registered with it, so copies can be checked byte for byte, and
its log says what cai asked of the driver.
"""

import functools
import sys
import threading

import numpy as np
import pytest

import cai
import cai_fixtures as fx
import fake
from producers import Producer, cai_dict

pytestmark = pytest.mark.skipif(fake.lib is None, reason="runs only under the stand-in driver (test_fake_driver.py)")

# Streams the tests register: two on device 0, one on device 1. Device 2 is kept for the
# one test that needs a context without pooled events.
S7, S9, S17 = 0x7, 0x9, 0x11


@pytest.fixture(scope="module", autouse=True)
def warm():
    """Loads the driver and retains devices 0 and 1's primary contexts (done once per
    process), so that each test's log holds only what its own calls did."""
    for device in (0, 1):
        arr, ptr = fake.array(4, device=device)
        cai.as_cuda_array(producer(ptr, shape=(4,)))
    yield


@pytest.fixture(autouse=True)
def clean(warm):
    fake.reset()
    fake.stream(S7, 0)
    fake.stream(S9, 0)
    fake.stream(S17, 1)
    yield
    # Every call leaves the thread as it found it: no context current, the capture mode
    # it had.
    assert fake.current_device() == -1
    assert fake.capture_mode() == 0


def producer(ptr, shape=(64,), **kw):
    return Producer(cai_dict(shape=shape, ptr=ptr, **kw))


def driver_calls():
    """The log without the context switches every scope makes."""
    return [line for line in fake.log() if not line.startswith("cuCtxSetCurrent")]


def test_the_stand_in_driver_is_the_one_loaded():
    assert cai.cuda_driver_present()
    arr, ptr = fake.array()
    assert cai.pointer_attributes(ptr) == {"device": 0, "memory": "device", "allocation": (ptr, ptr + arr.nbytes)}


@pytest.mark.parametrize(
    "kind, managed, memory", [(fake.DEVICE, False, "device"), (fake.HOST, False, "host"), (fake.DEVICE, True, "managed")]
)
def test_pointer_attributes_name_the_memory_and_its_allocation(kind, managed, memory):
    arr, ptr = fake.array(16, device=1, kind=kind, managed=managed)
    assert cai.pointer_attributes(ptr + 8) == {"device": 1, "memory": memory, "allocation": (ptr, ptr + arr.nbytes)}


def test_pointer_attributes_of_unknown_memory_is_a_value_error():
    with pytest.raises(ValueError, match=r"^ptr: 0x3039 is not memory the CUDA driver knows"):
        cai.pointer_attributes(12345)


def test_an_import_checks_the_pointer_and_the_extent_against_the_allocation():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr))
    assert view.ptr == ptr
    assert driver_calls() == [f"cuPointerGetAttributes ptr=0x{ptr:x} count=5"]
    with pytest.raises(ValueError, match=r"^data: pointer 0x1234 is not memory the CUDA driver knows .*check_pointers=False"):
        cai.as_cuda_array(producer(0x1234))
    end = ptr + arr.nbytes
    message = (
        rf"^shape: \(65,\) with strides None reaches bytes 0x{ptr:x} to 0x{end + 4:x}, outside the device allocation "
        rf"0x{ptr:x} to 0x{end:x} \(256 bytes\) that pointer 0x{ptr:x} lies in"
    )
    with pytest.raises(ValueError, match=message):
        cai.as_cuda_array(producer(ptr, shape=(65,)))


def test_memory_mapped_through_the_virtual_memory_api_is_checked_mapping_by_mapping():
    # A reservation of 192 floats: the first two pieces of 64 are mapped, the third not.
    arr = np.arange(192, dtype=np.float32)
    base = arr.__array_interface__["data"][0]
    for piece in range(2):
        fake.mapping(base + piece * 256, 256, (base, arr.nbytes))
    assert cai.pointer_attributes(base + 300)["allocation"] == (base, base + arr.nbytes)
    # Across both mappings: accepted.
    assert cai.as_cuda_array(producer(base + 4, shape=(127,))).ptr == base + 4
    # Into the unmapped third: refused, naming where the mapped memory ends.
    message = rf"but the device memory from 0x{base + 512:x} on is not mapped \(pointer 0x{base + 4:x} lies in an allocation that ends before the array does\)"
    with pytest.raises(ValueError, match=message):
        cai.as_cuda_array(producer(base + 4, shape=(128,)))


def test_an_array_that_reaches_back_into_an_unmapped_piece_is_refused():
    # Negative strides: the lowest byte lies below the pointer, in the reservation's first
    # piece, which is not mapped (the pointer, in the second, is).
    arr = np.arange(192, dtype=np.float32)
    base = arr.__array_interface__["data"][0]
    for piece in (1, 2):
        fake.mapping(base + piece * 256, 256, (base, arr.nbytes))
    assert cai.as_cuda_array(producer(base + 300, shape=(10,), strides=(-4,))).ptr == base + 300
    with pytest.raises(ValueError, match=rf"but the device memory from 0x{base + 184:x} on is not mapped"):
        cai.as_cuda_array(producer(base + 300, shape=(30,), strides=(-4,)))


def test_memory_whose_segments_the_driver_does_not_report_is_not_refused():
    # Memory the pointer attributes know but whose segments cuMemGetAddressRange does not
    # report at the first byte (as may be so of some pools): the driver cannot say that
    # anything is unmapped, and the import goes on. A gap after a reported segment is
    # still refused (the test above).
    arr, ptr = fake.array(64)
    fake.fail("cuMemGetAddressRange_v2", 500)
    try:
        # (Refused before: "the device memory from 0x... on is not mapped".)
        assert cai.as_cuda_array(producer(ptr)).ptr == ptr
    finally:
        fake.fail("cuMemGetAddressRange_v2", 0)


def test_a_driver_that_wants_a_context_for_pointer_queries_is_asked_again_in_one():
    # Some drivers refuse pointer queries on a thread without a current context: the query
    # is made again in device 0's primary context, and the thread is left as it was.
    arr, ptr = fake.array(64, device=1)
    fake.pointers_need_context(True)
    result = {}

    def query():
        fake.clear_log()
        result["before"] = fake.current_device()
        result["info"] = cai.pointer_attributes(ptr)
        result["after"] = fake.current_device()
        result["queries"] = len(fake.calls("cuPointerGetAttributes"))

    try:
        t = threading.Thread(target=query)
        t.start()
        t.join()
    finally:
        fake.pointers_need_context(False)
    assert result == {
        "before": -1,
        "info": {"device": 1, "memory": "device", "allocation": (ptr, ptr + arr.nbytes)},
        "after": -1,
        "queries": 2,
    }


def test_without_pointer_checks_the_driver_is_not_asked():
    fake.clear_log()
    assert cai.as_cuda_array(producer(0x1234), check_pointers=False).ptr == 0x1234
    assert driver_calls() == []


def test_memory_of_another_device_than_the_consumer_stream_is_refused_unless_allowed():
    arr, ptr = fake.array(64, device=1)
    with pytest.raises(ValueError, match=rf"^data: pointer 0x{ptr:x} is device memory of device 1, but the consumer's stream 9 works on device 0; pass allow_other_device=True"):
        cai.as_cuda_array(producer(ptr), stream=S9)
    assert cai.as_cuda_array(producer(ptr), stream=S9, allow_other_device=True).ptr == ptr
    # Managed memory is reachable from every device, and so is pinned host memory (portable
    # under unified addressing, whichever device's context allocated it).
    marr, mptr = fake.array(64, device=1, managed=True)
    assert cai.as_cuda_array(producer(mptr), stream=S9).ptr == mptr
    harr, hptr = fake.array(64, device=1, kind=fake.HOST)
    assert cai.as_cuda_array(producer(hptr), stream=S9).ptr == hptr


@pytest.mark.parametrize("call", ["cuStreamGetCtx", "cuCtxGetDevice"])
def test_a_driver_failure_while_comparing_devices_is_a_driver_error(call):
    # Swallowed, the failure let memory of another device through unchecked.
    arr, ptr = fake.array(64, device=1)
    fake.fail(call, 700)
    try:
        with pytest.raises(cai.CudaDriverError, match=rf"^stream: cannot tell the device of the consumer's stream 9, to compare it with that of pointer 0x{ptr:x}: {call} failed: CUDA_ERROR_ILLEGAL_ADDRESS \(700\).*check_pointers=False"):
            cai.as_cuda_array(producer(ptr), stream=S9)
        # Managed memory does not need the consumer's device: it is not asked.
        marr, mptr = fake.array(64, device=1, managed=True)
        assert cai.as_cuda_array(producer(mptr), stream=S9).ptr == mptr
    finally:
        fake.fail(call, 0)
    with pytest.raises(ValueError, match="is device memory of device 1, but the consumer's stream 9 works on device 0"):
        cai.as_cuda_array(producer(ptr), stream=S9)


def test_a_consumer_stream_the_driver_does_not_know_is_named():
    arr, ptr = fake.array(64)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot tell the device of the consumer's stream 85, .*: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE"):
        cai.as_cuda_array(producer(ptr, stream=S7), stream=0x55)
    # Unchecked, the wait is what fails: the message names both streams.
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 85 wait for the producer's stream 7: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE \(400\): an error of the stand-in driver; pass sync=False"):
        cai.as_cuda_array(producer(ptr, stream=S7), stream=0x55, check_pointers=False)
    # The host's wait for the producer does not involve the consumer's stream.
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot synchronize on stream 85: cuStreamGetCtx failed"):
        cai.as_cuda_array(producer(ptr, stream=0x55), stream=S9, policy="synchronize")


def test_the_wait_policy_records_on_the_producer_and_waits_on_the_consumer_reusing_one_event():
    arr, ptr = fake.array(64)
    events = fake.live_events()
    for _ in range(3):
        view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S9)
        assert view.stream == S7  # the producer's, as documented
    records = fake.calls("cuEventRecord")
    waits = fake.calls("cuStreamWaitEvent")
    assert len(records) == len(waits) == 3
    assert all(" stream=0x7 ctx0" in r for r in records)
    assert all(w.startswith("cuStreamWaitEvent stream=0x9 ctx0 ") for w in waits)
    # One event at most was created, and it is reused.
    assert fake.live_events() - events <= 1
    assert len({r.split()[1] for r in records}) == 1


def test_the_synchronize_policy_makes_the_host_wait_for_the_producer_stream():
    arr, ptr = fake.array(64)
    fake.clear_log()
    cai.as_cuda_array(producer(ptr, stream=S7), stream=S9, policy="synchronize")
    assert fake.calls(("cuStream", "cuEvent")) == ["cuStreamSynchronize stream=0x7 ctx0"]


@pytest.mark.parametrize("how", [{"sync": False}, {"policy": "ignore"}])
def test_ignoring_the_stream_orders_nothing(how):
    arr, ptr = fake.array(64)
    fake.clear_log()
    assert cai.as_cuda_array(producer(ptr, stream=S7), stream=S9, **how).ptr == ptr
    assert driver_calls() == [f"cuPointerGetAttributes ptr=0x{ptr:x} count=5"]


def test_the_same_stream_needs_no_event():
    arr, ptr = fake.array(64)
    fake.clear_log()
    cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    assert driver_calls() == [f"cuPointerGetAttributes ptr=0x{ptr:x} count=5"]


def test_streams_of_two_devices_are_ordered_in_each_stream_context():
    arr, ptr = fake.array(64, device=1)
    fake.clear_log()
    cai.as_cuda_array(producer(ptr, stream=S17), stream=S9, allow_other_device=True)
    calls = driver_calls()
    record = next(c for c in calls if c.startswith("cuEventRecord"))
    wait = next(c for c in calls if c.startswith("cuStreamWaitEvent"))
    # The stand-in refuses an event recorded on a stream of another context than its own.
    assert record.endswith("stream=0x11 ctx1")
    assert wait.startswith("cuStreamWaitEvent stream=0x9 ctx0 ")


def test_a_stream_the_driver_does_not_know_is_a_driver_error_naming_it():
    arr, ptr = fake.array(64)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 9 wait for the producer's stream 85: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE \(400\)"):
        cai.as_cuda_array(producer(ptr, stream=0x55), stream=S9)


def test_a_capturing_producer_stream_cannot_be_synchronized_or_waited_on_from_outside():
    arr, ptr = fake.array(64)
    fake.stream(0x13, 0, capture=1, capture_id=5)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot synchronize on stream 19: the producer.s stream 19 is capturing a CUDA graph \(capture 5\) and cannot be synchronized"):
        cai.as_cuda_array(producer(ptr, stream=0x13), stream=S9, policy="synchronize")
    with pytest.raises(cai.CudaDriverError, match=r"capturing a CUDA graph \(capture 5\), so its work runs only when the graph is launched and stream 9 cannot be ordered"):
        cai.as_cuda_array(producer(ptr, stream=0x13), stream=S9)
    # A consumer in the same capture is ordered as any other.
    fake.stream(0x15, 0, capture=1, capture_id=5)
    fake.clear_log()
    cai.as_cuda_array(producer(ptr, stream=0x13), stream=0x15)
    assert fake.calls("cuStreamWaitEvent stream=0x15 ")


def test_the_legacy_stream_during_a_global_capture_is_refused_with_the_reason():
    arr, ptr = fake.array(64)
    fake.stream(0x13, 0, capture=1, capture_id=5, implicit=True)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 1 wait for the producer's stream 7: the legacy default stream \(stream 1\) cannot be used while a blocking stream of its context is capturing"):
        cai.as_cuda_array(producer(ptr, stream=S7), stream=1)


@pytest.mark.parametrize(
    "call, where",
    [
        ("cuEventRecord", "stream"),
        ("cuStreamWaitEvent", "stream"),
        ("cuStreamGetCtx", "stream"),
        ("cuStreamGetCaptureInfo_v2", "stream"),
        ("cuPointerGetAttributes", "data"),
        ("cuThreadExchangeStreamCaptureMode", "data"),
        ("cuCtxSetCurrent", "data"),
    ],
)
def test_a_failing_driver_call_is_a_driver_error_that_leaks_nothing(call, where):
    arr, ptr = fake.array(64)
    cai.as_cuda_array(producer(ptr, stream=S7), stream=S9)  # the pool has its event
    events = fake.live_events()
    fake.fail(call, 700)
    name = call.removesuffix("_v2").removesuffix("Info")
    with pytest.raises(cai.CudaDriverError, match=rf"^{where}: cannot .*{name}\w* failed: CUDA_ERROR_ILLEGAL_ADDRESS \(700\)"):
        cai.as_cuda_array(producer(ptr, stream=S7), stream=S9)
    fake.fail(call, 0)
    assert fake.live_events() == events
    # The next import works and still uses the pooled event.
    cai.as_cuda_array(producer(ptr, stream=S7), stream=S9)
    assert fake.live_events() == events


def test_a_failing_event_creation_is_a_driver_error():
    # Device 2's context has no pooled event: the import must create one.
    arr, ptr = fake.array(64, device=2)
    fake.stream(0x21, 2)
    fake.fail("cuEventCreate", 2)
    with pytest.raises(cai.CudaDriverError, match=r"cuEventCreate failed: CUDA_ERROR_OUT_OF_MEMORY \(2\)"):
        cai.as_cuda_array(producer(ptr, stream=0x21), stream=S17, allow_other_device=True)
    fake.fail("cuEventCreate", 0)
    events = fake.live_events()
    cai.as_cuda_array(producer(ptr, stream=0x21), stream=S17, allow_other_device=True)
    assert fake.live_events() == events + 1


def test_an_extractor_that_reads_without_a_stream_makes_the_host_wait_for_the_producer():
    arr, ptr = fake.array(64)
    fake.clear_log()
    assert fx.extract_and_settle(producer(ptr, stream=S7)) == 1
    calls = fake.calls(("cuEvent", "cuStream"))
    assert [c.split()[0] for c in calls if not c.startswith("cuEventCreate")] == ["cuEventRecord", "cuEventSynchronize"]
    assert "stream=0x7 ctx0" in calls[-2]


def orderings():
    """The event records and waits of the log, as ("record" or "wait", stream) pairs."""
    out = []
    for c in fake.calls(("cuEventRecord", "cuStreamWaitEvent", "cuEventSynchronize", "cuStreamSynchronize")):
        stream = next((w.split("=")[1] for w in c.split() if w.startswith("stream=")), None)
        kind = {"cuEventRecord": "record", "cuStreamWaitEvent": "wait"}.get(c.split()[0], c.split()[0])
        out.append((kind, int(stream, 16)) if stream else (kind,))
    return out


def order_on(streams, **kw):
    """`fx.order_on_streams` of a stream-7 producer: the orderings while the function worked,
    and those made as its argument went."""
    arr, ptr = fake.array(64)
    during = []

    def work():
        during.extend(orderings())
        fake.clear_log()

    fake.clear_log()
    fx.order_on_streams(producer(ptr, stream=S7, **kw), streams, work)
    return during, orderings()


def test_an_extractor_ordered_on_its_own_stream_makes_the_producer_stream_wait_for_it_as_it_goes():
    # The specification's other half: the producer's later work on stream 7 must not
    # overlap the function's work on stream 9, and the host blocks for neither.
    during, after = order_on([S9])
    assert during == [("record", S7), ("wait", S9)]
    assert after == [("record", S9), ("wait", S7)]


def test_the_producer_stream_waits_once_for_each_stream_the_work_went_to():
    fake.stream(0x13, 0)
    during, after = order_on([S9, S9, 0x13, S7])
    assert [o for o in during if o[0] == "wait"] == [("wait", S9), ("wait", S9), ("wait", 0x13)]
    assert after == [("record", S9), ("wait", S7), ("record", 0x13), ("wait", S7)]


def test_an_extractor_ordered_on_a_stream_the_driver_does_not_know_names_that_stream():
    arr, ptr = fake.array(64)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 85 wait for the producer's stream 7: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE \(400\).*CAI_IMPORT_SYNC=ignore"):
        fx.order_on_streams(producer(ptr, stream=S7), [0x55], lambda: None)
    # A producer stream it does not know is named as the producer's.
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 9 wait for the producer's stream 85: cuStreamGetCtx failed"):
        fx.order_on_streams(producer(ptr, stream=0x55), [S9], lambda: None)


def test_work_on_the_producer_stream_itself_needs_no_wait_either_way():
    assert order_on([S7]) == ([], [])


@pytest.mark.parametrize("policy, expected", [("ignore", ([], [])), ("synchronize", ([("cuStreamSynchronize", S7)], [("record", S9), ("wait", S7)]))])
def test_the_extractor_hands_back_under_the_configured_policy(policy, expected):
    cai.configure(import_sync=policy)
    try:
        assert order_on([S9]) == expected
    finally:
        cai.configure(import_sync="wait")


def test_work_captured_into_a_graph_is_not_waited_for_as_the_argument_goes():
    # Captured work runs when the graph is launched, which whoever launches it orders; the
    # capture is left alone.
    fake.stream(0x13, 0, capture=1, capture_id=5)
    during, after = order_on([0x13])
    assert during == [("record", S7), ("cuEventSynchronize",)]
    assert after == []
    assert fake.capture_status(0x13) == 1


def test_a_failure_to_hand_back_is_reported_as_unraisable_and_the_call_returns(monkeypatch):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: seen.append((type(u.exc_value), str(u.exc_value))))
    arr, ptr = fake.array(64)
    fx.order_on_streams(producer(ptr, stream=S7), [S9], lambda: None)  # the pool has its events
    events = fake.live_events()

    def work():
        fake.fail("cuStreamWaitEvent", 700)
        return "done"

    try:
        assert fx.order_on_streams(producer(ptr, stream=S7), [S9], work) == "done"
    finally:
        fake.fail("cuStreamWaitEvent", 0)
    assert len(seen) == 1 and seen[0][0] is cai.CudaDriverError
    assert seen[0][1].startswith(
        "stream: cannot make the producer's stream 7 wait for stream 9, which a Rust function's work on an extracted "
        "array was ordered on: cuStreamWaitEvent failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"
    ), seen[0][1]
    assert fake.live_events() == events


def test_a_hook_that_fails_the_hand_back_again_ends_at_the_nesting_limit(monkeypatch):
    # Each report takes a nesting level: the 64th hook's call cannot read its argument
    # (RecursionError, which CPython reports as the hook's own failure). At a recursion
    # limit and a stack this deep, nothing else would end the loop before the C stack.
    arr, ptr = fake.array(64)
    p, reports = producer(ptr, stream=S7), []

    def work():
        fake.fail("cuStreamWaitEvent", 700)

    def hook(u):
        reports.append(type(u.exc_value).__name__)
        fake.fail("cuStreamWaitEvent", 0)  # the ordering succeeds; the work fails the hand-back
        fx.order_on_streams(p, [S9], work)

    monkeypatch.setattr("sys.unraisablehook", hook)
    limit, stack = sys.getrecursionlimit(), threading.stack_size(64 << 20)
    sys.setrecursionlimit(100000)
    try:
        t = threading.Thread(target=lambda: fx.order_on_streams(p, [S9], work))
        t.start()
        t.join()
    finally:
        fake.fail("cuStreamWaitEvent", 0)
        sys.setrecursionlimit(limit)
        threading.stack_size(stack)
    assert reports == ["CudaDriverError"] * 64


def test_the_failed_hand_back_is_reported_after_the_argument_is_released(monkeypatch):
    # A hook with no Python frame of its own is called from the frame of the call whose
    # argument failed: taking the same array for writing there conflicts with the
    # argument (read-only) until it is released.
    arr, ptr = fake.array(64)
    p, taken = producer(ptr, stream=S7), []
    monkeypatch.setattr("sys.unraisablehook", functools.partial(fx.append_address_rw, p, taken))

    def work():
        fake.fail("cuStreamWaitEvent", 700)

    try:
        fx.order_on_streams(p, [S9], work)
    finally:
        fake.fail("cuStreamWaitEvent", 0)
    assert taken == [ptr]


@pytest.mark.parametrize("handle_first", [False, True])
def test_a_cudarc_stream_local_to_the_function_lives_until_the_producer_stream_waited_for_it(handle_first):
    # The function's stream goes before its argument does: the argument keeps it, so that
    # the event is recorded on a live stream, and lets it go after. Named first by its
    # handle, the stream is still kept when it is named as a cudarc stream afterwards.
    arr, ptr = fake.array(64)
    fake.clear_log()
    handle = fx.order_on_a_local_cudarc_stream(producer(ptr, stream=S7), handle_first)
    calls = [c for c in driver_calls() if f"stream=0x{handle:x}" in c or c.startswith("cuStreamWaitEvent stream=0x7 ")]
    ordered = ["cuStreamWaitEvent"] * (2 if handle_first else 1)
    assert [c.split()[0] for c in calls] == [
        "cuStreamCreate", *ordered, "cuEventRecord", "cuStreamWaitEvent", "cuStreamDestroy"
    ], calls
    assert calls[-2].startswith("cuStreamWaitEvent stream=0x7 ")


def test_an_extractor_refuses_memory_the_driver_does_not_know():
    with pytest.raises(ValueError, match=r"^data: pointer 0x1234 is not memory the CUDA driver knows .*CAI_CHECK_POINTERS=0"):
        fx.describe_f32(producer(0x1234))


@pytest.mark.parametrize(
    "kind, managed, expected", [(fake.DEVICE, False, (2, 1)), (fake.HOST, False, (3, 0)), (fake.DEVICE, True, (13, 1))]
)
def test_dlpack_device_of_a_view_comes_from_the_driver(kind, managed, expected):
    arr, ptr = fake.array(64, device=1, kind=kind, managed=managed)
    view = cai.as_cuda_array(producer(ptr), stream=S17)
    assert view.__dlpack_device__() == expected


def test_a_dlpack_copy_to_the_host_has_the_device_bytes_after_the_producer_stream_finished():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    fake.clear_log()
    host = np.from_dlpack(view, device="cpu", copy=True)
    np.testing.assert_array_equal(host, arr)
    assert host.__array_interface__["data"][0] != ptr
    calls = [c.split()[0] for c in driver_calls()]
    # The copy starts once the producer's stream has finished its work.
    assert calls.index("cuEventSynchronize") < calls.index("cuMemcpyDtoH")
    arr[:] = -1
    assert host[5] == 5


def test_a_dlpack_copy_on_the_device_is_a_new_allocation_with_the_same_bytes():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr), stream=S9)
    copy = cai.from_dlpack(view, copy=True, stream=S9)
    assert copy.ptr != ptr
    assert cai.pointer_attributes(copy.ptr)["allocation"] == (copy.ptr, copy.ptr + arr.nbytes)
    arr[:] = -1
    # The copy's memory is host memory under the stand-in: read it back through NumPy.
    back = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_float * 64).from_address(copy.ptr))
    np.testing.assert_array_equal(back, np.arange(64, dtype=np.float32))
    freed = len(fake.calls("cuMemFree"))
    del copy
    assert len(fake.calls("cuMemFree")) == freed + 1


def test_a_cudarc_view_of_an_array_on_the_per_thread_stream_has_a_stream_of_its_own():
    # The per-thread default stream names another stream on every thread: the view makes a
    # stream (cuStreamCreate, which cai checks the driver has), ordered after the
    # producer's, and destroys it when it goes.
    arr, ptr = fake.array(64)
    fake.clear_log()
    assert fx.cudarc_view_owner(producer(ptr, stream=2)) is not None
    calls = [c.split()[0] for c in driver_calls() if c.startswith(("cuStream", "cuEventRecord"))]
    assert calls[0] == "cuStreamCreate" and "cuStreamWaitEvent" in calls
    assert calls[-1] == "cuStreamDestroy"


def test_a_cudarc_view_works_in_the_context_of_the_producer_stream():
    # Memory of device 0 on a stream of device 1 (peer access): the stream is usable only
    # in device 1's context, so the view's work goes there.
    arr, ptr = fake.array(64, device=0)
    assert fx.cudarc_view_device(producer(ptr, stream=S17)) == 1
    assert fx.cudarc_view_device(producer(ptr, stream=S9)) == 0
    assert fx.cudarc_view_device(producer(ptr, stream=1)) == 0
    arr, ptr = fake.array(64, device=1)
    assert fx.cudarc_view_device(producer(ptr, stream=S7)) == 0
    with pytest.raises(cai.CudaDriverError, match=r"^data: cannot make a cudarc view: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE"):
        fx.cudarc_view_device(producer(ptr, stream=0x55))


def test_a_cudarc_view_with_a_stream_of_its_own_leaves_a_capture_on_the_device_alone():
    # cudarc's new_stream synchronizes the whole context when it makes the context's first
    # stream: during a capture, the driver refuses that and invalidates the capture. The
    # view's stream is forked from the per-thread stream instead.
    arr, ptr = fake.array(64)
    fake.stream(0x13, 0, capture=1, capture_id=5)
    fake.clear_log()
    assert fx.cudarc_view_owner(producer(ptr, stream=2)) is not None
    assert fake.calls("cuCtxSynchronize") == []
    assert fake.capture_status(0x13) == 1
    calls = [c.split()[0] for c in driver_calls() if c.startswith(("cuStream", "cuEventRecord"))]
    assert calls[:3] == ["cuStreamCreate", "cuEventRecord", "cuStreamWaitEvent"]
    assert fake.capture_mode() == 0, "the thread's capture mode is restored"


def test_a_dlpack_copy_is_refused_while_the_legacy_stream_would_join_a_capture():
    # Copies run on the legacy default stream: while a blocking stream captures a graph,
    # using it would invalidate the capture.
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr), stream=S9)
    fake.stream(0x13, 0, capture=1, capture_id=5, implicit=True)
    fake.clear_log()
    copies = [
        lambda: view.__dlpack__(stream=S9, copy=True, max_version=(1, 0)),
        lambda: cai.from_dlpack(view, copy=True, stream=S9),
        lambda: np.from_dlpack(view, device="cpu", copy=True),
    ]
    for copy in copies:
        with pytest.raises(cai.CudaDriverError, match=r"^copy: cannot copy the array at 0x[0-9a-f]+: the legacy default stream \(stream 1\) cannot be used while a blocking stream of its context is capturing"):
            copy()
    assert not fake.calls("cuMem")


def test_a_dlpack_copy_on_the_device_is_complete_before_the_capsule_is_returned():
    # A device-to-device copy may return before it is done, and a consumer on a
    # non-blocking stream does not wait for the legacy stream it runs on: the host waits.
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    fake.clear_log()
    view.__dlpack__(stream=S9, copy=True)
    calls = [c for c in driver_calls() if c.startswith(("cuMemcpy", "cuStreamSynchronize"))]
    assert [c.split()[0] for c in calls] == ["cuMemcpyDtoD", "cuStreamSynchronize"]
    assert calls[1].startswith("cuStreamSynchronize stream=0x1 ")


def test_dlpack_export_orders_the_consumer_stream_after_the_producer_stream():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    fake.clear_log()
    capsule = view.__dlpack__(stream=S9)
    assert type(capsule).__name__ == "PyCapsule"
    calls = fake.calls(("cuEventRecord", "cuStreamWaitEvent"))
    assert [c.split()[0] for c in calls] == ["cuEventRecord", "cuStreamWaitEvent"]
    assert "stream=0x7" in calls[0] and calls[1].startswith("cuStreamWaitEvent stream=0x9 ")


@pytest.mark.parametrize(
    "kw, waiting",
    [({}, "0x1"), ({"stream": None}, "0x1"), ({"stream": 1}, "0x1"), ({"stream": 2}, "0x2"), ({"stream": S9}, "0x9"),
     ({"stream": -1}, None)],
)
def test_dlpack_export_streams_follow_the_protocol(kw, waiting):
    # None is the legacy default stream for CUDA; -1 asks for no synchronization.
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    fake.clear_log()
    view.__dlpack__(**kw)
    waits = fake.calls("cuStreamWaitEvent")
    assert waits == ([] if waiting is None else [f"cuStreamWaitEvent stream={waiting} ctx0 event={waits[0].split('event=')[1]}"])


def test_dlpack_export_to_a_stream_the_driver_does_not_know_is_a_driver_error():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr, stream=S7), stream=S7)
    with pytest.raises(cai.CudaDriverError, match=r"^stream: cannot make stream 85 wait for the producer's stream 7: cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE"):
        view.__dlpack__(stream=0x55)


def test_a_failing_dlpack_copy_is_a_driver_error_and_frees_nothing_it_did_not_allocate():
    arr, ptr = fake.array(64)
    view = cai.as_cuda_array(producer(ptr), stream=S9)
    fake.fail("cuMemcpyDtoH_v2", 700)
    with pytest.raises(cai.CudaDriverError, match=r"^copy: cannot copy the array at 0x[0-9a-f]+: cuMemcpyDtoH failed"):
        np.from_dlpack(view, device="cpu", copy=True)
    fake.fail("cuMemcpyDtoH_v2", 0)
    fake.fail("cuMemcpyDtoD_v2", 700)
    fake.clear_log()
    with pytest.raises(cai.CudaDriverError, match=r"cuMemcpyDtoD failed"):
        cai.from_dlpack(view, copy=True, stream=S9)
    # The allocation made for the copy was freed.
    assert [c.split()[0] for c in fake.calls("cuMem")] == ["cuMemAlloc", "cuMemFree"]


def test_a_host_copy_too_large_to_allocate_is_a_memory_error_with_no_driver_call():
    # Two elements 2**45 bytes apart (pointer checks off): the copy keeps the device layout,
    # 35 TB of host memory, which no allocation gives. It aborted the process.
    before = cai.configure()
    cai.configure(check_pointers=False)
    try:
        view = cai.from_cuda_array_interface(
            {"version": 3, "shape": (2,), "typestr": "<f4", "data": (0x7F0000000000, False), "strides": (1 << 45,)}
        )
        fake.clear_log()
        with pytest.raises(MemoryError, match=f"^copy: cannot allocate {(1 << 45) + 4} bytes for a host copy"):
            view.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
        assert not fake.calls("cuMemcpy")
    finally:
        cai.configure(**before)


def test_imports_from_many_threads_share_the_pool_and_leave_each_thread_clean():
    arr, ptr = fake.array(64)
    errors, states = [], []

    def work():
        try:
            for _ in range(200):
                cai.as_cuda_array(producer(ptr, stream=S7), stream=S9)
            states.append((fake.current_device(), fake.capture_mode()))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert states == [(-1, 0)] * 8
    # At most one event per thread was ever in flight at once.
    assert fake.live_events() <= 1 + 8
