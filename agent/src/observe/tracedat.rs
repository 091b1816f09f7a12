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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tracefs-shaped directory: formats, and an instance whose CPU buffers are plain files
    /// (`pages[cpu]` pages each, a marker byte per page), or none.
    fn fake(pages: Option<&[usize]>) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        fs::create_dir_all(r.join("events/sched/sched_switch")).unwrap();
        fs::create_dir_all(r.join("events/ftrace/print")).unwrap();
        fs::write(r.join("events/header_page"), "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n").unwrap();
        fs::write(r.join("events/header_event"), "# compressed entry header\n").unwrap();
        fs::write(r.join("events/sched/sched_switch/format"), "name: sched_switch\nID: 316\nprint fmt: \"x\"\n").unwrap();
        fs::write(r.join("events/ftrace/print/format"), "name: print\nID: 5\n").unwrap();
        fs::write(r.join("saved_cmdlines"), "1 init\n").unwrap();
        let inst = r.join("instances/xtalk-1");
        fs::create_dir_all(&inst).unwrap();
        fs::write(inst.join("trace_clock"), "local [mono]\n").unwrap();
        fs::write(inst.join("buffer_subbuf_size_kb"), "4\n").unwrap();
        for (cpu, n) in pages.unwrap_or(&[]).iter().enumerate() {
            fs::create_dir_all(inst.join(format!("per_cpu/cpu{cpu}"))).unwrap();
            let data: Vec<u8> = (0..*n).flat_map(|p| std::iter::repeat_n(0xA0 + cpu as u8 * 16 + p as u8, 4096)).collect();
            fs::write(inst.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")), data).unwrap();
        }
        (d, inst)
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn pages_land_page_aligned_where_the_table_says() {
        let (d, inst) = fake(Some(&[2, 0, 1]));
        let dest = d.path().join("trace.dat");
        let ev = vec![("sched".to_string(), "sched_switch".to_string())];
        assert_eq!(write(d.path(), &inst, &ev, &dest).unwrap(), 3 * 4096);
        let b = fs::read(&dest).unwrap();
        assert!(b.starts_with(MAGIC) && b[MAGIC.len()] == 0 && b[MAGIC.len() + 1] == 8);
        assert_eq!(u32::from_le_bytes(b[14..18].try_into().unwrap()), 4096);
        let fly = b.windows(10).position(|w| w == b"flyrecord\0").unwrap() + 10;
        assert!(b[..fly].windows(6).any(|w| w == b"[mono]"), "the trace clock option");
        let table: Vec<(u64, u64)> = (0..3).map(|c| (u64_at(&b, fly + 16 * c), u64_at(&b, fly + 16 * c + 8))).collect();
        assert_eq!(table.iter().map(|t| t.1).collect::<Vec<_>>(), vec![8192, 0, 4096]);
        for (cpu, (off, size)) in table.iter().enumerate() {
            assert_eq!(off % 4096, 0, "cpu {cpu} page-aligned");
            for p in 0..(*size as usize / 4096) {
                assert!(b[*off as usize + p * 4096..][..4096].iter().all(|&x| x == 0xA0 + cpu as u8 * 16 + p as u8), "cpu {cpu} page {p}");
            }
        }
        assert!(b.len() as u64 >= table[2].0 + table[2].1);
        // A link planted at the destination is replaced, never followed.
        let other = d.path().join("other");
        fs::write(&other, "kept").unwrap();
        fs::remove_file(&dest).unwrap();
        std::os::unix::fs::symlink(&other, &dest).unwrap();
        fs::write(inst.join("per_cpu/cpu0/trace_pipe_raw"), vec![1u8; 4096]).unwrap();
        write(d.path(), &inst, &ev, &dest).unwrap();
        assert_eq!(fs::read_to_string(&other).unwrap(), "kept");
        assert!(!fs::symlink_metadata(&dest).unwrap().file_type().is_symlink());
    }

    #[test]
    fn unreadable_buffers_leave_no_file() {
        let (d, inst) = fake(None);
        let dest = d.path().join("trace.dat");
        let e = write(d.path(), &inst, &[("sched".into(), "sched_switch".into())], &dest).unwrap_err();
        assert!(e.contains("per_cpu"), "{e}");
        assert!(!dest.exists());
    }
}
