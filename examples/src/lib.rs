//! Examples live in `examples/`; this library is empty.
