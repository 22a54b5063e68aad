#![no_std]
#![forbid(unsafe_code)]
pub mod generated {
    pub mod mlx5;
}
