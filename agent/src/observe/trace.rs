//! Kernel scheduling trace through tracefs, in a private instance (instances/xtalk-<pid>)
//! so other users of tracefs are not disturbed. Events are enabled before the run, tracing
//! is switched on only for the measured window, and the instance is removed afterwards; if
//! tracefs was not mounted, it is mounted for the run and unmounted by the last agent to end
//! (observe/tracefs.rs). An instance left by a killed agent is removed by the next agent that
//! uses tracefs.

use super::capabilities::tracefs_root;
use super::tracefs::{self, TracefsUse};
use std::fs;
use std::path::{Path, PathBuf};

const PREFIX: &str = "xtalk-";

/// Is this instance name a live agent's?
fn live_agent(name: &str) -> bool {
    name.strip_prefix(PREFIX).and_then(|p| p.parse::<i32>().ok()).is_some_and(pid_alive)
}

/// tracefs for the duration of `f`: the existing mount, or one made and undone here.
pub fn with_tracefs<T>(f: impl FnOnce(&Path) -> Result<T, String>) -> Result<T, String> {
    let u = tracefs::acquire(live_agent)?;
    let r = f(&u.root);
    remove_stale(&u.root);
    r // u dropped: tracefs released
}

/// Is `name` an event name, "subsystem:event" or a bare "event", each part letters, digits,
/// '_' and '-' (as tracefs names them: `xhci-hcd`)? Anything else (`..`, `/`) could lead
/// the agent's writes out of tracefs, so it is refused before any path is built.
pub fn valid_event_name(name: &str) -> Result<(), String> {
    let part = |p: &str| !p.is_empty() && p.len() <= 128 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let ok = match name.split_once(':') {
        Some((sys, ev)) => part(sys) && part(ev),
        None => part(name),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("'{}' is not an event name: write subsystem:event, each part letters, digits, '_' or '-' (e.g. sched:sched_switch)", name.escape_debug()))
    }
}

/// "sched:sched_switch" or a bare "sched_switch" -> its directory under events/.
pub fn event_dir(root: &Path, name: &str) -> Result<PathBuf, String> {
    valid_event_name(name)?;
    let events = root.join("events");
    if let Some((sys, ev)) = name.split_once(':') {
        let d = events.join(sys).join(ev);
        return if d.join("enable").exists() { Ok(d) } else { Err(format!("trace event '{name}' does not exist")) };
    }
    for sys in fs::read_dir(&events).map_err(|e| format!("{}: {e}", events.display()))?.flatten() {
        let d = sys.path().join(name);
        if d.join("enable").exists() {
            return Ok(d);
        }
    }
    Err(format!("trace event '{name}' does not exist"))
}

