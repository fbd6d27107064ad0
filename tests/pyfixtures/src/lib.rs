//! Rust producers and `#[pyfunction]`s with typed extractors, for the pytest suite.
//!
//! The "device" arrays here are described, never dereferenced, except by the functions
//! named `*_host_backed`: the tests hand those producers whose pointer is NumPy memory,
//! so that writes through an extracted array can be checked on a machine without a GPU.

use std::mem::offset_of;

use cai_core::{ArrayInterface, CudaArrayInterface, DeviceBuffer, Element, RawDeviceBuffer, Stream, StreamHandle};
use cai_py::{Ix1, Ix2, IxDyn, PyCudaArrayRo, PyCudaArrayRw, PyHostArrayRo, PyHostArrayRw};
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyOverflowError};
use pyo3::prelude::*;

/// The product of `factors`, the size `what` of a fixture: an `OverflowError` when it
/// does not fit (never a panic).
fn product(what: &str, factors: &[usize]) -> PyResult<usize> {
    factors.iter().try_fold(1usize, |n, &f| n.checked_mul(f)).ok_or_else(|| {
        let shown: Vec<String> = factors.iter().map(usize::to_string).collect();
        PyOverflowError::new_err(format!("{what}: {} does not fit usize", shown.join(" x ")))
    })
}

/// `n` values `f(0)`, `f(1)`, ..., allocated fallibly: a `MemoryError` when they cannot
/// be (never a panic or an abort).
fn filled<T>(n: usize, f: impl FnMut(usize) -> T) -> PyResult<Vec<T>> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(n)
        .map_err(|e| PyMemoryError::new_err(format!("cannot allocate {n} elements of a fixture: {e}")))?;
    values.extend((0..n).map(f));
    Ok(values)
}

/// A host matrix of f32 exported through `__array_interface__` (and DLPack).
#[pyclass(weakref)]
#[derive(ArrayInterface)]
struct HostMatrix {
    #[cai(data)]
    data: Vec<f32>,
    #[cai(shape)]
    shape: [usize; 2],
}

#[cai_py::export(host)]
#[pymethods]
impl HostMatrix {
    /// A `rows` x `cols` matrix holding 0, 1, 2, ... in C order.
    #[new]
    fn new(rows: usize, cols: usize) -> PyResult<Self> {
        Ok(HostMatrix { data: filled(product("rows x cols", &[rows, cols])?, |i| i as f32)?, shape: [rows, cols] })
    }

    fn get(&self, i: usize, j: usize) -> PyResult<f32> {
        self.index(i, j).map(|k| self.data[k])
    }

    fn set(&mut self, i: usize, j: usize, value: f32) -> PyResult<()> {
        let k = self.index(i, j)?;
        self.data[k] = value;
        Ok(())
    }

    fn address(&self) -> usize {
        self.data.as_ptr() as usize
    }
}

impl HostMatrix {
    fn index(&self, i: usize, j: usize) -> PyResult<usize> {
        let [rows, cols] = self.shape;
        if i < rows && j < cols {
            Ok(i * cols + j)
        } else {
            Err(PyIndexError::new_err(format!("index ({i}, {j}) is outside shape ({rows}, {cols})")))
        }
    }
}

/// `len` f32s starting at a 64-byte boundary, which JAX's CPU backend needs to import
/// host memory without a copy.
struct Aligned {
    storage: Vec<f32>,
    offset: usize,
    len: usize,
}

// SAFETY: `storage[offset..offset + len]` are initialized f32s owned by the struct (the
// vector is never resized), and exports take `&self` of a uniquely owned value.
unsafe impl cai_core::HostBuffer for Aligned {
    type Elem = f32;

