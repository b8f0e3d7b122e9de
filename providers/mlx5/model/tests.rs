//! Tests of the device model itself (see mod.rs).
