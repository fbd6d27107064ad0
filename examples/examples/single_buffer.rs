//! `cargo run --example single_buffer`: one buffer with a shape, exported.
//!
//! `Image` is generic over its buffer: with a `Vec<f32>` it is a NumPy producer
//! (`__array_interface__`); with cudarc's `CudaSlice<f32>` (cai-core's `cuda` feature) the
//! very same struct is a CUDA Array Interface producer:
//!
//! ```ignore
//! let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
//! let image = Image { pixels: stream.alloc_zeros::<f32>(480 * 640)?, shape: [480, 640] };
//! let descriptor = image.cuda_array_interface()?; // stream: 1 (the legacy default)
//! ```

use cai_core::{ArrayInterface, CudaArrayInterface, Error};

#[derive(ArrayInterface, CudaArrayInterface)]
struct Image<B> {
    #[cai(data)]
    pixels: B,
    #[cai(shape)]
    shape: [usize; 2],
}

fn main() -> Result<(), Error> {
    let image = Image { pixels: vec![0.5f32; 480 * 640], shape: [480, 640] };
    // The descriptor prints as the CUDA interface writes it (`descr` and `stream` always);
    // cai-py's `__array_interface__` leaves out the `descr` of a plain type, and `stream`,
    // which NumPy's interface does not have.
    println!("descriptor = {}", image.array_interface()?);

    let wrong = Image { pixels: vec![0.5f32; 10], shape: [480, 640] };
    println!("a shape larger than its buffer is refused:\n  {}", wrong.array_interface().unwrap_err());
    Ok(())
}