    fn as_ptr(&self) -> *const f32 {
        self.storage[self.offset..].as_ptr()
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// A host vector of f32 at a 64-byte boundary, holding 0, 1, 2, ...
#[pyclass(weakref)]
#[derive(ArrayInterface)]
struct AlignedVector {
    #[cai(data)]
    data: Aligned,
}

#[cai_py::export(host)]
#[pymethods]
impl AlignedVector {
    #[new]
    fn new(n: usize) -> PyResult<Self> {
        let padded =
            n.checked_add(16).ok_or_else(|| PyOverflowError::new_err(format!("n: {n} + 16 does not fit usize")))?;
        let mut storage = filled(padded, |_| 0.0f32)?;
        let offset = storage.as_ptr().align_offset(64);
        for (i, v) in storage[offset..offset + n].iter_mut().enumerate() {
            *v = i as f32;
        }
        Ok(AlignedVector { data: Aligned { storage, offset, len: n } })
    }

    fn address(&self) -> usize {
        cai_core::HostBuffer::as_ptr(&self.data) as usize
    }
}

/// A read-only host vector of i64.
#[pyclass(frozen)]
#[derive(ArrayInterface)]
#[cai(readonly)]
struct FrozenVector {
    #[cai(data)]
    data: Box<[i64]>,
}

#[cai_py::export(host)]
#[pymethods]
impl FrozenVector {
    #[new]
    fn new(values: Vec<i64>) -> Self {
        FrozenVector { data: values.into_boxed_slice() }
    }
}

/// A record with padding: u16 at 0, [f32; 3] at 4, f64 at 16, bool at 24, size 32.
#[derive(Clone, Copy, Debug, Element)]
#[repr(C)]
struct Particle {
    id: u16,
    position: [f32; 3],
    mass: f64,
    alive: bool,
}

/// `n` particles exported through `__array_interface__`.
#[pyclass]
#[derive(ArrayInterface)]
struct Particles {
    #[cai(data)]
    items: Vec<Particle>,
}

#[cai_py::export(host)]
#[pymethods]
impl Particles {
    #[new]
    fn new(n: usize) -> PyResult<Self> {
        let items = filled(n, |i| Particle {
            id: i as u16,
            position: [i as f32, 0.5, -1.0],
            mass: 2.0 * i as f64,
            alive: i % 2 == 0,
        })?;
        Ok(Particles { items })
    }

    /// `(id, position, mass, alive)` of particle `i`, as Rust sees it.
    fn get(&self, i: usize) -> PyResult<(u16, [f32; 3], f64, bool)> {
        let p = self.items.get(i).ok_or_else(|| PyIndexError::new_err(format!("no particle {i}")))?;
        Ok((p.id, p.position, p.mass, p.alive))
    }

    /// The Rust layout: `(size, {field: offset})`.
    #[staticmethod]
    fn layout() -> (usize, Vec<(&'static str, usize)>) {
        (
            std::mem::size_of::<Particle>(),
            vec![
                ("id", offset_of!(Particle, id)),
                ("position", offset_of!(Particle, position)),
                ("mass", offset_of!(Particle, mass)),
                ("alive", offset_of!(Particle, alive)),
            ],
        )
    }
}

/// NumPy's `align=True` layout of `[('value', '<f4'), ('ok', '?')]`, its padding a field
/// of its own (so its bytes are set) exported as padding.
#[derive(Clone, Copy, Debug, Element)]
#[repr(C)]
struct Flagged {
    value: f32,
    ok: bool,
    #[cai(padding)]
    _pad: [u8; 3],
}

/// `n` flagged values (`value` = i, `ok` for even i), exported through `__array_interface__`.
#[pyclass]
#[derive(ArrayInterface)]
struct FlaggedValues {
    #[cai(data)]
    items: Vec<Flagged>,
}

#[cai_py::export(host)]
#[pymethods]
impl FlaggedValues {
    #[new]
    fn new(n: usize) -> PyResult<Self> {
        Ok(FlaggedValues { items: filled(n, |i| Flagged { value: i as f32, ok: i % 2 == 0, _pad: [0; 3] })? })
    }
}

/// `(value, ok)` of each record of an array of [`Flagged`], as Rust reads it.
#[pyfunction]
fn host_flagged(x: PyHostArrayRo<'_, Flagged, Ix1>) -> PyResult<Vec<(f32, bool)>> {
    Ok(x.as_slice()?.iter().map(|f| (f.value, f.ok)).collect())
}

/// A host vector that grows in Rust while Python views it (a `StableVec`).
#[pyclass]
#[derive(ArrayInterface)]
struct GrowingVector {
    #[cai(data)]
    values: cai_core::StableVec<f64>,
}

#[cai_py::export(host)]
#[pymethods]
impl GrowingVector {
    #[new]
    fn new(values: Vec<f64>) -> Self {
        GrowingVector { values: values.into() }
    }

    /// Appends `n` copies of `value` (the buffer may move); a `MemoryError` when the
    /// memory cannot be had, with nothing changed.
    fn extend(&mut self, n: usize, value: f64) -> PyResult<()> {
        let len = self.values.len().saturating_add(n);
        self.values
            .try_resize(len, value)
            .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(format!("extend: {n} more values: {e}")))
    }

    fn address(&self) -> usize {
        self.values.as_ptr() as usize
    }

    fn retired_bytes(&self) -> usize {
        self.values.retired_bytes()
    }
}

/// Two named host arrays in one object.
#[pyclass]
#[derive(ArrayInterface)]
struct HostCloud {
    #[cai(data, array = "xyz")]
    xyz: Vec<f32>,
    #[cai(shape, array = "xyz")]
    xyz_shape: [usize; 2],
    #[cai(data, array = "ids")]
    ids: Vec<u32>,
}

#[cai_py::export(host_arrays(xyz, ids))]
#[pymethods]
impl HostCloud {
    #[new]
    fn new(n: usize) -> PyResult<Self> {
        let xyz = filled(product("n x 3", &[n, 3])?, |i| i as f32)?;
        Ok(HostCloud { xyz, xyz_shape: [n, 3], ids: filled(n, |i| i as u32)? })
    }
}

/// A record declared as a tuple struct, with padding between its fields: they are named
/// `f0` and `f2`, and NumPy names the padding `f1`.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct TuplePair(u8, f32);

/// A host vector of f32, nested in [`no_prelude::Keywords`].
#[derive(ArrayInterface)]
struct Column {
    #[cai(data)]
    values: Vec<f32>,
}

/// Generated code names everything by absolute path: a class derived and exported in a
/// module without a prelude, with arrays named by keywords (raw in Rust, plain in Python).
#[no_implicit_prelude]
mod no_prelude {
    /// Named host arrays: `type` (records of a tuple struct), `in` (nested, owned) and
    /// `shared` (nested behind an `Arc`, so read-only).
    #[::pyo3::pyclass]
    #[derive(::cai_core::ArrayInterface)]
    pub(crate) struct Keywords {
        #[cai(data)]
        values: ::std::vec::Vec<f32>,
        #[cai(data, array = "type")]
        pairs: ::std::vec::Vec<super::TuplePair>,
        #[cai(array)]
        r#in: super::Column,
        #[cai(array)]
        shared: ::std::sync::Arc<super::Column>,
    }

    #[::cai_py::export(host, host_arrays(r#type, r#in, shared))]
    #[::pyo3::pymethods]
    impl Keywords {
        #[new]
        fn new() -> Self {
            let column = |values: &[f32]| super::Column { values: values.to_vec() };
            Keywords {
                values: ::std::vec![1.0, 2.0],
                pairs: ::std::vec![super::TuplePair(1, 0.5), super::TuplePair(2, 1.5)],
                r#in: column(&[3.0, 4.0, 5.0]),
                shared: ::std::sync::Arc::new(column(&[6.0])),
            }
        }
    }
}

/// A device array that is only described (its address is never dereferenced).
#[pyclass]
#[derive(CudaArrayInterface)]
struct DeviceMatrix {
    #[cai(data)]
    data: RawDeviceBuffer<f32>,
    #[cai(shape)]
    shape: Vec<usize>,
    #[cai(strides)]
    strides: Vec<isize>,
    #[cai(stream)]
    stream: Stream,
}

fn raw<T: Element>(address: usize, len: usize) -> RawDeviceBuffer<T> {
    // SAFETY: the fixtures only describe these buffers; nothing dereferences the address
    // except the `*_host_backed` functions, whose callers pass host memory they own.
    unsafe { RawDeviceBuffer::new(address, len) }
}

fn stream_of(raw: Option<usize>) -> PyResult<Stream> {
    Stream::from_raw(raw).map_err(cai_py::to_py_err)
}

#[cai_py::export]
#[pymethods]
impl DeviceMatrix {
    /// `len` elements at `address`, viewed with `shape` (and `strides`), on `stream`.
    #[new]
    #[pyo3(signature = (address, len, shape, strides = None, stream = None, readonly = false))]
    fn new(
        address: usize,
        len: usize,
        shape: Vec<usize>,
        strides: Option<Vec<isize>>,
        stream: Option<usize>,
        readonly: bool,
    ) -> PyResult<Self> {
        let buffer = raw(address, len);
        let data = if readonly { buffer.readonly() } else { buffer };
        // Without strides, spell out C order: the export must still say `None`.
        let strides = match strides {
            Some(s) => s,
            None => cai_core::Descriptor::new::<f32>(address, shape.clone())
                .strides()
                .map_err(cai_py::to_py_err)?
                .into_owned(),
        };
        Ok(DeviceMatrix { data, shape, strides, stream: stream_of(stream)? })
    }

    /// Moves the array to another address, as a reallocation would.
    fn reallocate(&mut self, address: usize) {
        let len = self.data.len();
        self.data = raw(address, len);
    }

    /// Switches the stream the data is ordered on.
    fn set_stream(&mut self, stream: Option<usize>) -> PyResult<()> {
        self.stream = stream_of(stream)?;
        Ok(())
    }

    /// Calls `f` while holding `&mut self`, as a method changing the array would.
    fn while_changing(&mut self, f: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Ok(f.call0()?.unbind())
    }
}

/// A device array whose export options are set per object.
#[pyclass]
#[derive(CudaArrayInterface)]
struct OptionsDevice {
    #[cai(data)]
    data: RawDeviceBuffer<f32>,
    #[cai(stream)]
    stream: Stream,
    options: cai_py::ExportOptions,
}

#[cai_py::export(options = options)]
#[pymethods]
impl OptionsDevice {
    /// `stream_none` / `version`: None follows the process-wide setting.
    #[new]
    #[pyo3(signature = (address, len, stream, stream_none = None, version = None))]
    fn new(
        address: usize,
        len: usize,
        stream: usize,
        stream_none: Option<bool>,
        version: Option<u32>,
    ) -> PyResult<Self> {
        Ok(OptionsDevice {
            data: raw(address, len),
            stream: stream_of(Some(stream))?,
            options: cai_py::ExportOptions { stream_none, version },
        })
    }
}

/// A version 2 export (no stream key).
#[pyclass]
#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct DeviceV2 {
    #[cai(data)]
    data: RawDeviceBuffer<i32>,
}

#[cai_py::export]
#[pymethods]
impl DeviceV2 {
    #[new]
    fn new(address: usize, len: usize) -> Self {
        DeviceV2 { data: raw(address, len).on_stream(Stream::LegacyDefault) }
    }
}

/// A device mask.
#[derive(CudaArrayInterface)]
struct MaskBuffer {
    #[cai(data)]
    data: RawDeviceBuffer<bool>,
}

/// A masked device array.
#[pyclass]
#[derive(CudaArrayInterface)]
struct MaskedDevice {
    #[cai(data)]
    data: RawDeviceBuffer<f64>,
    #[cai(mask)]
    mask: MaskBuffer,
}

#[cai_py::export]
#[pymethods]
impl MaskedDevice {
    #[new]
    fn new(address: usize, mask_address: usize, len: usize) -> Self {
        MaskedDevice { data: raw(address, len), mask: MaskBuffer { data: raw(mask_address, len) } }
    }
}

/// A point cloud with two named device arrays, and export options of its own.
#[pyclass(weakref)]
#[derive(CudaArrayInterface)]
struct DeviceCloud {
    #[cai(data, array = "xyz")]
    xyz: RawDeviceBuffer<f32>,
    #[cai(shape, array = "xyz")]
    xyz_shape: [usize; 2],
    #[cai(data, array = "rgb")]
    rgb: RawDeviceBuffer<u8>,
    #[cai(shape, array = "rgb")]
    rgb_shape: [usize; 2],
    #[cai(stream)]
    stream: Stream,
    options: cai_py::ExportOptions,
}

#[cai_py::export(arrays(xyz, rgb), options = options)]
#[pymethods]
impl DeviceCloud {
    #[new]
    fn new(address: usize, n: usize) -> PyResult<Self> {
        let len = product("n x 3", &[n, 3])?;
        // The colours start 256 bytes past the positions' 12 bytes a point.
        let rgb = product("n x 12", &[n, 12])?.checked_add(256).and_then(|gap| address.checked_add(gap)).ok_or_else(
            || PyOverflowError::new_err(format!("address: {address:#x} + 12 x {n} + 256 does not fit usize")),
        )?;
        Ok(DeviceCloud {
            xyz: raw(address, len),
            xyz_shape: [n, 3],
            rgb: raw(rgb, len),
            rgb_shape: [n, 3],
            stream: Stream::Handle(StreamHandle::new(0x7000).expect("a handle")),
            options: cai_py::ExportOptions::default(),
        })
    }

