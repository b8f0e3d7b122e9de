//! Address handles.
