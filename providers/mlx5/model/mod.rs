//! A software ConnectX for tests (placeholder: being written).
