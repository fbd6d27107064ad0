//! The driver module: every entry point without a driver, and the engine on a real device.

use std::sync::Arc;

use cai_core::cuda::{self, DriverBackend, KeepCurrent, MemoryType, TrackedStream};
use cai_core::sync::{import, order, Action, Backend, Capture, EventPool, Located, SyncPolicy};
use cai_core::{AsStream, DriverError, Stream, StreamHandle};
use cudarc::driver::{result, sys, CudaContext, CudaStream, DevicePtr};

#[test]
#[cfg_attr(cai_cuda_driver, ignore = "a CUDA driver is present: the GPU tests below cover this machine")]
fn every_entry_point_reports_a_missing_driver() {
    if cuda::driver_present() {
        // `--include-ignored` on a machine with a driver: nothing to check here.
        eprintln!("skipped: a CUDA driver is present, so no entry point can report a missing one");
        return;
    }
    assert_eq!(cuda::driver_status(), Err(DriverError::NotFound));
    assert_eq!(DriverBackend::primary(0), Err(DriverError::NotFound));
    assert_eq!(cuda::pointer_info(0x7f00_0000_0000), Err(DriverError::NotFound));
    assert_eq!(cuda::unmapped(0x7f00_0000_0000..0x7f00_0000_1000, 0x7f00_0000_0000, 0), Err(DriverError::NotFound));
    assert_eq!(cuda::stream_device(Stream::LegacyDefault), Err(DriverError::NotFound));
    let handle = Stream::Handle(StreamHandle::new(0x5000).unwrap());
    assert_eq!(cuda::stream_device(handle), Err(DriverError::NotFound));
    assert!(matches!(cuda::cudarc_context(0), Err(DriverError::NotFound)));
    drop(KeepCurrent::new()); // does nothing, and does not panic
                              // `TrackedStream` and the cudarc buffers need a `CudaStream`, which needs a driver to
                              // exist at all; the engine's decisions without one are the Recorder tests in cai-core.
    assert_eq!(DriverError::NotFound.to_string(), "the CUDA driver library (libcuda) was not found on this machine");
}

fn context() -> Arc<CudaContext> {
    assert_eq!(cuda::driver_status(), Ok(()), "no usable CUDA driver: run this where a GPU is");
    cuda::cudarc_context(0).expect("device 0")
}

fn current() -> Option<usize> {
    result::ctx::get_current().unwrap().map(|c| c as usize)
}

