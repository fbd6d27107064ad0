//! The producer traits: what a container implements to be exported.

use std::rc::Rc;
use std::sync::Arc;

use crate::descriptor::Descriptor;
use crate::error::Result;

/// A container of device memory that can describe itself through the CUDA Array
/// Interface (`__cuda_array_interface__`).
///
/// `#[derive(CudaArrayInterface)]` implements it for structs that hold device buffers;
/// the Python layer turns the descriptor into the interface dict. The derive comes with
/// cai-core's `derive` feature: `cai-array-core = { version = "0.1", features = ["derive"] }`.
///
/// The descriptor is read afresh on every access: the pointer may change after a
/// reallocation and the stream after new work, so implementations must not cache it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `CudaArrayInterface`: add `#[derive(CudaArrayInterface)]` to a struct of device buffers",
    label = "not a device array: needs `CudaArrayInterface`",
    note = "a struct of host memory (`Vec<T>`, `Box<[T]>`, arrays, slices) derives `ArrayInterface` instead, and `#[cai_py::export(host)]` exports it",
    note = "the derives come with the `derive` feature of cai-array-core (used as `cai_core`): `cai-array-core = {{ version = \"0.1\", features = [\"derive\"] }}`"
)]
pub trait CudaArrayInterface {
    /// Describes the array as it is now.
    fn cuda_array_interface(&self) -> Result<Descriptor>;
}

/// A container of host memory that can describe itself through NumPy's
/// `__array_interface__`: the same dict without a stream.
///
/// It lets every exchange be tested against NumPy on machines without a GPU, and lets a
/// host container reach NumPy without a copy.
///
/// `#[derive(ArrayInterface)]` implements it for structs that hold host buffers. The
/// derive comes with cai-core's `derive` feature: `cai-array-core = { version = "0.1",
/// features = ["derive"] }`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `ArrayInterface`: add `#[derive(ArrayInterface)]` to a struct of host memory",
    label = "not a host array: needs `ArrayInterface`",
    note = "a struct of device buffers derives `CudaArrayInterface` instead, and `#[cai_py::export]` (without `host`) exports it",
    note = "the derives come with the `derive` feature of cai-array-core (used as `cai_core`): `cai-array-core = {{ version = \"0.1\", features = [\"derive\"] }}`"
)]
pub trait ArrayInterface {
    /// Describes the array as it is now. Its `stream` must be [`Stream::None`](crate::Stream::None).
    fn array_interface(&self) -> Result<Descriptor>;
}

/// A container that holds several arrays, each with a name (a point cloud's `xyz`, `rgb`
/// and `normals`), exported through the CUDA Array Interface one by one.
///
/// `#[derive(CudaArrayInterface)]` implements it for every struct, with the arrays named
/// by `#[cai(array)]` and `#[cai(..., array = "name")]` (an empty list when there are
/// none). The Python layer gives each name a property of its own.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no named device arrays: add `#[derive(CudaArrayInterface)]`, which implements `NamedCudaArrays`",
    label = "needs `NamedCudaArrays`",
    note = "the derive names the arrays marked `#[cai(array)]` or `#[cai(..., array = \"name\")]`",
    note = "the named arrays of a `#[derive(ArrayInterface)]` struct (host memory) are exported with `#[cai_py::export(host_arrays(...))]`, not `arrays(...)`"
)]
pub trait NamedCudaArrays {
    /// The names, in declaration order.
    const NAMES: &'static [&'static str];

    /// The array called `name` as it is now; `None` for a name not in [`NAMES`](Self::NAMES).
    fn cuda_array(&self, name: &str) -> Option<Result<Descriptor>>;

    /// Every named array with its descriptor, in declaration order.
    fn cuda_arrays(&self) -> Vec<(&'static str, Result<Descriptor>)> {
        Self::NAMES.iter().filter_map(|&name| Some((name, self.cuda_array(name)?))).collect()
    }
}

