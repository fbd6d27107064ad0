#[pymethods]
impl Cloud {
    fn count(&self) -> usize {
        0
    }
    #[getter(__cuda_array_interface__)]
    fn __cai_cuda_array_interface<'py>(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::types::PyDict>,
    > {
        (Self::__CAI_PY_EXPORT.0)(__cai_slf)
    }
    #[pyo3(
        signature = (
            *,
            stream = ::core::option::Option::None,
            max_version = ::core::option::Option::None,
            dl_device = ::core::option::Option::None,
            copy = ::core::option::Option::None,
        ),
        text_signature = "($self, *, stream=None, max_version=None, dl_device=None, copy=None)",
    )]
    fn __dlpack__<'py>(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
        stream: ::core::option::Option<
            &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
        max_version: ::core::option::Option<
            &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
        dl_device: ::core::option::Option<
            &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
        copy: ::core::option::Option<
            &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.1)(__cai_slf, stream, max_version, dl_device, copy)
    }
    fn __dlpack_device__(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'_, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<(i32, i32)> {
        (Self::__CAI_PY_EXPORT.2)(__cai_slf)
    }
    #[getter(xyz)]
    fn __cai_cuda_array_xyz<'py>(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.3)(__cai_slf, "xyz")
    }
    #[getter(rgb)]
    fn __cai_cuda_array_rgb<'py>(
        __cai_slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.3)(__cai_slf, "rgb")
    }
}
impl Cloud {
    #[doc(hidden)]
    #[allow(clippy::type_complexity, clippy::redundant_closure)]
    const __CAI_PY_EXPORT: (
        for<'py> fn(
            &::cai_py::__private::pyo3::Bound<'py, Self>,
        ) -> ::cai_py::__private::pyo3::PyResult<
            ::cai_py::__private::pyo3::Bound<
                'py,
                ::cai_py::__private::pyo3::types::PyDict,
            >,
        >,
        for<'py> fn(
            &::cai_py::__private::pyo3::Bound<'py, Self>,
            ::core::option::Option<
                &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
            >,
            ::core::option::Option<
                &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
            >,
            ::core::option::Option<
                &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
            >,
            ::core::option::Option<
                &::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
            >,
        ) -> ::cai_py::__private::pyo3::PyResult<
            ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
        >,
        for<'py> fn(
            &::cai_py::__private::pyo3::Bound<'py, Self>,
        ) -> ::cai_py::__private::pyo3::PyResult<(i32, i32)>,
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
            rgb: &'static ::core::primitive::str,
        }
        #[allow(non_upper_case_globals)]
        trait __CaiNotDerivedCuda {
            const __cai_cuda_arrays: __CaiRequestedCudaArrays = __CaiRequestedCudaArrays {
                xyz: "xyz",
                rgb: "rgb",
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
        let _ = Self::__cai_cuda_arrays.rgb;
        if !::cai_py::__private::has_name(
            <Self as ::cai_py::__private::NamedCudaArrays>::NAMES,
            "rgb",
        ) {
            ::core::panic!(
                "{}",
                "#[cai_py::export]: `rgb` is not an array of `Cloud`: its `NamedCudaArrays::NAMES` does not list it"
            )
        }
        (
            |__cai_slf| ::cai_py::__private::cuda_interface_with(
                __cai_slf,
                |__cai_this: &Self| __cai_this.export,
            ),
            |__cai_slf, stream, max_version, dl_device, copy| {
                ::cai_py::__private::cuda_dlpack(
                    __cai_slf,
                    |__cai_this: &Self| __cai_this.export,
                    stream,
                    max_version,
                    dl_device,
                    copy,
                )
            },
            |__cai_slf| ::cai_py::__private::cuda_dlpack_device(__cai_slf),
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