    /// Sets the cloud's own export options (None follows the process-wide setting).
    #[pyo3(signature = (stream_none = None, version = None))]
    fn set_options(&mut self, stream_none: Option<bool>, version: Option<u32>) {
        self.options = cai_py::ExportOptions { stream_none, version };
    }
}

fn driver_error(e: impl std::fmt::Display) -> PyErr {
    Python::attach(|py| cai_py::driver_error(py, e.to_string()))
}

/// A cudarc f32 buffer on a stream of its own, with work on a second stream tracked, so
/// that the export stream waits on both (needs a GPU; `cai.CudaDriverError` otherwise).
#[pyclass]
#[derive(CudaArrayInterface)]
struct CudarcBuffer {
    #[cai(data)]
    data: cudarc::driver::CudaSlice<f32>,
    #[cai(shape)]
    shape: Vec<usize>,
    #[cai(stream)]
    tracked: cai_core::cuda::TrackedStream,
    side: std::sync::Arc<cudarc::driver::CudaStream>,
}

#[cai_py::export]
#[pymethods]
impl CudarcBuffer {
    #[new]
    fn new(shape: Vec<usize>) -> PyResult<Self> {
        let ctx = cai_core::cuda::cudarc_context(0).map_err(driver_error)?;
        let _keep = cai_core::cuda::KeepCurrent::new();
        let own = ctx.new_stream().map_err(|e| driver_error(format!("{e:?}")))?;
        let side = ctx.new_stream().map_err(|e| driver_error(format!("{e:?}")))?;
        let n = product("shape", &shape)?;
        let data = own.alloc_zeros::<f32>(n).map_err(|e| driver_error(format!("{e:?}")))?;
        own.synchronize().map_err(|e| driver_error(format!("{e:?}")))?;
        Ok(CudarcBuffer { data, shape, tracked: cai_core::cuda::TrackedStream::new(own).map_err(driver_error)?, side })
    }

