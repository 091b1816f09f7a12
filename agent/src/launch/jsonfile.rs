//! JSON files of a run (run.json, taskset.json, aocs.json, the journal's marks), written
//! whole or not at all: the run directory may be read at any moment, and may belong to
//! someone else.

use crate::safefs;
use serde::Serialize;
use std::path::Path;

/// Write `v` as JSON to `path` atomically: a fresh temporary file (O_EXCL|O_NOFOLLOW, so a
/// planted link or file is refused), fsync, rename; no component of `path` is followed as a
/// symlink (safefs::replace).
pub fn write_atomic<T: Serialize + ?Sized>(path: &Path, v: &T) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    safefs::replace(path, text.as_bytes())
}
