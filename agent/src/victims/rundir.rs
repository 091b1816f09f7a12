//! The run's output directory, as seen from inside the victim: bodies that write result
//! files of their own (AOCS comparisons, task-set summaries) put them there.

use crate::record::jobs::JobLog;
use std::path::PathBuf;

pub fn of(log: &JobLog) -> Option<PathBuf> {
    Some(log.out_dir().to_path_buf()).filter(|p| !p.as_os_str().is_empty())
}