/// The host twin of [`NamedCudaArrays`], for NumPy's `__array_interface__`.
///
/// `#[derive(ArrayInterface)]` implements it for every struct.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no named host arrays: add `#[derive(ArrayInterface)]`, which implements `NamedArrays`",
    label = "needs `NamedArrays`",
    note = "the derive names the arrays marked `#[cai(array)]` or `#[cai(..., array = \"name\")]`",
    note = "the named arrays of a `#[derive(CudaArrayInterface)]` struct (device memory) are exported with `#[cai_py::export(arrays(...))]`, not `host_arrays(...)`"
)]
pub trait NamedArrays {
    /// The names, in declaration order.
    const NAMES: &'static [&'static str];

    /// The array called `name` as it is now; `None` for a name not in [`NAMES`](Self::NAMES).
    fn array(&self, name: &str) -> Option<Result<Descriptor>>;

    /// Every named array with its descriptor, in declaration order.
    fn arrays(&self) -> Vec<(&'static str, Result<Descriptor>)> {
        Self::NAMES.iter().filter_map(|&name| Some((name, self.array(name)?))).collect()
    }
}

/// `descriptor`, read-only when `shared`. Memory reached through a shared pointer (`&T`,
/// `Rc<T>`, `Arc<T>`) may be read by its other holders meanwhile, and Rust code reading
/// it through `&` assumes that nobody writes it: a consumer must not (as `&[T]`, a
/// `HostBuffer`, is exported read-only).
fn shared_if(shared: bool, descriptor: Result<Descriptor>) -> Result<Descriptor> {
    match shared {
        true => crate::__private::read_only(descriptor),
        false => descriptor,
    }
}

// The pointer impls are left out of "the following other types implement" lists: an error
// is about the pointee, whose own message says what to derive.
macro_rules! forward {
    ($($ptr:ty => $shared:literal),*) => {$(
        #[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
        #[diagnostic::do_not_recommend]
        impl<T: CudaArrayInterface + ?Sized> CudaArrayInterface for $ptr {
            fn cuda_array_interface(&self) -> Result<Descriptor> {
                shared_if($shared, (**self).cuda_array_interface())
            }
        }

        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl<T: ArrayInterface + ?Sized> ArrayInterface for $ptr {
            fn array_interface(&self) -> Result<Descriptor> {
                shared_if($shared, (**self).array_interface())
            }
        }
    )*};
}

// Unique ownership or a unique borrow exports as the pointee does; shared ones read-only.
forward!(&mut T => false, Box<T> => false, &T => true, Rc<T> => true, Arc<T> => true);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Element;

    /// A hand-written producer, as the derive will write them.
    struct Matrix {
        data: Vec<f64>,
        rows: usize,
        cols: usize,
    }

    impl ArrayInterface for Matrix {
        fn array_interface(&self) -> Result<Descriptor> {
            Ok(Descriptor::new::<f64>(self.data.as_ptr() as usize, [self.rows, self.cols]))
        }
    }

    #[test]
    fn producers_describe_themselves_through_pointers_too() {
        let m = Matrix { data: vec![0.0; 6], rows: 2, cols: 3 };
        let direct = m.array_interface().unwrap();
        assert_eq!(direct.shape, [2, 3]);
        assert_eq!(direct.typestr, f64::TYPESTR);
        assert_eq!(direct.data, m.data.as_ptr() as usize);
        fn describe(p: impl ArrayInterface) -> Descriptor {
            p.array_interface().unwrap()
        }
        let mut m = m;
        assert_eq!(describe(&mut m), direct);
        assert_eq!(describe(Box::new(&mut m)), direct);
        // Through a shared pointer, the same array, read-only: its other holders read it
        // as Rust memory nobody writes.
        let read_only = Descriptor { readonly: true, ..direct.clone() };
        assert_eq!(describe(&m), read_only);
        let shared: Arc<dyn ArrayInterface> = Arc::new(m);
        assert_eq!(shared.array_interface().unwrap(), read_only);
        assert_eq!(describe(&shared), read_only);
        assert_eq!(describe(Box::new(&shared)), read_only);
        assert_eq!(describe(Rc::new(Box::new(&shared))), read_only);
    }
}
