//! Job records: fixed-size rows in a file-backed shared mapping, so that whatever was
//! recorded survives the death of the victim or of the agent itself.
pub mod jobs;