    /// Sets every element to `value`, `repeat` times over, on the buffer's own stream
    /// (`side=False`) or on its second stream (`side=True`), without waiting.
    #[pyo3(signature = (value, side = false, repeat = 1))]
    fn fill(&self, value: f32, side: bool, repeat: usize) -> PyResult<()> {
        use cudarc::driver::{sys, DevicePtr};
        let _keep = cai_core::cuda::KeepCurrent::new();
        let stream = if side { self.side.clone() } else { self.tracked.stream().clone() };
        let ptr = self.data.device_ptr(&stream).0;
        for _ in 0..repeat {
            // SAFETY: `ptr` addresses the buffer's `len` f32s, alive as long as `self`.
            unsafe { sys::cuMemsetD32Async(ptr, value.to_bits(), self.data.len(), stream.cu_stream()) }
                .result()
                .map_err(|e| driver_error(format!("{e:?}")))?;
        }
        self.tracked.record(&stream).map_err(driver_error)
    }

    /// The values, after all work on both streams.
    fn to_list(&self) -> PyResult<Vec<f32>> {
        let _keep = cai_core::cuda::KeepCurrent::new();
        self.side.synchronize().map_err(|e| driver_error(format!("{e:?}")))?;
        self.tracked.stream().synchronize().map_err(|e| driver_error(format!("{e:?}")))?;
        self.tracked.stream().clone_dtoh(&self.data).map_err(|e| driver_error(format!("{e:?}")))
    }

