//! The cai example extension module `pycontainer`.
//!
//! - `Image`: a host image (`StableVec<f32>`, so that growing it never frees memory a
//!   NumPy view reads), exported through NumPy's `__array_interface__` and DLPack.
//! - `DeviceImage`: a device image (cudarc `CudaSlice<f32>` on its own stream), exported
//!   through `__cuda_array_interface__`; needs a GPU.
//! - `describe(x)` and `fill(x, value)`: `#[pyfunction]`s taking any CUDA Array Interface
//!   producer (CuPy, PyTorch, Numba, JAX, `DeviceImage`) as a typed, checked argument.
//! - `brighten(x, by)` and `total(x)`: `#[pyfunction]`s taking any host array (NumPy, JAX
//!   on the CPU, `Image`) as a typed, checked argument, read through safe slices.

use std::sync::Arc;

use cai_core::{ArrayInterface, CudaArrayInterface, PyTuple, StableVec};
use cai_py::{Ix2, PyCudaArrayRo, PyCudaArrayRw, PyHostArrayRo, PyHostArrayRw};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use pyo3::exceptions::{PyMemoryError, PyOverflowError};
use pyo3::prelude::*;

/// A `rows` x `cols` image of f32 in host memory.
#[pyclass]
#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: StableVec<f32>,
    #[cai(shape)]
    shape: [usize; 2],
}

#[cai_py::export(host)]
#[pymethods]
impl Image {
    #[new]
    fn new(rows: usize, cols: usize) -> PyResult<Self> {
        let mut pixels = StableVec::new();
        pixels.try_resize(pixel_count(rows, cols)?, 0.0).map_err(|e| no_memory(rows, cols, e))?;
        Ok(Image { pixels, shape: [rows, cols] })
    }

    /// The address of the first pixel, as Rust holds it.
    fn address(&self) -> usize {
        self.pixels.as_ptr() as usize
    }

    /// Adds `rows` rows of `value`. The pixels may move to a larger allocation; views made
    /// earlier keep reading the old one, which the image keeps until it is dropped. A size
    /// past the address space is an `OverflowError`, memory that cannot be had a
    /// `MemoryError`; the image is unchanged then.
    fn add_rows(&mut self, rows: usize, value: f32) -> PyResult<()> {
        let [old, cols] = self.shape;
        let total = old.checked_add(rows).ok_or_else(|| {
            PyOverflowError::new_err(format!("add_rows: {old} + {rows} rows are too many to address"))
        })?;
        self.pixels.try_resize(pixel_count(total, cols)?, value).map_err(|e| no_memory(total, cols, e))?;
        self.shape[0] = total;
        Ok(())
    }

    /// Sets every pixel to `value` (from Rust).
    fn fill(&mut self, value: f32) {
        self.pixels.fill(value);
    }

    /// The sum of the pixels, computed in Rust.
    fn sum(&self) -> f64 {
        self.pixels.iter().fold(0.0, |sum, &p| sum + f64::from(p))
    }
}

/// The number of pixels of a `rows` x `cols` image, or the `OverflowError` of one whose
/// bytes could not be addressed. Sized as NumPy sizes arrays, an empty dimension counting
/// as one: an empty image with a huge other dimension could not be exported either.
fn pixel_count(rows: usize, cols: usize) -> PyResult<usize> {
    let addressable = rows
        .max(1)
        .checked_mul(cols.max(1))
        .and_then(|n| n.checked_mul(std::mem::size_of::<f32>()))
        .is_some_and(|bytes| bytes <= isize::MAX as usize);
    if !addressable {
        return Err(PyOverflowError::new_err(format!("a {rows} x {cols} image of f32 is too large to address")));
    }
    Ok(rows * cols)
}

fn no_memory(rows: usize, cols: usize, e: std::collections::TryReserveError) -> PyErr {
    PyMemoryError::new_err(format!("no memory for a {rows} x {cols} image of f32: {e}"))
}

/// cudarc's context of device `device`'s primary context. Fails cleanly without a usable
/// driver.
fn context(device: i32) -> PyResult<Arc<CudaContext>> {
    cai_core::cuda::cudarc_context(device).map_err(cai_py::driver_err)
}

/// A new stream of `ctx`, after the work queued so far on its legacy default stream.
/// (cudarc's `new_stream` would synchronize the whole context for its first stream: a host
/// wait, which also breaks a graph capture under way.)
fn new_stream(ctx: &Arc<CudaContext>) -> PyResult<Arc<CudaStream>> {
    cai_core::cuda::cudarc_stream_after(ctx, cai_core::Stream::LegacyDefault).map_err(cai_py::driver_err)
}

