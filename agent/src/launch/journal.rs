//! The change journal: every change the agent makes to the machine (a cgroup created, a
//! file written: cgroup limits, IRQ affinity, sysctls) is appended to
//! /run/xtalk/journal-<pid>.jsonl and fsynced *before* it is made, and undone in reverse
//! order when the run ends. A journal whose agent is dead is undone by the next agent that
//! starts (`xtalk-agent recover`, which `xtalk` calls too). /run is a tmpfs: after a reboot
//! there is nothing to undo, and nothing is left.

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const DIR: &str = "/run/xtalk";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Entry {
    /// A directory created (a cgroup): removed on undo, after ending what is left in it.
    Mkdir { path: String },
    /// A file written: `old` is written back on undo.
    Write { path: String, old: String, new: String },
}

pub struct Journal {
    path: PathBuf,
    file: File,
    entries: Vec<Entry>,
}

impl Journal {
    /// This agent's journal (created empty).
    pub fn open() -> Result<Journal, String> {
        fs::create_dir_all(DIR).map_err(|e| format!("{DIR}: {e}"))?;
        let path = PathBuf::from(format!("{DIR}/journal-{}.jsonl", std::process::id()));
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Journal { path, file, entries: Vec::new() })
    }

    fn append(&mut self, e: Entry) -> Result<(), String> {
        let mut line = serde_json::to_string(&e).unwrap();
        line.push('\n');
        self.file.write_all(line.as_bytes()).and_then(|_| self.file.sync_data()).map_err(|err| format!("journal: {err}"))?;
        self.entries.push(e);
        Ok(())
    }

    /// Create a directory, journalled first.
    pub fn mkdir(&mut self, path: &Path) -> Result<(), String> {
        self.append(Entry::Mkdir { path: path.to_string_lossy().into_owned() })?;
        fs::create_dir(path).map_err(|e| format!("mkdir {}: {e}", path.display()))
    }

    /// Write `value` to a kernel file, journalling its previous content first.
    pub fn write(&mut self, path: &Path, value: &str) -> Result<(), String> {
        let old = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?.trim().to_string();
        self.append(Entry::Write { path: path.to_string_lossy().into_owned(), old, new: value.to_string() })?;
        fs::write(path, value).map_err(|e| format!("write {} = {value}: {e}", path.display()))
    }

    /// Undo everything, newest first; the journal file goes when all is undone.
    pub fn undo(&mut self) -> Vec<String> {
        let errors = undo_entries(&self.entries);
        if errors.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        self.entries.clear();
        errors
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if !self.entries.is_empty() {
            self.undo();
        }
    }
}

/// End the processes a dead run left in a cgroup (thawing it first), so it can be removed.
fn empty_cgroup(dir: &Path) {
    let freezer = dir.join("freezer.state");
    if freezer.exists() {
        let _ = fs::write(&freezer, "THAWED");
    }
    if dir.join("cgroup.freeze").exists() {
        let _ = fs::write(dir.join("cgroup.freeze"), "0");
    }
    for _ in 0..50 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        if pids.is_empty() {
            return;
        }
        for p in pids {
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn undo_entries(entries: &[Entry]) -> Vec<String> {
    let mut errors = Vec::new();
    for e in entries.iter().rev() {
        match e {
            Entry::Mkdir { path } => {
                let p = Path::new(path);
                if !p.exists() {
                    continue;
                }
                empty_cgroup(p);
                // A cgroup lingers briefly while its last tasks are reaped.
                let mut last = None;
                for _ in 0..100 {
                    match fs::remove_dir(p) {
                        Ok(()) => {
                            last = None;
                            break;
                        }
                        Err(err) => last = Some(err),
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                if let Some(err) = last {
                    errors.push(format!("rmdir {path}: {err}"));
                }
            }
            Entry::Write { path, old, .. } => {
                // Journalled before the write, which may then have failed: already as found.
                if fs::read_to_string(path).map(|v| v.trim() == old.trim()).unwrap_or(false) {
                    continue;
                }
                if let Err(err) = fs::write(path, old) {
                    // A cgroup file vanishes with its cgroup: nothing to restore.
                    if Path::new(path).exists() {
                        errors.push(format!("restore {path} = {old}: {err}"));
                    }
                }
            }
        }
    }
    errors
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Undo the journals of agents that are no longer running. Returns what was restored.
pub fn recover() -> Vec<String> {
    let mut done = Vec::new();
    let Ok(dir) = fs::read_dir(DIR) else { return done };
    for f in dir.flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("journal-").and_then(|s| s.strip_suffix(".jsonl")).and_then(|s| s.parse::<i32>().ok()) else { continue };
        if alive(pid) && pid != std::process::id() as i32 {
            continue;
        }
        let text = fs::read_to_string(f.path()).unwrap_or_default();
        // A torn last line (killed mid-append) was never acted upon: skip it.
        let entries: Vec<Entry> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let errors = undo_entries(&entries);
        if errors.is_empty() {
            let _ = fs::remove_file(f.path());
        }
        done.push(format!("journal of agent {pid}: {} change(s) undone{}", entries.len(),
            if errors.is_empty() { String::new() } else { format!(", {} failed: {}", errors.len(), errors.join("; ")) }));
    }
    done
}