    /// Handles of the own and the side stream.
    fn streams(&self) -> (usize, usize) {
        (self.tracked.stream().cu_stream() as usize, self.side.cu_stream() as usize)
    }
}

/// Zeroes a C-contiguous f32 device array through cudarc (`memset_zeros` on the
/// producer's stream), the way a Rust function launches cudarc work on a foreign tensor.
#[pyfunction]
fn zero_with_cudarc(x: PyCudaArrayRw<'_, f32, IxDyn>) -> PyResult<()> {
    use cudarc::driver::DeviceSlice;
    let _keep = cai_core::cuda::KeepCurrent::new();
    let mut view = x.cudarc_view()?;
    let stream = view.stream().clone();
    stream.memset_zeros(&mut view).map_err(|e| driver_error(format!("{e:?}")))?;
    stream.synchronize().map_err(|e| driver_error(format!("{e:?}")))
}

/// The device of the context `x`'s cudarc view works in (that of its stream).
#[pyfunction]
fn cudarc_view_device(x: PyCudaArrayRo<'_, f32, IxDyn>) -> PyResult<usize> {
    use cudarc::driver::DeviceSlice;
    let _keep = cai_core::cuda::KeepCurrent::new();
    let view = x.cudarc_view()?;
    let device = view.stream().context().ordinal();
    drop(view);
    Ok(device)
}

/// A cudarc view of a bool array: refused (cudarc would read any device byte as a bool).
#[pyfunction]
fn cudarc_view_of_bools(x: PyCudaArrayRo<'_, bool, IxDyn>) -> PyResult<usize> {
    use cudarc::driver::DeviceSlice;
    Ok(x.cudarc_view()?.len())
}

/// What keeps the memory of `x`'s cudarc view alive (the view's owner).
#[pyfunction]
fn cudarc_view_owner(x: PyCudaArrayRo<'_, f32, IxDyn>) -> PyResult<Py<PyAny>> {
    let _keep = cai_core::cuda::KeepCurrent::new();
    // The view goes (cudarc binds its context to the thread to drop its stream) before the
    // caller's context is put back.
    let view = x.cudarc_view()?;
    let owner = view.owner().clone_ref(x.object().py());
    drop(view);
    Ok(owner)
}

/// Fills a C-contiguous f32 device array with `value` on a new non-blocking cudarc stream
/// (not the producer's), and waits for that stream. `how` says how the stream is ordered
/// after the producer's pending work: `"stream"` names it to the extractor
/// (`as_mut_ptr_on`), `"host"` takes the pointer with `as_mut_ptr` (a host wait), and
/// `"cudarc"` goes through `cudarc_view` (cudarc's `DevicePtrMut` on another stream).
/// `"stream, pending"` names the stream as `"stream"` does, fills 20 times over and
/// returns without waiting: the producer's later work must wait for the fills.
#[pyfunction]
fn fill_on_new_stream(mut x: PyCudaArrayRw<'_, f32, IxDyn>, value: f32, how: &str) -> PyResult<()> {
    use cudarc::driver::{sys, DevicePtrMut};
    let _keep = cai_core::cuda::KeepCurrent::new();
    let ctx = cai_core::cuda::cudarc_context(0).map_err(driver_error)?;
    let stream = ctx.new_stream().map_err(|e| driver_error(format!("{e:?}")))?;
    let n = x.len();
    let memset = |ptr: sys::CUdeviceptr| {
        // SAFETY: `ptr` addresses the array's `n` contiguous f32s, kept alive by `x`.
        unsafe { sys::cuMemsetD32Async(ptr, value.to_bits(), n, stream.cu_stream()) }
            .result()
            .map_err(|e| driver_error(format!("{e:?}")))
    };
    match how {
        "stream" => memset(x.as_mut_ptr_on(&stream)? as sys::CUdeviceptr)?,
        "stream, pending" => {
            let ptr = x.as_mut_ptr_on(&stream)? as sys::CUdeviceptr;
            for _ in 0..20 {
                memset(ptr)?;
            }
            return Ok(());
        }
        "host" => memset(x.as_mut_ptr()? as sys::CUdeviceptr)?,
        "cudarc" => {
            let mut view = x.cudarc_view()?;
            let (ptr, _guard) = view.device_ptr_mut(&stream);
            memset(ptr)?;
        }
        other => return Err(pyo3::exceptions::PyValueError::new_err(format!("how: unknown mode {other:?}"))),
    }
    stream.synchronize().map_err(|e| driver_error(format!("{e:?}")))
}

/// Imports `x` as the extractor does and returns how many times a host wait would be
/// needed: 1 when the producer reported an integer stream under the wait policy.
#[pyfunction]
fn extract_and_settle(x: PyCudaArrayRo<'_, f32, IxDyn>) -> PyResult<usize> {
    x.as_ptr()?;
    Ok(usize::from(!x.stream().is_none()))
}

/// Orders `x`'s pending work before each stream of `streams` in turn (`order_on`, a
/// `Stream` value each), then calls `during` (the function's work, as far as the driver's
/// log goes) and returns what it returned; the producer's stream is made to wait for the
/// streams as `x` goes.
#[pyfunction]
fn order_on_streams(
    x: PyCudaArrayRo<'_, f32, IxDyn>,
    streams: Vec<usize>,
    during: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    for raw in streams {
        x.order_on(&stream_of(Some(raw))?)?;
    }
    Ok(during.call0()?.unbind())
}

/// Orders `x` before a new cudarc stream of device 0 that is a local of the function, as a
/// function's own stream usually is (gone before its arguments), first by its handle as a
/// `Stream` when `handle_first`; returns its handle.
#[pyfunction]
fn order_on_a_local_cudarc_stream(x: PyCudaArrayRo<'_, f32, IxDyn>, handle_first: bool) -> PyResult<usize> {
    let _keep = cai_core::cuda::KeepCurrent::new();
    let ctx = cai_core::cuda::cudarc_context(0).map_err(driver_error)?;
    let stream = ctx.new_stream().map_err(|e| driver_error(format!("{e:?}")))?;
    if handle_first {
        x.order_on(&stream_of(Some(stream.cu_stream() as usize))?)?;
    }
    x.order_on(&stream)?;
    Ok(stream.cu_stream() as usize)
}

/// Appends the address of the writable f32 device array `x` to `out` (`_more` is ignored:
/// room for what a hook is called with).
#[pyfunction]
fn append_address_rw(
    x: PyCudaArrayRw<'_, f32, IxDyn>,
    out: &Bound<'_, pyo3::types::PyList>,
    _more: &Bound<'_, PyAny>,
) -> PyResult<()> {
    out.append(x.device_address())
}

/// `(ptr, shape, strides, readonly, stream)` of any f32 device array.
#[pyfunction]
fn describe_f32(x: PyCudaArrayRo<'_, f32>) -> (usize, Vec<usize>, Vec<isize>, bool, Option<usize>) {
    (x.device_address(), x.shape().to_vec(), x.strides().to_vec(), x.readonly(), x.stream().to_raw())
}

/// The address of a complex64 device array (aligned as CUDA's `cuFloatComplex`: 8 bytes).
#[pyfunction]
fn complex64_address(x: PyCudaArrayRo<'_, num_complex::Complex<f32>>) -> usize {
    x.device_address()
}

/// The dims of a 2-d f32 device array.
#[pyfunction]
fn dims_f32_2d(x: PyCudaArrayRo<'_, f32, Ix2>) -> [usize; 2] {
    x.dims()
}

/// The element strides of a writable 2-d f64 device array.
#[pyfunction]
fn element_strides_f64_2d(x: PyCudaArrayRw<'_, f64, Ix2>) -> Vec<isize> {
    x.element_strides()
}

/// Accepts a 1-d u8 array for writing and does nothing with it.
#[pyfunction]
fn touch_u8(x: PyCudaArrayRw<'_, u8, Ix1>) -> usize {
    x.len()
}

/// Two arguments, the first for writing: refused when they overlap.
#[pyfunction]
fn add_into(out: PyCudaArrayRw<'_, f32, IxDyn>, a: PyCudaArrayRo<'_, f32, IxDyn>) -> (usize, usize) {
    (out.len(), a.len())
}

/// Two read-only arguments and a read-write one, for the overlap message's count.
#[pyfunction]
fn add_into_three(a: PyCudaArrayRo<'_, f32>, b: PyCudaArrayRo<'_, f32>, out: PyCudaArrayRw<'_, f32>) -> usize {
    a.len() + b.len() + out.len()
}

/// Two read-only arguments: overlapping is fine.
#[pyfunction]
fn sum_lengths(a: PyCudaArrayRo<'_, f32>, b: PyCudaArrayRo<'_, f32>) -> usize {
    a.len() + b.len()
}

/// Fills a 1-d contiguous f32 array with `value`. The caller passes a producer whose
/// pointer is host memory (a NumPy array's); on a GPU array this would be invalid.
#[pyfunction]
fn fill_host_backed(mut x: PyCudaArrayRw<'_, f32, Ix1>, value: f32) -> PyResult<()> {
    if !x.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("fill_host_backed needs a contiguous array"));
    }
    let n = x.len();
    let ptr = x.as_mut_ptr()?;
    if n == 0 {
        // An empty array's pointer may be null (views export 0), which no slice may have.
        return Ok(());
    }
    // SAFETY: the tests pass a producer wrapping a live, writable NumPy array of `n`
    // contiguous f32s, kept alive by `x` for the duration of this call.
    unsafe { std::slice::from_raw_parts_mut(ptr, n) }.fill(value);
    Ok(())
}