fn handle(stream: &CudaStream) -> Stream {
    stream.as_stream().unwrap()
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn pointer_info_gives_device_type_and_allocation() {
    let ctx = context();
    let stream = ctx.default_stream();
    let slice = stream.alloc_zeros::<f32>(1000).unwrap();
    let base = slice.device_ptr(&stream).0 as usize;
    let info = cuda::pointer_info(base + 400).unwrap().expect("device memory is known");
    assert_eq!((info.device, info.memory), (0, MemoryType::Device));
    let range = info.allocation.expect("device memory has a range");
    assert!(range.start <= base && range.end >= base + 4000, "{range:x?} holds the slice at {base:x}");
    assert_eq!(cuda::unmapped(base..base + 4000, base, 0), Ok(None));
    assert_eq!(cuda::pointer_info(0x10), Ok(None), "an address the driver does not know");
    let host = [0u8; 64];
    assert_eq!(cuda::pointer_info(host.as_ptr() as usize), Ok(None), "unregistered host memory");
    let side = ctx.new_stream().unwrap();
    assert_eq!(cuda::stream_device(handle(&side)), Ok(Some(0)));
}

/// Memory mapped through the virtual memory API in two physical pieces: the driver gives
/// one range per piece, and the mapped check walks them.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn memory_mapped_in_two_pieces_is_checked_piece_by_piece() {
    let ctx = context();
    let _keep = KeepCurrent::new();
    ctx.bind_to_thread().unwrap();
    // SAFETY: plain virtual memory management calls on valid out-pointers; everything
    // created is released at the end.
    unsafe {
        let mut prop: sys::CUmemAllocationProp = std::mem::zeroed();
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        let mut granularity = 0usize;
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
        .result()
        .unwrap();
        let mut base: sys::CUdeviceptr = 0;
        sys::cuMemAddressReserve(&mut base, 4 * granularity, 0, 0, 0).result().unwrap();
        let mut pieces = [0 as sys::CUmemGenericAllocationHandle; 2];
        for (i, piece) in pieces.iter_mut().enumerate() {
            sys::cuMemCreate(piece, granularity, &prop, 0).result().unwrap();
            sys::cuMemMap(base + (i * granularity) as u64, granularity, 0, *piece, 0).result().unwrap();
        }
        let mut access: sys::CUmemAccessDesc = std::mem::zeroed();
        access.location = prop.location;
        access.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        sys::cuMemSetAccess(base, 2 * granularity, &access, 1).result().unwrap();

        let start = base as usize;
        let info = cuda::pointer_info(start + 100).unwrap().expect("mapped memory is known");
        assert_eq!(info.memory, MemoryType::Device);
        let range = info.allocation.expect("a reserved range");
        assert!(range.start <= start && range.end >= start + 2 * granularity, "{range:x?}");
        // An array across both pieces is mapped throughout; one reaching the unmapped
        // third piece is not, from the first byte of that piece on.
        assert_eq!(cuda::unmapped(start + 100..start + 2 * granularity, start + 100, 0), Ok(None));
        assert_eq!(
            cuda::unmapped(start + 100..start + 3 * granularity, start + 100, 0),
            Ok(Some(start + 2 * granularity..start + 3 * granularity))
        );

        sys::cuMemUnmap(base, 2 * granularity).result().unwrap();
        for piece in pieces {
            sys::cuMemRelease(piece).result().unwrap();
        }
        sys::cuMemAddressFree(base, 4 * granularity).result().unwrap();
    }
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn driver_backend_orders_streams_and_pools_events() {
    let ctx = context();
    let a = ctx.new_stream().unwrap();
    let b = ctx.new_stream().unwrap();
    let backend = DriverBackend::primary(0).unwrap();
    let pool = EventPool::new();
    let (sa, sb) = (handle(&a), handle(&b));
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Wait).unwrap(), Action::Waited);
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Wait).unwrap(), Action::Waited);
    assert_eq!(pool.len(), 1, "the second import reused the first one's event");
    assert_eq!(import(&backend, &pool, sa, sa, SyncPolicy::Wait).unwrap(), Action::SameStream);
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Synchronize).unwrap(), Action::Synchronized);
    let at = backend.locate(sa).unwrap();
    assert_eq!(at.context, ctx.cu_ctx() as usize, "a handle is located in its own context");
    let event = backend.create_event(at.context).unwrap();
    backend.record(&event, at).unwrap();
    let legacy = backend.locate(Stream::LegacyDefault).unwrap();
    backend.wait(legacy, &event).unwrap();
    backend.wait_host(&event).unwrap();
    backend.synchronize(legacy).unwrap();
    assert_eq!(backend.capture(at).unwrap(), Capture::Idle);
}

