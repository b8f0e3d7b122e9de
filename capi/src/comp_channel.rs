//! Completion channels and completion events.


