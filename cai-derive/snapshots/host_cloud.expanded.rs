const _: () = {
    #[automatically_derived]
    impl ::cai_core::ArrayInterface for Cloud {
        fn array_interface(&self) -> ::cai_core::Result<::cai_core::Descriptor> {
            {
                let _ = <Vec<f32> as ::cai_core::HostBuffer>::len;
                let __cai_layout = ::cai_core::__private::Layout {
                    shape: ::core::option::Option::Some(
                        ::cai_core::AsShape::as_shape(&([self.n, 3])),
                    ),
                    strides: ::core::option::Option::None,
                    version: 2u32,
                    readonly: true,
                };
                ::cai_core::__private::host_array::<
                    Vec<f32>,
                >(&self.xyz, "xyz", __cai_layout)
                    .and_then(::cai_core::__private::Export::finish)
            }
        }
    }
    #[automatically_derived]
    impl ::cai_core::NamedArrays for Cloud {
        const NAMES: &'static [&'static str] = &["rgb", "normals"];
        fn array(
            &self,
            __cai_name: &::core::primitive::str,
        ) -> ::core::option::Option<::cai_core::Result<::cai_core::Descriptor>> {
            match __cai_name {
                "rgb" => {
                    ::core::option::Option::Some({
                        let _ = <Vec<u8> as ::cai_core::HostBuffer>::len;
                        let __cai_layout = ::cai_core::__private::Layout {
                            shape: ::core::option::Option::None,
                            strides: ::core::option::Option::Some(
                                <[isize; 1] as ::cai_core::AsStrides>::as_strides(
                                    &self.rgb_strides,
                                ),
                            ),
                            version: 2u32,
                            readonly: true,
                        };
                        ::cai_core::__private::host_array::<
                            Vec<u8>,
                        >(&self.rgb, "rgb", __cai_layout)
                            .and_then(::cai_core::__private::Export::finish)
                    })
                }
                "normals" => {
                    ::core::option::Option::Some(
                        ::cai_core::__private::read_only(
                            <Normals as ::cai_core::ArrayInterface>::array_interface(
                                &self.normals,
                            ),
                        ),
                    )
                }
                _ => ::core::option::Option::None,
            }
        }
    }
};
const _: () = {
    #[doc(hidden)]
    #[allow(dead_code, non_camel_case_types)]
    pub struct CloudHostArrays {
        pub rgb: &'static ::core::primitive::str,
        pub normals: &'static ::core::primitive::str,
    }
    #[automatically_derived]
    impl Cloud {
        #[doc(hidden)]
        #[allow(dead_code, non_upper_case_globals)]
        pub(crate) const __cai_host_arrays: CloudHostArrays = CloudHostArrays {
            rgb: "rgb",
            normals: "normals",
        };
    }
};