/// Every entry point leaves the thread's current context as it found it: none on a new
/// thread, a non-primary context where one is current.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn entry_points_leave_the_current_context_as_found() {
    let ctx = context();
    let slice = ctx.default_stream().alloc_zeros::<u8>(4096).unwrap();
    let ptr = slice.device_ptr(&ctx.default_stream()).0 as usize;
    let export = ctx.new_stream().unwrap();
    let exercise = move |export: &Arc<CudaStream>| {
        cuda::pointer_info(ptr).unwrap().unwrap();
        cuda::unmapped(ptr..ptr + 4096, ptr, 0).unwrap();
        cuda::stream_device(handle(export)).unwrap();
        cuda::cudarc_context(0).unwrap();
        let backend = DriverBackend::primary(0).unwrap();
        let pool = EventPool::new();
        // Stream 1 under no current context resolves in device 0's primary context.
        import(&backend, &pool, handle(export), Stream::LegacyDefault, SyncPolicy::Wait).unwrap();
        import(&backend, &pool, Stream::LegacyDefault, handle(export), SyncPolicy::Synchronize).unwrap();
        let tracked = TrackedStream::new(export.clone()).unwrap();
        tracked.record(&export.context().default_stream()).unwrap();
        tracked.as_stream().unwrap();
    };
    std::thread::spawn({
        let export = export.clone();
        move || {
            assert_eq!(current(), None, "a new thread has no current context");
            exercise(&export);
            assert_eq!(current(), None, "an entry point left a context current");
        }
    })
    .join()
    .unwrap();

    let other = CudaContext::new_non_primary(0, 0).unwrap();
    std::thread::spawn(move || {
        // SAFETY: `other` is a live context.
        unsafe { result::ctx::set_current(other.cu_ctx()) }.unwrap();
        exercise(&export);
        assert_eq!(current(), Some(other.cu_ctx() as usize), "an entry point changed the current context");
    })
    .join()
    .unwrap();
}

/// Streams are located in their own contexts: a producer stream of a non-primary context
/// gets its event there (recording an event of another context fails), and the default
/// streams resolve in the caller's current context.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn streams_are_located_in_their_contexts() {
    let primary = context();
    let other = CudaContext::new_non_primary(0, 0).unwrap();
    let producer = other.new_stream().unwrap();
    let backend = DriverBackend::primary(0).unwrap();
    let pool = EventPool::new();
    std::thread::spawn(move || {
        let at = backend.locate(handle(&producer)).unwrap();
        assert_eq!(at.context, other.cu_ctx() as usize);
        // With no current context, stream 1 is the primary context's legacy stream.
        let legacy = backend.locate(Stream::LegacyDefault).unwrap();
        assert_eq!(legacy.context, primary.cu_ctx() as usize);
        assert_eq!(
            import(&backend, &pool, handle(&producer), Stream::LegacyDefault, SyncPolicy::Wait),
            Ok(Action::Waited)
        );
        // With the other context current, stream 1 is its legacy stream: a different stream.
        // SAFETY: `other` is a live context.
        unsafe { result::ctx::set_current(other.cu_ctx()) }.unwrap();
        let legacy_other = backend.locate(Stream::LegacyDefault).unwrap();
        assert_eq!(legacy_other.context, other.cu_ctx() as usize);
        assert_ne!(legacy, legacy_other);
        assert_eq!(order(&backend, &pool, legacy, legacy_other), Ok(Action::Waited));
        assert_eq!(
            import(&backend, &pool, Stream::LegacyDefault, Stream::LegacyDefault, SyncPolicy::Wait),
            Ok(Action::SameStream)
        );
    })
    .join()
    .unwrap();
}

fn raw_stream(flags: sys::CUstream_flags) -> sys::CUstream {
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the stream lives until the process ends.
    unsafe { sys::cuStreamCreate(&mut stream, flags as u32) }.result().unwrap();
    stream
}

fn stream_value(stream: sys::CUstream) -> Stream {
    Stream::from_raw(Some(stream as usize)).unwrap()
}

/// Ends the capture on `stream`, which must have stayed valid; destroys the graph.
fn end_capture(stream: sys::CUstream) {
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: `stream` is capturing; a valid out-pointer.
    let ended = unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.result();
    if !graph.is_null() {
        // SAFETY: the graph was just made.
        unsafe { sys::cuGraphDestroy(graph) }.result().unwrap();
    }
    ended.expect("the capture stayed valid");
}

