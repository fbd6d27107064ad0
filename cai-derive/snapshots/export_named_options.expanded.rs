#[pymethods]
impl Cloud {
    #[getter(xyz)]
    fn __cai_cuda_array_xyz<'py>(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.0)(__cai_slf, "xyz")
    }
}
impl Cloud {
    #[doc(hidden)]
    #[allow(clippy::type_complexity, clippy::redundant_closure)]
    const __CAI_PY_EXPORT: (
        for<'py> fn(
            &::cai_py::__private::pyo3::Bound<'py, Self>,
            &::core::primitive::str,
        ) -> ::cai_py::__private::pyo3::PyResult<
            ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
    ) = {
        #[allow(dead_code, non_camel_case_types)]
        struct __CaiRequestedCudaArrays {
            xyz: &'static ::core::primitive::str,
        }
        #[allow(non_upper_case_globals)]
        trait __CaiNotDerivedCuda {
            const __cai_cuda_arrays: __CaiRequestedCudaArrays = __CaiRequestedCudaArrays {
                xyz: "xyz",
            };
        }
        impl<T: ?::core::marker::Sized> __CaiNotDerivedCuda for T {}
        let _ = Self::__cai_cuda_arrays.xyz;
        if !::cai_py::__private::has_name(
            <Self as ::cai_py::__private::NamedCudaArrays>::NAMES,
            "xyz",
        ) {
            ::core::panic!(
                "{}",
                "#[cai_py::export]: `xyz` is not an array of `Cloud`: its `NamedCudaArrays::NAMES` does not list it"
            )
        }
        (
            |__cai_slf, __cai_name| ::cai_py::__private::cuda_named(
                __cai_slf,
                __cai_name,
                |__cai_this: &Self| __cai_this.export,
            ),
        )
    };
}
const _: () = {
    let _ = <Cloud>::__CAI_PY_EXPORT;
};
