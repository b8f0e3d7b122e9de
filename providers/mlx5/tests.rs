//! Unit tests of the mlx5 data path (placeholder).
