//! cudarc buffers exported through the derive, on a real device.

use std::sync::Arc;

use cai_core::{CudaArrayInterface, DeviceBuffer, Stream};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, DevicePtr};

#[derive(CudaArrayInterface)]
struct Image<B> {
    #[cai(data)]
    pixels: B,
    #[cai(shape)]
    shape: [usize; 2],
}

#[derive(CudaArrayInterface)]
struct OnStream {
    #[cai(data)]
    values: CudaSlice<u8>,
    #[cai(stream)]
    stream: Arc<CudaStream>,
}

fn context() -> Arc<CudaContext> {
    // SAFETY: probing for the driver library loads it; nothing else happens.
    assert!(unsafe { cudarc::driver::sys::is_culib_present() }, "no CUDA driver library: run this where a GPU is");
    CudaContext::new(0).expect("device 0")
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn cudarc_slices_and_views_are_exported_zero_copy() {
    let ctx = context();
    let stream = ctx.default_stream();
    let slice = stream.alloc_zeros::<f32>(12).unwrap();
    let base = {
        let (ptr, _record) = slice.device_ptr(&stream);
        ptr as usize
    };
    let image = Image { pixels: slice, shape: [3, 4] };
    let d = image.cuda_array_interface().unwrap();
    assert_eq!((d.data, d.shape.as_slice(), d.typestr.to_string().as_str()), (base, &[3, 4][..], "<f4"));
    assert_eq!(d.stream, Stream::LegacyDefault, "cudarc's default stream is the null stream, exported as 1");
    assert!(!d.readonly);

    let view: CudaView<'_, f32> = image.pixels.slice(2..6);
    assert_eq!(
        (DeviceBuffer::device_address(&view), DeviceBuffer::len(&view), DeviceBuffer::readonly(&view)),
        (base + 8, 4, true)
    );
    let d = Image { pixels: view, shape: [2, 2] }.cuda_array_interface().unwrap();
    assert!(d.readonly);

    // An empty array exports pointer 0. (An empty view of a slice: the driver refuses
    // allocations of zero bytes.)
    let empty: CudaView<'_, f32> = image.pixels.slice(0..0);
    assert_eq!(Image { pixels: empty, shape: [0, 4] }.cuda_array_interface().unwrap().data, 0);
}

#[test]
#[cfg_attr(not(cai_cuda_driver), ignore = "needs a CUDA driver (none found at build time; CAI_GPU_TESTS=1 forces)")]
fn a_stream_field_is_exported_as_its_handle() {
    let ctx = context();
    let other = ctx.new_stream().unwrap();
    let values = ctx.default_stream().alloc_zeros::<u8>(4).unwrap();
    let d = OnStream { values, stream: other.clone() }.cuda_array_interface().unwrap();
    assert_eq!(d.stream.to_raw(), Some(other.cu_stream() as usize));
}