/// Imports while a stream captures a graph, in the global capture mode (PyTorch's default;
/// CuPy's is relaxed): nothing the engine does invalidates the capture.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn imports_during_graph_capture_keep_the_capture_valid() {
    let ctx = context();
    let _keep = KeepCurrent::new();
    ctx.bind_to_thread().unwrap();
    let buffer = ctx.default_stream().alloc_zeros::<u32>(1 << 20).unwrap();
    let ptr = buffer.device_ptr(&ctx.default_stream()).0;
    ctx.default_stream().synchronize().unwrap();
    let backend = DriverBackend::primary(0).unwrap();
    let pool = EventPool::new();
    for flags in [sys::CUstream_flags::CU_STREAM_NON_BLOCKING, sys::CUstream_flags::CU_STREAM_DEFAULT] {
        let capturing = raw_stream(flags);
        let eager = raw_stream(sys::CUstream_flags::CU_STREAM_NON_BLOCKING);
        let (cap, eag) = (stream_value(capturing), stream_value(eager));
        let begin = || {
            // SAFETY: a live stream, a valid mode; the memset touches the live buffer.
            unsafe {
                sys::cuStreamBeginCapture_v2(capturing, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
                    .result()
                    .unwrap();
                sys::cuMemsetD32Async(ptr, 1, 1 << 20, capturing).result().unwrap();
            }
        };
        // SAFETY: the memset keeps the eager stream busy on the live buffer.
        unsafe { sys::cuMemsetD32Async(ptr, 2, 1 << 20, eager) }.result().unwrap();

        // Every outcome is collected and the capture always ended before anything is
        // asserted, so that a failure cannot leave a capture open for later tests.
        let mut failures: Vec<String> = Vec::new();
        let mut expect = |what: &str, ok: bool, got: &dyn std::fmt::Debug| {
            if !ok {
                failures.push(format!("{flags:?}: {what}: got {got:?}"));
            }
        };

        // The consumer captures, the producer does not: the host waits once.
        begin();
        let capture = backend.capture(backend.locate(cap).unwrap());
        expect("capture status", matches!(capture, Ok(Capture::Active(_))), &capture);
        let r = import(&backend, &pool, eag, cap, SyncPolicy::Wait);
        expect("eager producer, capturing consumer", r == Ok(Action::WaitedForCapture), &r);
        end_capture(capturing);

        // The producer captures: the same stream is fine, another is refused.
        begin();
        let r = import(&backend, &pool, cap, cap, SyncPolicy::Wait);
        expect("capturing producer, same stream", r == Ok(Action::SameStream), &r);
        let r = import(&backend, &pool, cap, eag, SyncPolicy::Wait);
        expect("capturing producer, other stream", matches!(r, Err(DriverError::Capture(_))), &r);
        let r = import(&backend, &pool, cap, cap, SyncPolicy::Synchronize);
        expect("capturing producer, synchronize", matches!(r, Err(DriverError::Capture(_))), &r);
        end_capture(capturing);

        // The legacy stream while a blocking stream captures is never touched.
        begin();
        let r = import(&backend, &pool, eag, Stream::LegacyDefault, SyncPolicy::Wait);
        if flags == sys::CUstream_flags::CU_STREAM_DEFAULT {
            expect("legacy consumer, blocking capture", matches!(r, Err(DriverError::Capture(_))), &r);
        } else {
            expect("legacy consumer, non-blocking capture", r == Ok(Action::Waited), &r);
        }
        end_capture(capturing);
        assert!(failures.is_empty(), "{failures:#?}");
    }
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn tracked_stream_makes_the_export_stream_wait_on_other_streams() {
    let ctx = context();
    let writer = ctx.new_stream().unwrap();
    let export = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let slice = writer.alloc_zeros::<u32>(n).unwrap();
    let ptr = slice.device_ptr(&writer).0;
    let tracked = TrackedStream::new(export.clone()).unwrap();
    for round in 1..=5u32 {
        // Held, so that the memset is still pending unless the export waits for it.
        hold(writer.cu_stream());
        // SAFETY: `ptr` addresses `n` u32s owned by `slice`; the memset is queued on `writer`.
        unsafe { sys::cuMemsetD32Async(ptr, round, n, writer.cu_stream()).result().unwrap() };
        tracked.record(&writer).unwrap();
        assert_eq!(tracked.as_stream().unwrap(), export.as_stream().unwrap());
        // A consumer that orders its work on the exported stream alone sees the write
        // (raw driver calls, so that cudarc's own event tracking plays no part).
        let host = read_back(ptr, n, export.cu_stream());
        assert!(host.iter().all(|&v| v == round), "round {round}");
    }
}

/// Work enqueued on a stream before it began capturing a graph still runs there: work
/// recorded during the capture must not hide it from the export's wait.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn tracked_stream_keeps_the_work_enqueued_before_a_capture() {
    let ctx = context();
    let writer = ctx.new_stream().unwrap();
    let export = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let slice = writer.alloc_zeros::<u32>(n).unwrap();
    let ptr = slice.device_ptr(&writer).0;
    writer.synchronize().unwrap();
    let tracked = TrackedStream::new(export.clone()).unwrap();
    let modes = [
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
    ];
    for (round, mode) in (1..=4u32).zip(modes.into_iter().cycle()) {
        // The writer is held for 100 ms before its memset, so that the memset is still
        // pending when the export stream copies unless the export waits for it.
        hold(writer.cu_stream());
        // SAFETY: `ptr` addresses `n` u32s owned by `slice`; the memset is queued on `writer`.
        unsafe { sys::cuMemsetD32Async(ptr, round, n, writer.cu_stream()).result().unwrap() };
        tracked.record(&writer).unwrap();
        // The writer captures a graph (never launched) that would write 0, and that
        // capture is recorded too.
        // SAFETY: a live stream, a valid mode; the captured memset is not run.
        unsafe {
            sys::cuStreamBeginCapture_v2(writer.cu_stream(), mode).result().unwrap();
            sys::cuMemsetD32Async(ptr, 0, n, writer.cu_stream()).result().unwrap();
        }
        let recorded = tracked.record(&writer);
        end_capture(writer.cu_stream());
        recorded.unwrap();
        // The export waits on the work of before the capture.
        tracked.as_stream().unwrap();
        let host = read_back(ptr, n, export.cu_stream());
        assert!(host.iter().all(|&v| v == round), "round {round}, {mode:?}");
    }
}

