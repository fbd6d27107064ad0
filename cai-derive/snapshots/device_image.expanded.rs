const _: () = {
    #[automatically_derived]
    impl ::cai_core::CudaArrayInterface for Image {
        fn cuda_array_interface(&self) -> ::cai_core::Result<::cai_core::Descriptor> {
            {
                let _ = <CudaSlice<f32> as ::cai_core::DeviceBuffer>::len;
                let __cai_layout = ::cai_core::__private::Layout {
                    shape: ::core::option::Option::Some(
                        <[usize; 2] as ::cai_core::AsShape>::as_shape(&self.shape),
                    ),
                    strides: ::core::option::Option::None,
                    version: 3u32,
                    readonly: false,
                };
                ::cai_core::__private::device_array::<
                    CudaSlice<f32>,
                >(&self.pixels, "pixels", __cai_layout)
                    .and_then(|__cai_export| {
                        __cai_export
                            .stream_for(
                                &self.pixels,
                                <Arc<
                                    CudaStream,
                                > as ::cai_core::AsStream>::as_stream(&self.stream),
                            )
                    })
                    .and_then(::cai_core::__private::Export::finish)
            }
        }
    }
    #[automatically_derived]
    impl ::cai_core::NamedCudaArrays for Image {
        const NAMES: &'static [&'static str] = &[];
        fn cuda_array(
            &self,
            __cai_name: &::core::primitive::str,
        ) -> ::core::option::Option<::cai_core::Result<::cai_core::Descriptor>> {
            match __cai_name {
                _ => ::core::option::Option::None,
            }
        }
    }
};
const _: () = {
    #[doc(hidden)]
    #[allow(dead_code, non_camel_case_types)]
    pub struct ImageCudaArrays {}
    #[automatically_derived]
    impl Image {
        #[doc(hidden)]
        #[allow(dead_code, non_upper_case_globals)]
        pub(crate) const __cai_cuda_arrays: ImageCudaArrays = ImageCudaArrays {};
    }
};
