//! The producer traits: what a container implements to be exported.

use std::rc::Rc;
use std::sync::Arc;

use crate::descriptor::Descriptor;
use crate::error::Result;

/// A container of device memory that can describe itself through the CUDA Array
/// Interface (`__cuda_array_interface__`).
///
/// `#[derive(CudaArrayInterface)]` (feature `derive`) implements it for structs that hold
/// device buffers; the Python layer turns the descriptor into the interface dict.
///
/// The descriptor is read afresh on every access: the pointer may change after a
/// reallocation and the stream after new work, so implementations must not cache it.
pub trait CudaArrayInterface {
    /// Describes the array as it is now.
    fn cuda_array_interface(&self) -> Result<Descriptor>;
}

/// A container of host memory that can describe itself through NumPy's
/// `__array_interface__`: the same dict without a stream.
///
/// It lets every exchange be tested against NumPy on machines without a GPU, and lets a
/// host container reach NumPy without a copy.
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

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<T: CudaArrayInterface + ?Sized> CudaArrayInterface for $ptr {
            fn cuda_array_interface(&self) -> Result<Descriptor> {
                (**self).cuda_array_interface()
            }
        }

        impl<T: ArrayInterface + ?Sized> ArrayInterface for $ptr {
            fn array_interface(&self) -> Result<Descriptor> {
                (**self).array_interface()
            }
        }
    )*};
}

forward!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

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
        let shared: Arc<dyn ArrayInterface> = Arc::new(m);
        assert_eq!(shared.array_interface().unwrap(), direct);
        fn describe(p: impl ArrayInterface) -> Descriptor {
            p.array_interface().unwrap()
        }
        assert_eq!(describe(&shared), direct);
        assert_eq!(describe(Box::new(&shared)), direct);
    }
}
