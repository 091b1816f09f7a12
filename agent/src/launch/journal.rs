//! The change journal: every change the agent makes to the machine (a cgroup created, a
//! private directory made, a kernel file written: cgroup limits, IRQ affinity) is appended
//! to /run/xtalk/journal-p<pid>.jsonl (verified directory, file created O_EXCL|O_NOFOLLOW)
//! and fsynced *before* it is made, and undone in reverse order when the run ends. A journal
//! whose agent is dead is undone by the next agent that starts (`xtalk-agent recover`, which
//! `xtalk` calls too). /run is a tmpfs: after a reboot there is nothing to undo.
//!
//! Undo trusts nothing it finds: a cgroup only if it is a real directory on a cgroup file
//! system, a private directory only if still ours and mode 0700, a value written back only
//! into a kernel file and never through a symlink. What cannot be undone safely is dropped
//! with a line saying why, so that no journal is retried at every start forever.

use crate::safefs::{self, Dir};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::Path;

pub const DIR: &str = crate::safefs::AGENT_DIR;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Entry {
    /// A cgroup, journalled before mkdir: on undo, what is left in it is killed and it is
    /// removed, only if it is a real directory on a cgroup file system.
    Cgroup { path: String },
    /// A private directory the agent made (mode 0700: staging, scratch files): on undo its
    /// files and itself are removed, only if it is still a private directory of this user.
    Private { path: String },
    /// The directory of an earlier entry was not created (mkdir failed): nothing to undo.
    Abandon { path: String },
    /// A kernel file written: `old` is written back on undo (never through a symlink, and
    /// only on a kernel file system).
    Write { path: String, old: String, new: String },
    /// A record file staged on tmpfs: moved to `dest` on undo (launch/staging.rs).
    Stage { tmp: String, dest: String },
    /// Journals of earlier agents: a directory, a cgroup or the staging directory.
    Mkdir { path: String },
    /// The run's run.json: if its agent died with it still `running`, recovery marks it
    /// failed (the live agent writes the outcome itself, after its undo).
    Runjson { path: String },
}

/// What undoing one entry did: one line each for `recover` and run.json.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A change restored.
    Done(String),
    /// An entry that cannot be undone safely: dropped, with why.
    Refused(String),
    /// An undo that failed and may succeed later: the entry is kept.
    Failed(String),
}

impl Outcome {
    fn line(&self) -> String {
        match self {
            Outcome::Done(m) => m.clone(),
            Outcome::Refused(m) => format!("refused: {m}; entry dropped"),
            Outcome::Failed(m) => format!("failed: {m}; kept for the next recovery"),
        }
    }
}

pub struct Journal {
    dir: Dir,
    name: String,
    file: File,
    entries: Vec<Entry>,
}

impl Journal {
    /// This agent's journal (created empty, O_EXCL, in the verified /run/xtalk).
    pub fn open() -> Result<Journal, String> {
        let dir = safefs::own_dir(Path::new(DIR))?;
        let name = format!("journal-p{}.jsonl", std::process::id());
        let file = dir.create(&name, 0o600).map_err(|e| format!("{DIR}/{name}: {e}"))?;
        Ok(Journal { dir, name, file, entries: Vec::new() })
    }

    fn append(&mut self, e: Entry) -> Result<(), String> {
        let mut line = serde_json::to_string(&e).unwrap();
        line.push('\n');
        self.file.write_all(line.as_bytes()).and_then(|_| self.file.sync_data()).map_err(|err| format!("journal: {err}"))?;
        self.entries.push(e);
        Ok(())
    }

    /// Create a cgroup directory, journalled first (an agent killed between the two leaves
    /// an entry whose directory may not exist: undo checks). A failed mkdir is journalled
    /// as abandoned, so that undo never touches a directory this agent did not create.
    pub fn cgroup(&mut self, path: &Path) -> Result<(), String> {
        let p = path.to_string_lossy().into_owned();
        self.append(Entry::Cgroup { path: p.clone() })?;
        if let Err(e) = std::fs::create_dir(path) {
            self.append(Entry::Abandon { path: p })?;
            return Err(format!("mkdir {}: {e}", path.display()));
        }
        Ok(())
    }

