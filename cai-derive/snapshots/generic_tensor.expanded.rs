const _: () = {
    #[automatically_derived]
    impl<T: Element, S> ::renamed::CudaArrayInterface for Tensor<T, S>
    where
        CudaSlice<T>: ::renamed::DeviceBuffer,
        S: ::renamed::AsShape,
    {
        fn cuda_array_interface(&self) -> ::renamed::Result<::renamed::Descriptor> {
            {
                let _ = <CudaSlice<T> as ::renamed::DeviceBuffer>::len;
                let __cai_layout = ::renamed::__private::Layout {
                    shape: ::core::option::Option::Some(
                        <S as ::renamed::AsShape>::as_shape(&self.shape),
                    ),
                    strides: ::core::option::Option::None,
                    version: 3u32,
                    readonly: false,
                };
                ::renamed::__private::device_array::<
                    CudaSlice<T>,
                >(&self.buf, "buf", __cai_layout)
                    .and_then(|__cai_export| {
                        __cai_export
                            .mask(
                                <Mask as ::renamed::CudaArrayInterface>::cuda_array_interface(
                                    &self.mask,
                                ),
                            )
                    })
                    .and_then(::renamed::__private::Export::finish)
            }
        }
    }
    #[automatically_derived]
    impl<T: Element, S> ::renamed::NamedCudaArrays for Tensor<T, S>
    where
        CudaSlice<T>: ::renamed::DeviceBuffer,
        S: ::renamed::AsShape,
    {
        const NAMES: &'static [&'static str] = &[];
        fn cuda_array(
            &self,
            __cai_name: &::core::primitive::str,
        ) -> ::core::option::Option<::renamed::Result<::renamed::Descriptor>> {
            match __cai_name {
                _ => ::core::option::Option::None,
            }
        }
    }
};
const _: () = {
    #[doc(hidden)]
    #[allow(dead_code, non_camel_case_types)]
    pub struct TensorCudaArrays {}
    #[automatically_derived]
    impl<T: Element, S> Tensor<T, S> {
        #[doc(hidden)]
        #[allow(dead_code, non_upper_case_globals)]
        pub(crate) const __cai_cuda_arrays: TensorCudaArrays = TensorCudaArrays {};
    }
};