/// Some of the subsystems this kernel offers, for error messages.
pub fn offered(root: &Path) -> String {
    let mut v: Vec<String> = fs::read_dir(root.join("events")).map(|d| d.flatten().filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    v.sort();
    format!("subsystems {} (see {}/available_events)", v.join(", "), root.display())
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

fn pid_alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Remove instances of agents that died without cleaning up.
fn remove_stale(root: &Path) {
    let Ok(dir) = fs::read_dir(root.join("instances")) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix(PREFIX).and_then(|p| p.parse::<i32>().ok()) {
            if !pid_alive(pid) {
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}

/// `xtalk-agent recover`: remove the trace instances of dead agents, if tracefs is mounted
/// (it is never mounted for this), then unmount tracefs if xtalk mounted it and no agent is
/// left to use it. One line per thing undone.
pub fn recover() -> Vec<String> {
    let Some(root) = tracefs_root() else { return Vec::new() };
    let dir = Path::new(&root).join("instances");
    let before: Vec<String> = fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    remove_stale(Path::new(&root));
    let mut undone: Vec<String> = before.into_iter().filter(|n| n.starts_with(PREFIX) && !dir.join(n).exists()).map(|n| format!("agent {}: removed trace instance {}", &n[PREFIX.len()..], dir.join(&n).display())).collect();
    undone.extend(tracefs::recover(&live_agent));
    undone
}

pub struct Tracer {
    /// Released (and unmounted if xtalk mounted it and nobody else uses it) after Drop's body.
    tracefs: TracefsUse,
    dir: PathBuf,
    pub events: Vec<String>,
}

impl Tracer {
    fn root(&self) -> &Path {
        &self.tracefs.root
    }

    /// Create the private instance with `events` enabled and tracing off.
    pub fn setup(events: &[String], buffer_kb: u32) -> Result<Tracer, String> {
        let u = tracefs::acquire(live_agent)?;
        remove_stale(&u.root);
        let dir = u.root.join("instances").join(format!("{PREFIX}{}", std::process::id()));
        let mut t = Tracer { tracefs: u, dir, events: events.to_vec() };
        fs::create_dir(&t.dir).map_err(|e| format!("{}: {e}", t.dir.display()))?;
        write(&t.dir.join("tracing_on"), "0")?;
        write(&t.dir.join("buffer_size_kb"), &buffer_kb.to_string())?;
        // One time base with the job records: CLOCK_MONOTONIC.
        write(&t.dir.join("trace_clock"), "mono")?;
        for ev in events {
            let d = event_dir(t.root(), ev)?;
            let rel = d.strip_prefix(t.root().join("events")).unwrap().to_path_buf();
            write(&t.dir.join("events").join(rel).join("enable"), "1")?;
        }
        t.events = events.to_vec();
        Ok(t)
    }

    pub fn on(&self) {
        let _ = write(&self.dir.join("tracing_on"), "1");
    }

    pub fn off(&self) {
        let _ = write(&self.dir.join("tracing_on"), "0");
    }

    /// Save the buffer into directory `out`: `trace.dat` (trace-cmd's format, the raw
    /// ring-buffer pages, ns stamps), or where the raw buffers cannot be read, `trace.txt`
    /// (the text rendering, µs stamps) with the reason. Tracing must be off.
    pub fn save(&self, out: &Path) -> Result<Saved, String> {
        let events: Vec<(String, String)> = self
            .events
            .iter()
            .filter_map(|ev| {
                let d = event_dir(self.root(), ev).ok()?;
                let rel = d.strip_prefix(self.root().join("events")).ok()?;
                Some((rel.parent()?.to_str()?.to_string(), rel.file_name()?.to_str()?.to_string()))
            })
            .collect();
        let (file, capture, raw_error) = match super::tracedat::write(self.root(), &self.dir, &events, &out.join("trace.dat")) {
            Ok(_) => ("trace.dat", "raw", None),
            Err(why) => {
                let dest = out.join("trace.txt");
                let mut src = fs::File::open(self.dir.join("trace")).map_err(|e| format!("trace: {e}"))?;
                let mut dst = crate::safefs::create_new(&dest, 0o644).map_err(|e| format!("{}: {e}", dest.display()))?;
                std::io::copy(&mut src, &mut dst).map_err(|e| format!("trace copy: {e}"))?;
                ("trace.txt", "text", Some(why))
            }
        };
        let mut lost = 0;
        if let Ok(cpus) = fs::read_dir(self.dir.join("per_cpu")) {
            for c in cpus.flatten() {
                let stats = fs::read_to_string(c.path().join("stats")).unwrap_or_default();
                lost += stats.lines().find_map(|l| l.strip_prefix("overrun: ")?.trim().parse::<u64>().ok()).unwrap_or(0);
            }
        }
        Ok(Saved { file: file.into(), capture: capture.into(), raw_error, lost })
    }
}

/// What `Tracer::save` kept.
pub struct Saved {
    /// "trace.dat" or "trace.txt".
    pub file: String,
    /// "raw" (ring-buffer pages, ns) or "text" (the fallback, µs).
    pub capture: String,
    /// Why the raw buffers were not used, for a text capture.
    pub raw_error: Option<String>,
    pub lost: u64,
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.off();
        for ev in &self.events {
            if let Ok(d) = event_dir(self.root(), ev) {
                let rel = d.strip_prefix(self.root().join("events")).unwrap().to_path_buf();
                let _ = fs::write(self.dir.join("events").join(rel).join("enable"), "0");
            }
        }
        let _ = fs::remove_dir(&self.dir);
        remove_stale(self.root());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_stay_inside_tracefs() {
        for ok in ["sched:sched_switch", "sched_switch", "xhci-hcd:xhci_urb_enqueue", "irq_vectors:local_timer_entry"] {
            assert!(valid_event_name(ok).is_ok(), "{ok}");
        }
        for bad in ["../../../../tmp/x:y", "sched:../x", "a/b:c", "..", ":x", "x:", "x:y:z", "sched:sched switch", "", "s\0:x"] {
            assert!(valid_event_name(bad).is_err(), "{bad}");
        }
        assert!(event_dir(Path::new("/nonexistent"), "../../../../tmp/x:y").unwrap_err().contains("not an event name"));
    }
}