/// A 2-d f32 device array, only described: the export benchmark's producer.
#[pyclass(frozen)]
#[derive(CudaArrayInterface)]
struct BenchMatrix {
    #[cai(data)]
    data: RawDeviceBuffer<f32>,
    #[cai(shape)]
    shape: [usize; 2],
}

#[cai_py::export]
#[pymethods]
impl BenchMatrix {
    #[new]
    fn new(address: usize, rows: usize, cols: usize) -> PyResult<Self> {
        Ok(BenchMatrix { data: raw(address, product("rows x cols", &[rows, cols])?), shape: [rows, cols] })
    }
}

/// Makes the interface dict of `obj` (a `BenchMatrix`) `iterations` times in Rust and
/// returns the mean nanoseconds per dict: after the first, each is a copy of the dict the
/// thread keeps for the descriptor.
#[pyfunction]
fn bench_dict_build(obj: &Bound<'_, BenchMatrix>, iterations: u32) -> PyResult<f64> {
    let descriptor = obj.get().cuda_array_interface().map_err(cai_py::to_py_err)?;
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        let d = cai_py::interface_dict(obj.as_any(), &descriptor, cai_py::Interface::Cuda)?;
        std::hint::black_box(d);
    }
    Ok(start.elapsed().as_secs_f64() * 1e9 / f64::from(iterations.max(1)))
}

/// Mean nanoseconds of cai's strict read of an interface dict, in a Rust loop.
#[pyfunction]
fn bench_parse(dict: &Bound<'_, PyAny>, iterations: u32) -> PyResult<f64> {
    cai_py::__private::bench_parse(dict, iterations)
}

/// `(quick, full)`: cai's quick read of an interface dict and its full reader, as text.
#[pyfunction]
#[pyo3(signature = (value, host = false))]
fn both_reads(value: &Bound<'_, PyAny>, host: bool) -> PyResult<(Option<String>, String)> {
    cai_py::__private::both_reads(value, host)
}

/// Reports a `RuntimeError` carrying `message` through `sys.unraisablehook` as cai's drop
/// paths report their failures.
#[pyfunction]
fn report_unraisable(py: Python<'_>, message: String) {
    cai_py::__private::report_unraisable(py, message)
}

/// The import benchmark's floor: an object shaped like a cai view (frozen, weakref-able,
/// garbage-collected, holding its owner), made by a `#[pyfunction]` with no parsing at all.
#[pyclass(frozen, weakref)]
struct ViewFloor {
    owner: Py<PyAny>,
}

#[pymethods]
impl ViewFloor {
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.owner)
    }
}

/// The export benchmark's floor: a `#[pyclass]` whose `__cuda_array_interface__` getter
/// only copies a stored dict (no descriptor, no validation).
#[pyclass(frozen)]
struct ExportFloor {
    dict: Py<pyo3::types::PyDict>,
}

#[pymethods]
impl ExportFloor {
    #[new]
    fn new(dict: Py<pyo3::types::PyDict>) -> Self {
        ExportFloor { dict }
    }

    #[getter(__cuda_array_interface__)]
    fn interface<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        self.dict.bind(py).copy()
    }
}

/// The eager reader's floor: reads `obj.__cuda_array_interface__` and returns a
/// [`ViewFloor`] of `obj`, parsing nothing.
#[pyfunction]
fn read_floor(obj: &Bound<'_, PyAny>) -> PyResult<ViewFloor> {
    std::hint::black_box(obj.getattr(pyo3::intern!(obj.py(), "__cuda_array_interface__"))?);
    Ok(ViewFloor { owner: obj.clone().unbind() })
}

/// [`read_floor`] for NumPy's interface: reads `obj.__array_interface__` and returns a
/// [`ViewFloor`] of `obj`, parsing nothing.
#[pyfunction]
fn read_host_floor(obj: &Bound<'_, PyAny>) -> PyResult<ViewFloor> {
    std::hint::black_box(obj.getattr(pyo3::intern!(obj.py(), "__array_interface__"))?);
    Ok(ViewFloor { owner: obj.clone().unbind() })
}

/// Makes a [`ViewFloor`] of `obj`.
#[pyfunction]
fn view_floor(obj: Py<PyAny>) -> ViewFloor {
    ViewFloor { owner: obj }
}

/// The extractor benchmark's function: a typed 2-d f32 argument.
#[pyfunction]
fn takes_array(x: PyCudaArrayRo<'_, f32, Ix2>) -> bool {
    !x.is_empty()
}

/// A `#[pyfunction]` taking a 2-d f32 host array, for the host extractor's benchmark.
#[pyfunction]
fn takes_host_array(x: PyHostArrayRo<'_, f32, Ix2>) -> bool {
    !x.is_empty()
}

/// The same function taking a plain object, for the extractor's overhead benchmark.
#[pyfunction]
fn takes_object(x: &Bound<'_, PyAny>) -> bool {
    !x.is_none()
}

/// The sum of a host array's elements, through `as_slice`.
#[pyfunction]
fn host_sum(x: PyHostArrayRo<'_, f64>) -> PyResult<f64> {
    Ok(x.as_slice()?.iter().sum())
}

/// The bfloat16 values of a host array, as floats.
#[pyfunction]
fn host_bf16(x: PyHostArrayRo<'_, half::bf16>) -> PyResult<Vec<f32>> {
    Ok(x.as_slice()?.iter().map(|v| v.to_f32()).collect())
}

/// Holds `x` as a slice for writing while `during()` runs, then writes `x[0] = 1`;
/// returns what `during` returned.
#[pyfunction]
fn host_hold(mut x: PyHostArrayRw<'_, f64>, during: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let slice = x.as_slice_mut()?;
    let result = during.call0()?;
    if let Some(first) = slice.first_mut() {
        *first = 1.0;
    }
    Ok(result.unbind())
}

