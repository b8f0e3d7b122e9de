//! Address handles.


