//! Sets `cfg(cai_cuda_driver)` when a CUDA driver library can be found, so GPU tests run
//! where one is and show as ignored, with the reason, where none is. `CAI_GPU_TESTS=1`
//! or `=0` overrides the search.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cai_cuda_driver)");
    println!("cargo::rerun-if-env-changed=CAI_GPU_TESTS");
    println!("cargo::rerun-if-env-changed=LD_LIBRARY_PATH");
    let found = match std::env::var("CAI_GPU_TESTS").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => driver_library_exists(),
    };
    if found {
        println!("cargo::rustc-cfg=cai_cuda_driver");
    }
}

fn driver_library_exists() -> bool {
    let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let dirs = from_env.split(':').filter(|d| !d.is_empty()).map(str::to_owned).chain(
        ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/cuda/lib64/stubs/..", "/usr/lib/wsl/lib"]
            .map(str::to_owned),
    );
    dirs.into_iter()
        .any(|d| ["libcuda.so.1", "libcuda.so", "nvcuda.dll"].iter().any(|f| Path::new(&d).join(f).exists()))
}