/// Puts a list into the interpreter's state dict, so that the collector tracks the dict and
/// `gc.get_objects()` hands it to Python code, as CPython 3.13's `datetime` does by putting
/// its module there.
#[pyfunction]
fn track_interpreter_dict(py: Python<'_>) -> PyResult<()> {
    let list = pyo3::types::PyList::empty(py);
    // SAFETY: the GIL is held; the state dict is borrowed from the interpreter, which
    // outlives the call, and `PyDict_SetItemString` takes its own reference to the list.
    let status = unsafe {
        let dict = pyo3::ffi::PyInterpreterState_GetDict(pyo3::ffi::PyInterpreterState_Get());
        if dict.is_null() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err("no interpreter state dict"));
        }
        pyo3::ffi::PyDict_SetItemString(dict, c"cai_fixtures.tracked".as_ptr(), list.as_ptr())
    };
    if status != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(())
}

/// Holds `x` as a slice while `during()` runs; returns what `during` returned.
#[pyfunction]
fn host_hold_ro(x: PyHostArrayRo<'_, f64>, during: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let slice = x.as_slice()?;
    let result = during.call0()?;
    std::hint::black_box(slice);
    Ok(result.unbind())
}

/// Holds the device array `x` while `during()` runs; returns what `during` returned.
#[pyfunction]
fn device_hold(x: PyCudaArrayRo<'_, f32, IxDyn>, during: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let result = during.call0()?;
    std::hint::black_box(x.device_address());
    Ok(result.unbind())
}

/// `cai_py::as_array` called from Rust: in a module other than the `cai` package, the
/// view is made by the package's factory.
#[pyfunction]
fn rust_as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    cai_py::as_array(obj)
}

/// `cai_py::as_cuda_array` called from Rust, as [`rust_as_array`].
#[pyfunction]
fn rust_as_cuda_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    cai_py::as_cuda_array(obj, None, None, None, None, None)
}

/// `(address, shape, strides, readonly, len)` of a 2-d host array of f32.
#[pyfunction]
fn host_describe(x: PyHostArrayRo<'_, f32, Ix2>) -> (usize, [usize; 2], Vec<isize>, bool, usize) {
    (x.address(), x.dims(), x.strides().to_vec(), x.readonly(), x.len())
}

/// A record of no bytes (`|V0`): its arrays reach no memory, whatever their length.
#[derive(Clone, Copy, Debug, Element)]
#[repr(C)]
struct Nothing {
    none: [f32; 0],
}

/// `(len of as_slice, len of as_array)` of an array of zero-size records.
#[pyfunction]
fn host_zero_size(x: PyHostArrayRo<'_, Nothing>) -> PyResult<(usize, usize)> {
    Ok((x.as_slice()?.len(), x.as_array()?.len()))
}

/// The shape of a host array of f32 of any dimensions (its memory is not read).
#[pyfunction]
fn host_shape_f32(x: PyHostArrayRo<'_, f32>) -> Vec<usize> {
    x.shape().to_vec()
}

/// Multiplies a C-contiguous host array of f32 by `factor` in place, through `as_slice_mut`.
#[pyfunction]
fn host_scale(mut x: PyHostArrayRw<'_, f32, Ix2>, factor: f32) -> PyResult<()> {
    for v in x.as_slice_mut()? {
        *v *= factor;
    }
    Ok(())
}

/// `out[i] += a[i]`, two host arguments (for the overlap check).
#[pyfunction]
fn host_add_into(mut out: PyHostArrayRw<'_, f32, Ix1>, a: PyHostArrayRo<'_, f32, Ix1>) -> PyResult<()> {
    let a = a.as_slice()?;
    for (o, v) in out.as_slice_mut()?.iter_mut().zip(a) {
        *o += v;
    }
    Ok(())
}

/// The elements of a bool vector, as Rust reads them.
#[pyfunction]
fn host_bools(x: PyHostArrayRo<'_, bool, Ix1>) -> PyResult<Vec<bool>> {
    Ok(x.as_slice()?.to_vec())
}

/// The first element of a bool array of any shape through `ndarray`'s view, or `None`
/// when it is empty (every element is checked first).
#[pyfunction]
fn host_nd_first_bool(x: PyHostArrayRo<'_, bool>) -> PyResult<Option<bool>> {
    Ok(x.as_array()?.iter().next().copied())
}

/// `alive` of each particle of a record array, as Rust reads it.
#[pyfunction]
fn host_alive(x: PyHostArrayRo<'_, Particle, Ix1>) -> PyResult<Vec<bool>> {
    Ok(x.as_slice()?.iter().map(|p| p.alive).collect())
}

/// The elements of a host array of i64 in logical (C) order, through `ndarray`'s view:
/// any strides, negative ones included.
#[pyfunction]
fn host_nd_elements(x: PyHostArrayRo<'_, i64>) -> PyResult<Vec<i64>> {
    listable(x.len())?;
    Ok(x.as_array()?.iter().copied().collect())
}

/// A `MemoryError` for more elements than a test lists (a broadcast array of 2**59
/// elements in eight bytes is a valid argument; its list is not).
fn listable(len: usize) -> PyResult<()> {
    match len {
        0..=0x100_0000 => Ok(()),
        _ => Err(pyo3::exceptions::PyMemoryError::new_err(format!("{len} elements are too many to list"))),
    }
}

/// The rows of a 2-d host array of i32 through `ndarray`'s view.
#[pyfunction]
fn host_nd_rows(x: PyHostArrayRo<'_, i32, Ix2>) -> PyResult<Vec<Vec<i32>>> {
    listable(x.len())?;
    Ok(x.as_array()?.rows().into_iter().map(|r| r.to_vec()).collect())
}