/// A `rows` x `cols` image of f32 in device memory, on a stream of its own.
#[pyclass]
#[derive(CudaArrayInterface)]
struct DeviceImage {
    #[cai(data)]
    pixels: CudaSlice<f32>,
    #[cai(shape)]
    shape: [usize; 2],
    #[cai(stream)]
    stream: Arc<CudaStream>,
}

#[cai_py::export]
#[pymethods]
impl DeviceImage {
    /// On device 0. (An empty image still allocates one element: CUDA allocates no 0 bytes.)
    #[new]
    fn new(rows: usize, cols: usize) -> PyResult<Self> {
        let n = pixel_count(rows, cols)?;
        // cudarc binds its context to this thread and leaves it there: the caller's (a
        // CuPy or PyTorch device block's) is put back when `_keep` drops.
        let _keep = cai_core::cuda::KeepCurrent::new();
        let stream = new_stream(&context(0)?)?;
        // The export describes `shape`: an empty one reaches no byte of the one element.
        let pixels = stream.alloc_zeros::<f32>(n.max(1)).map_err(cai_py::driver_err)?;
        Ok(DeviceImage { pixels, shape: [rows, cols], stream })
    }

    /// The pixels, copied to the host (row-major).
    fn to_list(&self) -> PyResult<Vec<f32>> {
        if self.shape.contains(&0) {
            return Ok(Vec::new());
        }
        let _keep = cai_core::cuda::KeepCurrent::new();
        self.stream.clone_dtoh(&self.pixels).map_err(cai_py::driver_err)
    }
}

/// A line about any 2-d f32 device array.
#[pyfunction]
fn describe(x: PyCudaArrayRo<'_, f32, Ix2>) -> String {
    let [rows, cols] = x.dims();
    let layout = if x.is_c_contiguous() { "C-contiguous" } else { "strided" };
    format!("{rows}x{cols} f32 at 0x{:x}, {layout}, strides {} bytes", x.device_address(), PyTuple(x.strides()))
}

/// Sets every element of a C-contiguous 2-d f32 device array to `value` on a stream of
/// this function's own, ordered after the producer's pending work, and waits for it.
#[pyfunction]
fn fill(mut x: PyCudaArrayRw<'_, f32, Ix2>, value: f32) -> PyResult<()> {
    if !x.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "x: fill needs a C-contiguous array, received shape {} with strides {}",
            PyTuple(x.shape()),
            PyTuple(x.strides())
        )));
    }
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let _keep = cai_core::cuda::KeepCurrent::new();
    // A stream of the context of the memory's device (the extractor refused memory of
    // another device than the current one).
    let Some(info) = cai_core::cuda::pointer_info(x.device_address()).map_err(cai_py::driver_err)? else {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "x: pointer 0x{:x} is not memory the CUDA driver knows",
            x.device_address()
        )));
    };
    let stream = new_stream(&context(info.device)?)?;
    // `stream` waits for the producer's pending work before the memset runs.
    let ptr = x.as_mut_ptr_on(&stream)? as cudarc::driver::sys::CUdeviceptr;
    // The memset runs in the current context, which must be the stream's.
    stream.context().bind_to_thread().map_err(cai_py::driver_err)?;
    // SAFETY: `x` is a writable f32 array of `n` elements, C-contiguous (checked above),
    // at a pointer aligned for f32 (the extractor checked), on the device of `stream`'s
    // context; the extractor keeps its producer alive until this call returns.
    unsafe {
        use cudarc::driver::sys;
        sys::cuMemsetD32Async(ptr, value.to_bits(), n, stream.cu_stream()).result().map_err(cai_py::driver_err)?;
    }
    stream.synchronize().map_err(cai_py::driver_err)
}

/// Adds `by` to every element of a C-contiguous 2-d f32 host array, in place.
#[pyfunction]
fn brighten(mut x: PyHostArrayRw<'_, f32, Ix2>, by: f32) -> PyResult<()> {
    for p in x.as_slice_mut()? {
        *p += by;
    }
    Ok(())
}

/// The sum of a C-contiguous f32 host array of any shape.
#[pyfunction]
fn total(x: PyHostArrayRo<'_, f32>) -> PyResult<f64> {
    // Folded from 0.0: a float sum of nothing is -0.0.
    Ok(x.as_slice()?.iter().fold(0.0, |sum, &p| sum + f64::from(p)))
}

#[pymodule]
fn pycontainer(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cai_py::main_interpreter_only(m.py(), "pycontainer")?;
    m.add_class::<Image>()?;
    m.add_class::<DeviceImage>()?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(fill, m)?)?;
    m.add_function(wrap_pyfunction!(brighten, m)?)?;
    m.add_function(wrap_pyfunction!(total, m)?)?;
    Ok(())
}
