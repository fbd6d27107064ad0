//! The driver module: every entry point without a driver, and the engine on a real device.

use std::sync::Arc;

use cai_core::cuda::{self, DriverBackend, DriverError, MemoryType, TrackedStream};
use cai_core::sync::{import, Action, Backend, EventPool, SyncPolicy};
use cai_core::{AsStream, Stream, StreamHandle};
use cudarc::driver::{CudaContext, DevicePtr};

#[test]
#[cfg_attr(cai_cuda_driver, ignore = "a CUDA driver is present: the GPU tests below cover this machine")]
fn every_entry_point_reports_a_missing_driver() {
    assert!(!cuda::driver_present());
    assert_eq!(DriverBackend::primary(0), Err(DriverError::NotFound));
    assert_eq!(cuda::pointer_info(0x7f00_0000_0000), Err(DriverError::NotFound));
    assert_eq!(cuda::stream_device(Stream::LegacyDefault), Err(DriverError::NotFound));
    let handle = Stream::Handle(StreamHandle::new(0x5000).unwrap());
    assert_eq!(cuda::stream_device(handle), Err(DriverError::NotFound));
    // `TrackedStream` and the cudarc buffers need a `CudaStream`, which needs a driver to
    // exist at all; the engine's decisions without one are the Recorder tests in cai-core.
    assert_eq!(DriverError::NotFound.to_string(), "the CUDA driver library (libcuda) was not found on this machine");
}

fn context() -> Arc<CudaContext> {
    assert!(cuda::driver_present(), "no CUDA driver library: run this where a GPU is");
    CudaContext::new(0).expect("device 0")
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn pointer_info_gives_device_type_and_allocation() {
    let ctx = context();
    let stream = ctx.default_stream();
    let slice = stream.alloc_zeros::<f32>(1000).unwrap();
    let base = slice.device_ptr(&stream).0 as usize;
    let info = cuda::pointer_info(base + 400).unwrap();
    assert_eq!((info.device, info.memory), (0, MemoryType::Device));
    let range = info.allocation.expect("device memory has a range");
    assert!(range.start <= base && range.end >= base + 4000, "{range:x?} holds the slice at {base:x}");
    assert!(cuda::pointer_info(0x10).is_err(), "an address the driver does not know");
    assert_eq!(
        cuda::stream_device(Stream::Handle(StreamHandle::new(ctx.new_stream().unwrap().cu_stream() as usize).unwrap())),
        Ok(Some(0))
    );
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn driver_backend_orders_streams_and_pools_events() {
    let ctx = context();
    let a = ctx.new_stream().unwrap();
    let b = ctx.new_stream().unwrap();
    let backend = DriverBackend::primary(0).unwrap();
    let pool = EventPool::new();
    let sa = a.as_stream().unwrap();
    let sb = b.as_stream().unwrap();
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Wait).unwrap(), Action::Waited);
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Wait).unwrap(), Action::Waited);
    assert_eq!(pool.len(), 1, "the second import reused the first one's event");
    assert_eq!(import(&backend, &pool, sa, sa, SyncPolicy::Wait).unwrap(), Action::SameStream);
    assert_eq!(import(&backend, &pool, sa, sb, SyncPolicy::Synchronize).unwrap(), Action::Synchronized);
    let event = backend.create_event().unwrap();
    backend.record(&event, sa).unwrap();
    backend.wait(Stream::LegacyDefault, &event).unwrap();
    backend.synchronize(Stream::LegacyDefault).unwrap();
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn tracked_stream_makes_the_export_stream_wait_on_other_streams() {
    use cudarc::driver::sys;
    let ctx = context();
    let writer = ctx.new_stream().unwrap();
    let export = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let slice = writer.alloc_zeros::<u32>(n).unwrap();
    let ptr = slice.device_ptr(&writer).0;
    let tracked = TrackedStream::new(export.clone()).unwrap();
    for round in 1..=5u32 {
        // SAFETY: `ptr` addresses `n` u32s owned by `slice`; the memset is queued on `writer`.
        unsafe { sys::cuMemsetD32Async(ptr, round, n, writer.cu_stream()).result().unwrap() };
        tracked.record(&writer).unwrap();
        assert_eq!(tracked.as_stream().unwrap(), export.as_stream().unwrap());
        // A consumer that orders its work on the exported stream alone sees the write
        // (raw driver calls, so that cudarc's own event tracking plays no part).
        let mut host = vec![0u32; n];
        // SAFETY: `host` holds `n` u32s; the copy is complete after the synchronize.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), ptr, n * 4, export.cu_stream()).result().unwrap();
            sys::cuStreamSynchronize(export.cu_stream()).result().unwrap();
        }
        assert!(host.iter().all(|&v| v == round), "round {round}");
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
    use cudarc::driver::sys;
    let ctx = context();
    let writer = ctx.new_stream().unwrap();
    let n = 1 << 24;
    let values = writer.alloc_zeros::<u32>(n).unwrap();
    let ptr = values.device_ptr(&writer).0;
    let container = OnAnotherStream { values, stream: ctx.new_stream().unwrap() };
    let export = container.stream.cu_stream();
    for round in 1..=5u32 {
        // SAFETY: `ptr` addresses the slice's `n` u32s; the memsets are queued on `writer`.
        unsafe {
            for _ in 0..20 {
                sys::cuMemsetD32Async(ptr, round, n, writer.cu_stream()).result().unwrap();
            }
        }
        let d = container.cuda_array_interface().unwrap();
        assert_eq!(d.stream.to_raw(), Some(export as usize));
        let mut host = vec![0u32; n];
        // SAFETY: `host` holds `n` u32s; the copy is complete after the synchronize.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), ptr, n * 4, export).result().unwrap();
            sys::cuStreamSynchronize(export).result().unwrap();
        }
        assert!(host.iter().all(|&v| v == round), "round {round}: the exported stream did not wait for the writer");
    }
}