    /// Create a private directory (mode 0700, verified), journalled first as for a cgroup.
    pub fn private(&mut self, path: &Path) -> Result<Dir, String> {
        let p = path.to_string_lossy().into_owned();
        self.append(Entry::Private { path: p.clone() })?;
        safefs::create_private(path).map_err(|e| {
            let _ = self.append(Entry::Abandon { path: p });
            e
        })
    }

    /// Write `value` to a kernel file, journalling its previous content first.
    pub fn write(&mut self, path: &Path, value: &str) -> Result<(), String> {
        let old = safefs::read_nofollow(path).map_err(|e| format!("{}: {e}", path.display()))?.trim().to_string();
        self.append(Entry::Write { path: path.to_string_lossy().into_owned(), old, new: value.to_string() })?;
        safefs::write_kernel_file(path, value).map_err(|e| format!("write {} = {value}: {e}", path.display()))
    }

    /// Note the run's run.json, written `running` (see `Entry::Runjson`).
    pub fn run_json(&mut self, path: &Path) -> Result<(), String> {
        self.append(Entry::Runjson { path: path.to_string_lossy().into_owned() })
    }

    /// Note a staged file before it is created.
    pub fn stage(&mut self, tmp: &Path, dest: &Path) -> Result<(), String> {
        self.append(Entry::Stage { tmp: tmp.to_string_lossy().into_owned(), dest: dest.to_string_lossy().into_owned() })
    }

    /// Undo everything, newest first; the journal file goes unless an undo failed (then it
    /// keeps what failed, for the next recovery). Returns what did not go as planned.
    pub fn undo(&mut self) -> Vec<String> {
        let outcomes = undo_entries(&self.entries, None);
        settle(&self.dir, &self.name, &self.entries, &outcomes);
        self.entries.clear();
        outcomes.iter().filter(|(_, o)| !matches!(o, Outcome::Done(_))).map(|(_, o)| o.line()).collect()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if !self.entries.is_empty() {
            self.undo();
        }
    }
}

/// After an undo: remove the journal, or rewrite it with only the entries that failed
/// (refused ones are dropped: a journal that cannot be undone safely is never retried
/// forever).
fn settle(dir: &Dir, name: &str, entries: &[Entry], outcomes: &[(usize, Outcome)]) {
    let failed: Vec<&Entry> = outcomes.iter().filter(|(_, o)| matches!(o, Outcome::Failed(_))).map(|(i, _)| &entries[*i]).collect();
    if failed.is_empty() {
        let _ = dir.unlink(name);
        return;
    }
    let tmp = format!("{name}.tmp");
    let _ = dir.unlink(&tmp);
    let keep: Vec<&Entry> = entries.iter().filter(|e| failed.contains(e)).collect();
    let text: String = keep.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
    if let Ok(mut f) = dir.create(&tmp, 0o600) {
        if f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).is_ok() {
            let _ = std::fs::rename(dir.path.join(&tmp), dir.path.join(name));
        }
    }
}

