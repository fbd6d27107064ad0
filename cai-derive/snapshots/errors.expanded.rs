::core::compile_error! {
    "a field has one role: this one is already `data`"
}
::core::compile_error! {
    "version = 9 is not a CUDA Array Interface version; use 0, 1, 2 or 3"
}
const _: () = {
    #[automatically_derived]
    impl ::cai_core::ArrayInterface for Bad {
        fn array_interface(&self) -> ::cai_core::Result<::cai_core::Descriptor> {
            ::core::unreachable!()
        }
    }
};
