#[pymethods]
impl Cloud {
    fn count(&self) -> usize {
        0
    }
    #[getter(__cuda_array_interface__)]
    fn __cai_cuda_array_interface<'py>(
        slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::types::PyDict>,
    > {
        (Self::__CAI_PY_EXPORT.0)(slf)
    }
    #[pyo3(
        signature = (
            *,
            stream = ::core::option::Option::None,
            max_version = ::core::option::Option::None,
            dl_device = ::core::option::Option::None,
            copy = ::core::option::Option::None,
        )
    )]
    fn __dlpack__<'py>(
        slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
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
        (Self::__CAI_PY_EXPORT.1)(slf, stream, max_version, dl_device, copy)
    }
    fn __dlpack_device__(
        slf: &::cai_py::__private::pyo3::Bound<'_, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<(i32, i32)> {
        (Self::__CAI_PY_EXPORT.2)(slf)
    }
    #[getter(xyz)]
    fn __cai_cuda_array_xyz<'py>(
        slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.3)(slf, "xyz")
    }
    #[getter(rgb)]
    fn __cai_cuda_array_rgb<'py>(
        slf: &::cai_py::__private::pyo3::Bound<'py, Self>,
    ) -> ::cai_py::__private::pyo3::PyResult<
        ::cai_py::__private::pyo3::Bound<'py, ::cai_py::__private::pyo3::PyAny>,
    > {
        (Self::__CAI_PY_EXPORT.3)(slf, "rgb")
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
            |slf| ::cai_py::__private::cuda_interface_with(
                slf,
                |this: &Self| this.export,
            ),
            |slf, stream, max_version, dl_device, copy| {
                ::cai_py::__private::cuda_dlpack(
                    slf,
                    |this: &Self| this.export,
                    stream,
                    max_version,
                    dl_device,
                    copy,
                )
            },
            |slf| ::cai_py::__private::cuda_dlpack_device(slf),
            |slf, name| ::cai_py::__private::cuda_named(
                slf,
                name,
                |this: &Self| this.export,
            ),
        )
    };
}
const _: () = {
    let _ = <Cloud>::__CAI_PY_EXPORT;
};
