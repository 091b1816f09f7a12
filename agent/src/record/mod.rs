//! Records of the measured window: fixed-size rows in file-backed shared mappings, so that
//! whatever was recorded survives the death of the victim or of the agent itself.
pub mod counters;
pub mod jobs;
pub mod mapped;
pub mod probes;