/// The `n` u32s at `ptr`, copied to the host on `stream` alone (raw driver calls, so that
/// cudarc's own event tracking plays no part).
fn read_back(ptr: sys::CUdeviceptr, n: usize, stream: sys::CUstream) -> Vec<u32> {
    let mut host = vec![0u32; n];
    // SAFETY: `ptr` addresses `n` u32s the caller keeps alive; `host` holds `n` u32s; the
    // copy is complete after the synchronize.
    unsafe {
        sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), ptr, n * 4, stream).result().unwrap();
        sys::cuStreamSynchronize(stream).result().unwrap();
    }
    host
}

/// Holds `stream` for 100 ms: a host function queued on it sleeps, and the work queued
/// after it waits.
fn hold(stream: sys::CUstream) {
    unsafe extern "C" fn pause(_: *mut std::ffi::c_void) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SAFETY: a live stream; the function touches no memory.
    unsafe { sys::cuLaunchHostFunc(stream, Some(pause), std::ptr::null_mut()) }.result().unwrap();
}

/// Work on the per-thread default stream of one thread, exported from another: two
/// different streams, so the export waits on the first thread's.
#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn per_thread_streams_of_two_threads_are_kept_apart() {
    let ctx = context();
    let n = 1 << 24;
    let slice = ctx.default_stream().alloc_zeros::<u32>(n).unwrap();
    let ptr = slice.device_ptr(&ctx.default_stream()).0;
    ctx.default_stream().synchronize().unwrap();
    let tracked = Arc::new(TrackedStream::new(ctx.per_thread_stream()).unwrap());
    for round in 1..=3u32 {
        let (t, c) = (tracked.clone(), ctx.clone());
        // The producing thread stays alive until the consumer has read: its per-thread
        // stream is its own, and goes away with it.
        let steps = Arc::new(std::sync::Barrier::new(2));
        let producer_steps = steps.clone();
        let producer = std::thread::spawn(move || {
            let _keep = KeepCurrent::new();
            c.bind_to_thread().unwrap();
            // Held first, so that the writes are still pending when the other thread reads
            // (the memsets alone may finish before it does, and the test would then pass
            // without the wait it guards).
            hold(2 as sys::CUstream);
            // SAFETY: `ptr` addresses `n` u32s alive until the end of the test.
            unsafe {
                for _ in 0..20 {
                    sys::cuMemsetD32Async(ptr, round, n, 2 as sys::CUstream).result().unwrap();
                }
            }
            t.record(&c.per_thread_stream()).unwrap();
            producer_steps.wait(); // recorded
            producer_steps.wait(); // read
        });
        steps.wait();
        // This thread exports on its own per-thread stream, which waits on the other's.
        assert_eq!(tracked.as_stream().unwrap(), Stream::PerThreadDefault);
        let _keep = KeepCurrent::new();
        ctx.bind_to_thread().unwrap();
        // On this thread's per-thread stream.
        let host = read_back(ptr, n, 2 as sys::CUstream);
        steps.wait();
        producer.join().unwrap();
        assert!(host.iter().all(|&v| v == round), "round {round}: the export did not wait for the other thread");
    }
}

