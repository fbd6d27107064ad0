//! The workspace's test suite lives in `tests/`; this library is empty.
