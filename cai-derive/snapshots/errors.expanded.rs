::core::compile_error! {
    "a field has one role: this one is already `data`"
}
const _: () = {
    #[automatically_derived]
    impl ::cai_core::ArrayInterface for Bad {
        fn array_interface(&self) -> ::cai_core::Result<::cai_core::Descriptor> {
            ::core::unreachable!()
        }
    }
    #[automatically_derived]
    impl ::cai_core::NamedArrays for Bad {
        const NAMES: &'static [&'static str] = &[];
        fn array(
            &self,
            _: &::core::primitive::str,
        ) -> ::core::option::Option<::cai_core::Result<::cai_core::Descriptor>> {
            ::core::unreachable!()
        }
    }
};
const _: () = {
    #[doc(hidden)]
    #[allow(dead_code, non_camel_case_types)]
    pub struct BadHostArrays {}
    #[automatically_derived]
    impl Bad {
        #[doc(hidden)]
        #[allow(dead_code, non_upper_case_globals)]
        pub(crate) const __cai_host_arrays: BadHostArrays = BadHostArrays {};
    }
};