/// Undo a cgroup: only a real directory on a cgroup file system; what is left in it is
/// killed (freeze, kill, thaw), then it is removed.
fn undo_cgroup(path: &str, out: &mut Vec<Outcome>) {
    let p = Path::new(path);
    if p.symlink_metadata().is_err() {
        return; // never created, or removed already
    }
    if let Err(why) = safefs::is_cgroup_dir(p) {
        out.push(Outcome::Refused(format!("left {path} alone: {why}")));
        return;
    }
    match super::contain::kill_all(p, 5_000_000_000) {
        Ok(killed) if !killed.is_empty() => out.push(Outcome::Done(format!("killed {} process(es) left in {path}: {}", killed.len(), killed.join(", ")))),
        Ok(_) => {}
        Err(e) => {
            out.push(Outcome::Failed(e));
            return;
        }
    }
    // A cgroup lingers briefly while its last tasks are reaped.
    let mut last = None;
    for _ in 0..100 {
        match std::fs::remove_dir(p) {
            Ok(()) => {
                out.push(Outcome::Done(format!("removed cgroup {path}")));
                return;
            }
            Err(err) => last = Some(err),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    out.push(Outcome::Failed(format!("rmdir {path}: {}", last.unwrap())));
}

/// Undo a private directory: its files and itself, only if it is still private to us.
fn undo_private(path: &str, out: &mut Vec<Outcome>) {
    let p = Path::new(path);
    if p.symlink_metadata().is_err() {
        return;
    }
    let dir = match safefs::open_verified(p, true) {
        Ok(d) => d,
        Err(why) => return out.push(Outcome::Refused(format!("left {path} alone: {why}"))),
    };
    let names = dir.names().unwrap_or_default();
    for n in &names {
        if let Err(e) = dir.unlink(n) {
            return out.push(Outcome::Failed(format!("{path}/{n}: {e}")));
        }
    }
    match std::fs::remove_dir(p) {
        Ok(()) => out.push(Outcome::Done(format!("removed private directory {path}{}", if names.is_empty() { String::new() } else { format!(" ({} file(s) in it)", names.len()) }))),
        Err(e) => out.push(Outcome::Failed(format!("rmdir {path}: {e}"))),
    }
}

/// Undo a write: the old value back, only into a kernel file, never through a symlink.
fn undo_write(path: &str, old: &str, out: &mut Vec<Outcome>) {
    let p = Path::new(path);
    // Journalled before the write, which may then have failed: already as found.
    match safefs::read_nofollow(p) {
        Ok(v) if v.trim() == old.trim() => return,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return, // a cgroup file gone with its cgroup
        _ => {}
    }
    match safefs::write_kernel_file(p, old) {
        Ok(()) => out.push(Outcome::Done(format!("restored {path} = {old}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::ELOOP) => {
            out.push(Outcome::Refused(format!("did not write {path}: {e}")))
        }
        Err(e) => out.push(Outcome::Failed(format!("restore {path} = {old}: {e}"))),
    }
}

/// A directory journalled by an earlier agent (cgroup or staging directory): a cgroup is
/// undone as one; anything else is only removed if it is an empty directory of ours.
fn undo_legacy_dir(path: &str, out: &mut Vec<Outcome>) {
    let p = Path::new(path);
    if p.symlink_metadata().is_err() {
        return;
    }
    if safefs::is_cgroup_dir(p).is_ok() {
        return undo_cgroup(path, out);
    }
    match safefs::open_verified(p, false) {
        Ok(_) => match std::fs::remove_dir(p) {
            Ok(()) => out.push(Outcome::Done(format!("removed directory {path}"))),
            Err(e) => out.push(Outcome::Refused(format!("left {path} alone: {e}"))),
        },
        Err(why) => out.push(Outcome::Refused(format!("left {path} alone: {why}"))),
    }
}

/// A dead agent's run.json still `running`: mark the run failed, say why.
fn undo_run_json(path: &str, pid: i32, out: &mut Vec<Outcome>) {
    let p = Path::new(path);
    let Ok(text) = safefs::read_nofollow(p) else { return };
    let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(&text) else { return };
    if doc["status"] != "running" {
        return;
    }
    doc["status"] = serde_json::json!("failed");
    doc["reason"] = serde_json::json!(format!("the agent (pid {pid}) died before the run ended (killed by SIGKILL?); its changes were undone by recovery"));
    match super::jsonfile::write_atomic(p, &doc) {
        Ok(()) => out.push(Outcome::Done(format!("marked {path} failed (was running)"))),
        Err(e) => out.push(Outcome::Refused(format!("did not update {path}: {e}"))),
    }
}

/// Undo `entries` newest first (`dead`: of a dead agent, by recovery); each outcome with
/// the index of its entry.
fn undo_entries(entries: &[Entry], dead: Option<i32>) -> Vec<(usize, Outcome)> {
    let abandoned: Vec<&String> = entries.iter().filter_map(|e| if let Entry::Abandon { path } = e { Some(path) } else { None }).collect();
    // A setting of a cgroup the journal also removes goes with it: nothing to write back.
    let cgroups: Vec<String> = entries.iter().filter_map(|e| match e {
        Entry::Cgroup { path } if !abandoned.contains(&path) => Some(format!("{path}/")),
        _ => None,
    }).collect();
    // Thaw every group first: a task frozen in a v1 freezer group dies of SIGKILL only once
    // thawed, and the kill may come through another hierarchy (v2 cgroup.kill).
    for c in &cgroups {
        if let Ok(d) = safefs::is_cgroup_dir(Path::new(c.trim_end_matches('/'))) {
            let _ = d.write("freezer.state", "THAWED");
            let _ = d.write("cgroup.freeze", "0");
        }
    }
    let mut all = Vec::new();
    for (i, e) in entries.iter().enumerate().rev() {
        let mut out = Vec::new();
        match e {
            Entry::Cgroup { path } | Entry::Private { path } | Entry::Mkdir { path } if abandoned.contains(&path) => {}
            Entry::Abandon { .. } => {}
            Entry::Cgroup { path } => undo_cgroup(path, &mut out),
            Entry::Private { path } => undo_private(path, &mut out),
            Entry::Mkdir { path } => undo_legacy_dir(path, &mut out),
            Entry::Stage { tmp, dest } => out.extend(super::staging::materialize(Path::new(tmp), Path::new(dest))),
            Entry::Write { path, .. } if cgroups.iter().any(|c| path.starts_with(c.as_str())) => {}
            Entry::Write { path, old, .. } => undo_write(path, old, &mut out),
            Entry::Runjson { path } => {
                if let Some(pid) = dead {
                    undo_run_json(path, pid, &mut out)
                }
            }
        }
        all.extend(out.into_iter().map(|o| (i, o)));
    }
    all
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Undo the journals of agents that are no longer running. Returns what was restored: one
/// line per change, "agent <pid>: <what>" (see docs/agent.md).
pub fn recover() -> Vec<String> {
    let mut done = Vec::new();
    if Path::new(DIR).symlink_metadata().is_err() {
        return done;
    }
    let dir = match safefs::open_verified(Path::new(DIR), false) {
        Ok(d) => d,
        Err(why) => return vec![format!("refused: {why}; nothing recovered")],
    };
    for name in dir.names().unwrap_or_default() {
        // journal-p<pid>.jsonl; journal-<pid>.jsonl from agents before private directories
        // (which skip the new name: they would drop the entries they do not know).
        let Some(pid) = name.strip_prefix("journal-").and_then(|s| s.strip_suffix(".jsonl")).and_then(|s| s.trim_start_matches('p').parse::<i32>().ok()) else { continue };
        if alive(pid) && pid != std::process::id() as i32 {
            continue;
        }
        let mut text = String::new();
        let readable = dir.open_file(&name, libc::O_RDONLY).and_then(|mut f| {
            let st = unsafe {
                let mut st: libc::stat = std::mem::zeroed();
                libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&f), &mut st);
                st
            };
            if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != unsafe { libc::geteuid() } {
                return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "not a regular file of this user"));
            }
            std::io::Read::read_to_string(&mut f, &mut text)
        });
        if let Err(e) = readable {
            done.push(format!("agent {pid}: refused: {DIR}/{name}: {e}; journal dropped"));
            let _ = dir.unlink(&name);
            continue;
        }
        // A torn last line (killed mid-append) was never acted upon: skip it.
        let entries: Vec<Entry> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let outcomes = undo_entries(&entries, Some(pid));
        settle(&dir, &name, &entries, &outcomes);
        done.extend(outcomes.iter().map(|(_, o)| format!("agent {pid}: {}", o.line())));
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A directory laid out as the issue's attacker does: freezer.state a symlink to a
    /// precious file, cgroup.procs listing a live process.
    fn trap(t: &Path) -> (PathBuf, PathBuf, std::process::Child) {
        let precious = t.join("precious");
        std::fs::write(&precious, "precious").unwrap();
        let d = t.join("xtalk-1234");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::symlink(&precious, d.join("freezer.state")).unwrap();
        std::os::unix::fs::symlink(&precious, d.join("cgroup.freeze")).unwrap();
        let decoy = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(d.join("cgroup.procs"), format!("{}\n", decoy.id())).unwrap();
        (d, precious, decoy)
    }

    fn alive(c: &mut std::process::Child) -> bool {
        c.try_wait().unwrap().is_none()
    }

    #[test]
    fn a_cgroup_entry_on_an_ordinary_directory_is_refused_and_touches_nothing() {
        let t = tempfile::tempdir().unwrap();
        let (d, precious, mut decoy) = trap(t.path());
        for e in [Entry::Cgroup { path: d.to_string_lossy().into() }, Entry::Mkdir { path: d.to_string_lossy().into() }] {
            let out = undo_entries(&[e], Some(1));
            assert!(matches!(&out[..], [(0, Outcome::Refused(_))]), "{out:?}");
        }
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious");
        assert!(alive(&mut decoy), "no process is killed from a directory that is not a cgroup");
        assert!(d.exists());
        decoy.kill().unwrap();
    }

    #[test]
    fn an_abandoned_directory_is_never_undone() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("x");
        std::fs::create_dir(&d).unwrap();
        let p: String = d.to_string_lossy().into();
        let out = undo_entries(&[Entry::Private { path: p.clone() }, Entry::Abandon { path: p }], None);
        assert!(out.is_empty() && d.exists(), "{out:?}");
    }

    #[test]
    fn a_private_directory_is_removed_only_if_still_private() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("mine");
        safefs::create_private(&d).unwrap();
        std::fs::write(d.join("jobs.bin"), "x").unwrap();
        let out = undo_entries(&[Entry::Private { path: d.to_string_lossy().into() }], None);
        assert!(matches!(&out[..], [(0, Outcome::Done(m))] if m.contains("removed private directory")), "{out:?}");
        assert!(!d.exists());
        // Opened up to others, or replaced by a symlink: left alone.
        let e = t.path().join("open");
        std::fs::create_dir(&e).unwrap();
        std::fs::set_permissions(&e, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        std::fs::write(e.join("f"), "x").unwrap();
        let l = t.path().join("link");
        std::os::unix::fs::symlink(&e, &l).unwrap();
        for p in [&e, &l] {
            let out = undo_entries(&[Entry::Private { path: p.to_string_lossy().into() }], None);
            assert!(matches!(&out[..], [(0, Outcome::Refused(_))]), "{out:?}");
        }
        assert!(e.join("f").exists());
    }

    #[test]
    fn writes_are_undone_only_into_kernel_files() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("smp_affinity_list");
        std::fs::write(&f, "1").unwrap();
        let l = t.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        for p in [&f, &l] {
            let out = undo_entries(&[Entry::Write { path: p.to_string_lossy().into(), old: "0-1".into(), new: "1".into() }], None);
            assert!(matches!(&out[..], [(0, Outcome::Refused(_))]), "{out:?}");
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "1");
    }

    #[test]
    fn staged_files_move_only_out_of_a_private_directory() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        std::fs::create_dir(&run).unwrap();
        // An attacker's directory holding a "staged" file: not moved.
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        std::fs::write(open.join("jobs.bin"), "theirs").unwrap();
        let e = Entry::Stage { tmp: open.join("jobs.bin").to_string_lossy().into(), dest: run.join("jobs.bin").to_string_lossy().into() };
        assert!(matches!(&undo_entries(&[e], None)[..], [(0, Outcome::Refused(_))]));
        assert!(!run.join("jobs.bin").exists());
        // Ours: moved, over the symlink the run directory held.
        let mine = t.path().join("mine");
        safefs::create_private(&mine).unwrap();
        std::fs::write(mine.join("jobs.bin"), "ours").unwrap();
        std::os::unix::fs::symlink(mine.join("jobs.bin"), run.join("jobs.bin")).unwrap();
        let e = Entry::Stage { tmp: mine.join("jobs.bin").to_string_lossy().into(), dest: run.join("jobs.bin").to_string_lossy().into() };
        assert!(matches!(&undo_entries(&[e], None)[..], [(0, Outcome::Done(_))]));
        assert!(!run.join("jobs.bin").is_symlink());
        assert_eq!(std::fs::read_to_string(run.join("jobs.bin")).unwrap(), "ours");
    }

    #[test]
    fn settle_drops_refused_entries_and_keeps_failed_ones() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::open(t.path()).unwrap();
        let entries = vec![Entry::Cgroup { path: "/a".into() }, Entry::Private { path: "/b".into() }];
        dir.create("j.jsonl", 0o600).unwrap();
        settle(&dir, "j.jsonl", &entries, &[(0, Outcome::Refused("x".into())), (1, Outcome::Failed("y".into()))]);
        let kept: Vec<Entry> = std::fs::read_to_string(t.path().join("j.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(kept, vec![entries[1].clone()]);
        settle(&dir, "j.jsonl", &entries, &[(0, Outcome::Refused("x".into()))]);
        assert!(!t.path().join("j.jsonl").exists(), "a journal that cannot be undone safely is not retried forever");
    }

    #[test]
    fn old_journal_lines_still_parse() {
        let e: Entry = serde_json::from_str(r#"{"op":"mkdir","path":"/dev/shm/xtalk-1"}"#).unwrap();
        assert_eq!(e, Entry::Mkdir { path: "/dev/shm/xtalk-1".into() });
    }
}
