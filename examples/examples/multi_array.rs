//! `cargo run --example multi_array`: a point cloud exporting three named arrays.
//!
//! Fields marked `array = "name"` make up the array `name`; a field marked `#[cai(array)]`
//! is an array of its own (its type implements the trait). The derive lists them, by
//! name, through `NamedArrays` (`NamedCudaArrays` on the device), and the Python layer
//! gives each a property. With cudarc's `CudaSlice` in place of `Vec`, and
//! `#[derive(CudaArrayInterface)]` on each struct (`Normals` too), the struct is the same.

use cai_core::{ArrayInterface, Error, NamedArrays};

/// Per-point normals, an array type of its own.
#[derive(ArrayInterface)]
#[cai(shape = [self.0.len() / 3, 3])]
struct Normals(#[cai(data)] Vec<f32>);

#[derive(ArrayInterface)]
struct PointCloud {
    #[cai(data, array = "xyz")]
    xyz: Vec<f32>,
    #[cai(shape, array = "xyz")]
    xyz_shape: [usize; 2],
    #[cai(data, array = "rgb")]
    rgb: Vec<u8>,
    #[cai(shape, array = "rgb")]
    rgb_shape: [usize; 2],
    #[cai(array)]
    normals: Normals,
}

fn main() -> Result<(), Error> {
    let n = 1000;
    let cloud = PointCloud {
        xyz: vec![0.0; 3 * n],
        xyz_shape: [n, 3],
        rgb: vec![255; 3 * n],
        rgb_shape: [n, 3],
        normals: Normals(vec![0.0; 3 * n]),
    };
    println!("arrays: {:?}", PointCloud::NAMES);
    for (name, descriptor) in cloud.arrays() {
        println!("{name:>8}: {}", descriptor?);
    }
    Ok(())
}
