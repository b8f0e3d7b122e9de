//! The exported functions uverbs cannot do yet: each fails with EOPNOTSUPP in its function's convention.
