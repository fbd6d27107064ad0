//! Compile errors of the derives, each with its expected message and span.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