#[derive(cai_core::CudaArrayInterface)]
struct OnAnotherStream {
    #[cai(data)]
    values: cudarc::driver::CudaSlice<u32>,
    #[cai(stream)]
    stream: Arc<cudarc::driver::CudaStream>,
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn a_slice_on_its_own_stream_is_ordered_before_the_container_stream() {
    use cai_core::CudaArrayInterface;
    let ctx = context();
    let writer = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let values = writer.alloc_zeros::<u32>(n).unwrap();
    let ptr = values.device_ptr(&writer).0;
    let container = OnAnotherStream { values, stream: ctx.new_stream().unwrap() };
    let export = container.stream.cu_stream();
    for round in 1..=5u32 {
        // Held first: the writes are still pending when the export is read back.
        hold(writer.cu_stream());
        // SAFETY: `ptr` addresses the slice's `n` u32s; the memsets are queued on `writer`.
        unsafe {
            for _ in 0..20 {
                sys::cuMemsetD32Async(ptr, round, n, writer.cu_stream()).result().unwrap();
            }
        }
        let before = current();
        let d = container.cuda_array_interface().unwrap();
        assert_eq!(current(), before, "the export changed the current context");
        assert_eq!(d.stream.to_raw(), Some(export as usize));
        let host = read_back(ptr, n, export);
        assert!(host.iter().all(|&v| v == round), "round {round}: the exported stream did not wait for the writer");
    }
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn two_devices_resolve_stream_1_separately() {
    assert_eq!(cuda::driver_status(), Ok(()));
    let count = result::device::get_count().unwrap();
    if count < 2 {
        eprintln!("skipped: needs two GPUs, this machine has {count}");
        return;
    }
    std::thread::spawn(|| {
        // No context is current on a new thread: each backend falls back to its device's.
        let b0 = DriverBackend::primary(0).unwrap();
        let b1 = DriverBackend::primary(1).unwrap();
        let (l0, l1) = (b0.locate(Stream::LegacyDefault).unwrap(), b1.locate(Stream::LegacyDefault).unwrap());
        assert_ne!(l0, l1, "stream 1 on device 0 is not stream 1 on device 1");
        let expected: Located<usize> = Located { stream: Stream::LegacyDefault, context: l1.context };
        assert_eq!(l1, expected);
        assert_eq!(order(&b0, &EventPool::new(), l0, l1), Ok(Action::Waited));
    })
    .join()
    .unwrap();
}
