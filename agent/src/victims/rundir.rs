//! The run's output directory, as seen from inside the victim: the directory of the
//! `jobs.bin` the agent mapped before fork (found in /proc/self/maps by its address), so
//! bodies that write their own result files need no extra plumbing through launch/.

use crate::record::jobs::JobLog;
use std::path::PathBuf;

pub fn of(log: &JobLog) -> Option<PathBuf> {
    let base = log.header() as *const _ as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let prefix = format!("{base:x}-");
    let line = maps.lines().find(|l| l.starts_with(&prefix))?;
    // Fields: range perms offset dev inode path; the path is everything after the fifth space.
    let path = line.splitn(6, ' ').nth(5)?.trim_start();
    PathBuf::from(path.strip_suffix(" (deleted)").unwrap_or(path)).parent().map(|p| p.to_path_buf())
}
