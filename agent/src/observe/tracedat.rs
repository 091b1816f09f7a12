//! The trace instance's ring buffers saved as trace-cmd's `trace.dat` (version 6, trace-cmd.dat.v6(5)):
//! the kernel's own page and event formats, then each CPU's raw pages as read from
//! `per_cpu/cpuN/trace_pipe_raw`. `trace-cmd report` and KernelShark open it; the host reads
//! the same file (trace/tracedat.py) for ns stamps on the instance's clock.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const MAGIC: &[u8] = b"\x17\x08\x44tracing6\0";
/// trace-cmd's option ids (trace-cmd.h `enum tracecmd_file_options`).
const OPTION_DONE: u16 = 0;
const OPTION_TRACECLOCK: u16 = 4;
const OPTION_UNAME: u16 = 5;

/// A tracefs file whole. Its files claim size 0 and some (header_page, header_event) answer
/// only the first read, so the first read must be large enough to take it all.
fn read(path: &Path) -> Result<Vec<u8>, String> {
    let err = |e: io::Error| format!("{}: {e}", path.display());
    let mut f = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(err)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        }
    }
}

/// The ring buffer's page size: the sub-buffer size where the kernel lets it be set
/// (`buffer_subbuf_size_kb`, 6.8+), else the system page.
fn page_size(instance: &Path) -> usize {
    let kb = fs::read_to_string(instance.join("buffer_subbuf_size_kb")).ok().and_then(|s| s.trim().parse::<usize>().ok());
    kb.map(|k| k * 1024).unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize)
}

/// The CPUs the instance has buffers for (per_cpu/cpuN), as 0..=max.
fn cpu_count(instance: &Path) -> Result<usize, String> {
    let d = instance.join("per_cpu");
    let max = fs::read_dir(&d)
        .map_err(|e| format!("{}: {e}", d.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse::<usize>().ok())
        .max();
    max.map(|m| m + 1).ok_or_else(|| format!("{}: no CPU buffers", d.display()))
}

/// One CPU's raw buffer, opened without blocking (tracing is off: reads end when it is empty).
fn open_raw(instance: &Path, cpu: usize) -> Result<fs::File, String> {
    let p = instance.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
    fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(&p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Every page left in one CPU's buffer (the reads consume it). Each read returns one page:
/// its header (timestamp, commit) and events, a partial last page included.
fn drain(mut f: fs::File, cpu: usize, page: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; page];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // A short read still stands for a whole page in the file: pad it.
                out.extend_from_slice(&buf[..n]);
                out.resize(out.len() + (page - n % page) % page, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("per_cpu/cpu{cpu}/trace_pipe_raw: {e}")),
        }
    }
    Ok(out)
}

/// The enabled events' format files, by subsystem, in a stable order.
fn formats(root: &Path, events: &[(String, String)]) -> Result<Vec<(String, Vec<Vec<u8>>)>, String> {
    let mut out: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    let mut sorted = events.to_vec();
    sorted.sort();
    sorted.dedup();
    for (sys, ev) in sorted {
        let f = read(&root.join("events").join(&sys).join(&ev).join("format"))?;
        match out.last_mut() {
            Some((s, v)) if *s == sys => v.push(f),
            _ => out.push((sys, vec![f])),
        }
    }
    Ok(out)
}

/// Does any of these formats print a kernel address as a symbol (`%ps`, `%pS`: hrtimer
/// functions, work items)? Then the file carries /proc/kallsyms so readers name them.
fn needs_symbols(systems: &[(String, Vec<Vec<u8>>)]) -> bool {
    systems.iter().flat_map(|(_, v)| v).any(|f| f.windows(3).any(|w| w == b"%ps" || w == b"%pS" || w == b"%pf"))
}

fn section8(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(data);
}

