//! Golden tests against mlx5dv.h (placeholder: being written).
