//! Compile errors of the derives and of `#[cai_py::export]`, each with its expected
//! message and span.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