fn section4(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

fn option(out: &mut Vec<u8>, id: u16, data: &[u8]) {
    out.extend_from_slice(&id.to_le_bytes());
    section4(out, data);
}

/// Write `dest` (a new file, opened without following links) from the instance at
/// `instance` of tracefs `root`, whose enabled events are `events` (subsystem, event).
/// Tracing must be off. Returns the bytes of event pages saved. Nothing is created when a
/// buffer cannot be read (the caller falls back to the text rendering).
pub fn write(root: &Path, instance: &Path, events: &[(String, String)], dest: &Path) -> Result<u64, String> {
    if cfg!(target_endian = "big") {
        return Err("trace.dat is written little-endian only".into());
    }
    let page = page_size(instance);
    let cpus = cpu_count(instance)?;
    // Open every buffer before consuming any: one that cannot be opened leaves them all to
    // the text fallback, and no half-written file behind.
    let raw: Vec<fs::File> = (0..cpus).map(|c| open_raw(instance, c)).collect::<Result<_, _>>()?;
    let data: Vec<Vec<u8>> = raw.into_iter().enumerate().map(|(c, f)| drain(f, c, page)).collect::<Result<_, _>>()?;
    let ev_root = root.join("events");
    let mut h = Vec::new();
    h.extend_from_slice(MAGIC);
    h.push(0); // little-endian
    h.push(std::mem::size_of::<libc::c_long>() as u8);
    h.extend_from_slice(&(page as u32).to_le_bytes());
    h.extend_from_slice(b"header_page\0");
    section8(&mut h, &read(&ev_root.join("header_page"))?);
    h.extend_from_slice(b"header_event\0");
    section8(&mut h, &read(&ev_root.join("header_event"))?);
    // ftrace's own events (function, print, ...): their formats, as trace-cmd stores them.
    let mut ftrace: Vec<_> = fs::read_dir(ev_root.join("ftrace")).map(|d| d.flatten().map(|e| e.path().join("format")).filter(|p| p.exists()).collect()).unwrap_or_default();
    ftrace.sort();
    h.extend_from_slice(&(ftrace.len() as u32).to_le_bytes());
    for p in &ftrace {
        section8(&mut h, &read(p)?);
    }
    let systems = formats(root, events)?;
    h.extend_from_slice(&(systems.len() as u32).to_le_bytes());
    for (sys, fs_) in &systems {
        h.extend_from_slice(sys.as_bytes());
        h.push(0);
        h.extend_from_slice(&(fs_.len() as u32).to_le_bytes());
        for f in fs_ {
            section8(&mut h, f);
        }
    }
    let kallsyms = if needs_symbols(&systems) { read(Path::new("/proc/kallsyms")).unwrap_or_default() } else { Vec::new() };
    section4(&mut h, &kallsyms);
    section4(&mut h, &read(&root.join("printk_formats")).unwrap_or_default());
    section8(&mut h, &read(&root.join("saved_cmdlines")).unwrap_or_default());
    h.extend_from_slice(&(cpus as u32).to_le_bytes());
    h.extend_from_slice(b"options  \0");
    option(&mut h, OPTION_TRACECLOCK, &read(&instance.join("trace_clock")).unwrap_or_default());
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } == 0 {
        let s = |f: &[libc::c_char]| unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) }.to_string_lossy().into_owned();
        let u = format!("{} {} {} {}\0", s(&uts.sysname), s(&uts.nodename), s(&uts.release), s(&uts.version));
        option(&mut h, OPTION_UNAME, u.as_bytes());
    }
    h.extend_from_slice(&OPTION_DONE.to_le_bytes());
    h.extend_from_slice(b"flyrecord\0");
    // Each CPU's pages at a page-aligned offset after the header and the (offset, size) table.
    let mut off = (h.len() + 16 * cpus).div_ceil(page) * page;
    let mut table = Vec::new();
    for d in &data {
        table.push((off as u64, d.len() as u64));
        off = (off + d.len()).div_ceil(page) * page;
    }
    for (o, s) in &table {
        h.extend_from_slice(&o.to_le_bytes());
        h.extend_from_slice(&s.to_le_bytes());
    }
    let io = |e: io::Error| format!("{}: {e}", dest.display());
    let mut dest = crate::safefs::create_new(dest, 0o644).map_err(io)?;
    dest.write_all(&h).map_err(io)?;
    for (d, (o, _)) in data.iter().zip(&table) {
        dest.seek(SeekFrom::Start(*o)).map_err(io)?;
        dest.write_all(d).map_err(io)?;
    }
    // The last CPU's data may be empty at a page boundary past the end: make the file reach it.
    dest.set_len(off as u64).map_err(io)?;
    Ok(data.iter().map(|d| d.len() as u64).sum())
}