/// Writes each element's logical (C-order) index into a host array of i64 of any strides.
#[pyfunction]
fn host_nd_number(mut x: PyHostArrayRw<'_, i64>) -> PyResult<()> {
    for (i, v) in (0i64..).zip(x.as_array_mut()?.iter_mut()) {
        *v = i;
    }
    Ok(())
}

/// Adds `a` into `out`, element by element, through `ndarray`'s views (any strides).
#[pyfunction]
fn host_nd_add_into(mut out: PyHostArrayRw<'_, f32>, a: PyHostArrayRo<'_, f32>) -> PyResult<()> {
    let a = a.as_array()?;
    let mut out = out.as_array_mut()?;
    if out.shape() != a.shape() {
        return Err(pyo3::exceptions::PyValueError::new_err("shapes differ"));
    }
    out.zip_mut_with(&a, |o, v| *o += v);
    Ok(())
}

/// Swaps the elements of two host arrays of the same shape through `ndarray`'s views,
/// both held for writing at once.
#[pyfunction]
fn host_nd_swap(mut a: PyHostArrayRw<'_, f32>, mut b: PyHostArrayRw<'_, f32>) -> PyResult<()> {
    let mut a = a.as_array_mut()?;
    let mut b = b.as_array_mut()?;
    if a.shape() != b.shape() {
        return Err(pyo3::exceptions::PyValueError::new_err("shapes differ"));
    }
    a.iter_mut().zip(b.iter_mut()).for_each(|(x, y)| std::mem::swap(x, y));
    Ok(())
}

#[pymodule]
fn cai_fixtures(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cai_py::main_interpreter_only(m.py(), "cai_fixtures")?;
    m.add_class::<HostMatrix>()?;
    m.add_class::<FrozenVector>()?;
    m.add_class::<AlignedVector>()?;
    m.add_class::<Particles>()?;
    m.add_class::<FlaggedValues>()?;
    m.add_function(wrap_pyfunction!(host_flagged, m)?)?;
    m.add_function(wrap_pyfunction!(add_into_three, m)?)?;
    m.add_class::<HostCloud>()?;
    m.add_class::<no_prelude::Keywords>()?;
    m.add_class::<GrowingVector>()?;
    m.add_class::<DeviceMatrix>()?;
    m.add_class::<DeviceV2>()?;
    m.add_class::<OptionsDevice>()?;
    m.add_class::<MaskedDevice>()?;
    m.add_class::<DeviceCloud>()?;
    m.add_class::<CudarcBuffer>()?;
    m.add_function(wrap_pyfunction!(zero_with_cudarc, m)?)?;
    m.add_function(wrap_pyfunction!(cudarc_view_owner, m)?)?;
    m.add_function(wrap_pyfunction!(fill_on_new_stream, m)?)?;
    m.add_function(wrap_pyfunction!(extract_and_settle, m)?)?;
    m.add_function(wrap_pyfunction!(order_on_streams, m)?)?;
    m.add_function(wrap_pyfunction!(append_address_rw, m)?)?;
    m.add_function(wrap_pyfunction!(order_on_a_local_cudarc_stream, m)?)?;
    m.add_function(wrap_pyfunction!(cudarc_view_device, m)?)?;
    m.add_function(wrap_pyfunction!(cudarc_view_of_bools, m)?)?;
    m.add_function(wrap_pyfunction!(describe_f32, m)?)?;
    m.add_function(wrap_pyfunction!(dims_f32_2d, m)?)?;
    m.add_function(wrap_pyfunction!(element_strides_f64_2d, m)?)?;
    m.add_function(wrap_pyfunction!(touch_u8, m)?)?;
    m.add_function(wrap_pyfunction!(add_into, m)?)?;
    m.add_function(wrap_pyfunction!(sum_lengths, m)?)?;
    m.add_function(wrap_pyfunction!(fill_host_backed, m)?)?;
    m.add_function(wrap_pyfunction!(takes_object, m)?)?;
    m.add_function(wrap_pyfunction!(takes_array, m)?)?;
    m.add_function(wrap_pyfunction!(takes_host_array, m)?)?;
    m.add_function(wrap_pyfunction!(host_sum, m)?)?;
    m.add_function(wrap_pyfunction!(host_bf16, m)?)?;
    m.add_function(wrap_pyfunction!(complex64_address, m)?)?;
    m.add_function(wrap_pyfunction!(host_hold, m)?)?;
    m.add_function(wrap_pyfunction!(host_hold_ro, m)?)?;
    m.add_function(wrap_pyfunction!(device_hold, m)?)?;
    m.add_function(wrap_pyfunction!(rust_as_array, m)?)?;
    m.add_function(wrap_pyfunction!(rust_as_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(host_describe, m)?)?;
    m.add_function(wrap_pyfunction!(host_shape_f32, m)?)?;
    m.add_function(wrap_pyfunction!(host_zero_size, m)?)?;
    m.add_function(wrap_pyfunction!(host_scale, m)?)?;
    m.add_function(wrap_pyfunction!(host_add_into, m)?)?;
    m.add_function(wrap_pyfunction!(host_bools, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_first_bool, m)?)?;
    m.add_function(wrap_pyfunction!(host_alive, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_elements, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_rows, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_number, m)?)?;
    m.add_function(wrap_pyfunction!(bench_dict_build, m)?)?;
    m.add_function(wrap_pyfunction!(bench_parse, m)?)?;
    m.add_function(wrap_pyfunction!(both_reads, m)?)?;
    m.add_function(wrap_pyfunction!(report_unraisable, m)?)?;
    m.add_class::<BenchMatrix>()?;
    m.add_class::<ViewFloor>()?;
    m.add_class::<ExportFloor>()?;
    m.add_function(wrap_pyfunction!(view_floor, m)?)?;
    m.add_function(wrap_pyfunction!(read_floor, m)?)?;
    m.add_function(wrap_pyfunction!(read_host_floor, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_add_into, m)?)?;
    m.add_function(wrap_pyfunction!(host_nd_swap, m)?)?;
    m.add_function(wrap_pyfunction!(track_interpreter_dict, m)?)?;
    Ok(())
}
