//! Compile errors of the derives and of `#[cai_py::export]`, each with its expected
//! message and span.

use std::io::IsTerminal as _;

#[test]
fn ui() {
    // trybuild colours its report (through termcolor) whenever TERM is set and not "dumb"
    // and NO_COLOR is unset; it does not look for a terminal. A log (CI, `| tee`) gets
    // plain text. This binary has this one test, so nothing reads the environment meanwhile.
    if !std::io::stderr().is_terminal() {
        std::env::set_var("NO_COLOR", "1");
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
