const _: () = {
    #[automatically_derived]
    unsafe impl ::cai_core::Element for Particle {
        const TYPESTR: ::cai_core::TypeStr = ::cai_core::TypeStr::void(
            ::core::mem::size_of::<Self>(),
        );
        fn descr() -> ::cai_core::Descr {
            ::cai_core::__private::record(
                ::core::mem::size_of::<Self>(),
                &[
                    (
                        "id",
                        ::core::mem::offset_of!(Self, id),
                        <u8 as ::cai_core::__private::RecordField>::describe(),
                    ),
                    (
                        "position",
                        ::core::mem::offset_of!(Self, position),
                        <[f32; 3] as ::cai_core::__private::RecordField>::describe(),
                    ),
                    (
                        "mass",
                        ::core::mem::offset_of!(Self, mass),
                        <f64 as ::cai_core::__private::RecordField>::describe(),
                    ),
                ],
            )
        }
    }
};
