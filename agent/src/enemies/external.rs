//! `external`: any command as an enemy (e.g. a stress-ng stressor), started with argv (no
//! shell) after the start barrier, in its own process group. Its stdout and stderr are
//! kept (the last 64 KiB) so that `rate_regex`, whose first capture group is a number,
//! can read the total work the command declares when it ends (stress-ng's bogo ops, for
//! example); without a regex the counter is the milliseconds it ran. Intensity stops and
//! continues the whole group (SIGSTOP / SIGCONT in 10 ms windows). At teardown the group
//! gets SIGTERM, then SIGKILL after a second, and is reaped: nothing survives the run. The
//! command also carries PR_SET_PDEATHSIG, so it dies with its enemy process even if that
//! is killed. The command runs under the enemy's planned policy and priority, taken
//! between fork and exec (its CPUs it inherits from the enemy process); the enemy process
//! only watches it (enemies::own_sched). A command that exits by itself before the run ends is reported: the enemy
//! ends with the reason and the agent records it in run.json's notes.
//!
//! `agent_copy` runs one of the agent's own hidden subcommands from a private copy of its
//! executable (a memfd, fexecve): a process with its own text pages, as a duplicated
//! executable file gives (seed 000 §5.3.1); it counts one unit of work per output line.
use super::kind::{Args, Dflt, Kind, Param};
use super::{Ctx, EnemyLoad};
use crate::plan::{err, PlanError};
use crate::observe::clock::mono_ns;
use regex::Regex;
use std::ffi::CString;

const KEEP: usize = 64 << 10;
const GRACE_NS: i64 = 1_000_000_000;

pub struct External {
    argv: Vec<CString>,
    regex: Option<Regex>,
    pid: libc::pid_t,
    out_fd: libc::c_int,
    output: Vec<u8>,
    started: i64,
    /// Running (not paused) time so far and when the current running stretch began.
    run_ns: i64,
    since: i64,
    counted_ms: u64,
    status: Option<libc::c_int>,
    /// A private copy of the agent's executable to run instead of argv[0] (agent_copy), and
    /// the environment it gets (this process's).
    exe_fd: Option<libc::c_int>,
    env: Vec<CString>,
    /// Output lines seen, and those already counted as work (agent_copy).
    lines: u64,
    counted_lines: u64,
    /// The planned policy, taken by the command itself.
    sched: crate::sched::ExecSched,
}

impl External {
    pub fn new(argv: &[String], rate_regex: Option<&str>, cx: &Ctx) -> Result<External, String> {
        let regex = rate_regex.map(|r| Regex::new(r).map_err(|e| format!("external: rate_regex: {e}"))).transpose()?;
        let argv = argv.iter().map(|a| CString::new(a.as_str()).map_err(|_| "external: argv holds a NUL byte".to_string())).collect::<Result<_, _>>()?;
        Ok(External { argv, regex, pid: 0, out_fd: -1, output: Vec::new(), started: 0, run_ns: 0, since: 0, counted_ms: 0, status: None,
                      exe_fd: None, env: Vec::new(), lines: 0, counted_lines: 0,
                      sched: crate::sched::ExecSched::new(&cx.sched) })
    }

    /// The agent's hidden subcommand `args` run from a private copy of the agent's executable
    /// (copied now, before the start barrier, into a memfd of its own); one line of its
    /// output is one unit of work.
    pub fn agent_copy(args: &[String], cx: &Ctx) -> Result<External, String> {
        let image = std::fs::read("/proc/self/exe").map_err(|e| format!("copy of the agent executable: {e}"))?;
        let name = CString::new("xtalk-agent-copy").unwrap();
        let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        std::io::Write::write_all(&mut file, &image).map_err(|e| format!("copy of the agent executable: {e}"))?;
        let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
        let argv: Vec<String> = std::iter::once("xtalk-agent".to_string()).chain(args.iter().cloned()).collect();
        let mut e = External::new(&argv, None, cx)?;
        e.exe_fd = Some(fd);
        e.env = std::env::vars_os()
            .filter_map(|(k, v)| CString::new([std::os::unix::ffi::OsStrExt::as_bytes(k.as_os_str()), b"=", std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str())].concat()).ok())
            .collect();
        Ok(e)
    }

    fn spawn(&mut self) {
        let mut fds = [0; 2];
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        let mut ptrs: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let parent = unsafe { libc::getpid() };
        let exe = self.exe_fd;
        let mut envp: Vec<*const libc::c_char> = self.env.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        match unsafe { libc::fork() } {
            0 => unsafe {
                // Only async-signal-safe calls between fork and exec.
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                if libc::getppid() != parent {
                    libc::_exit(127);
                }
                libc::dup2(fds[1], 1);
                libc::dup2(fds[1], 2);
                if let Err(errno) = self.sched.apply() {
                    refused(errno);
                }
                match exe {
                    Some(fd) => {
                        libc::fexecve(fd, ptrs.as_ptr(), envp.as_ptr());
                    }
                    None => {
                        libc::execvp(ptrs[0], ptrs.as_ptr());
                    }
                }
                let msg = b"xtalk external: exec failed\n";
                libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
                libc::_exit(127)
            },
            -1 => self.status = Some(-1),
            pid => {
                // Set the group from both sides: no race with our first killpg.
                unsafe { libc::setpgid(pid, pid) };
                self.pid = pid;
            }
        }
        unsafe { libc::close(fds[1]) };
        self.out_fd = fds[0];
        self.started = mono_ns();
        self.since = self.started;
    }

    /// Wait up to `ms` for output, keep what came (the last KEEP bytes).
    fn drain(&mut self, ms: i32) {
        if self.out_fd < 0 {
            return;
        }
        let mut p = libc::pollfd { fd: self.out_fd, events: libc::POLLIN, revents: 0 };
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            return;
        }
        let mut buf = [0u8; 8192];
        let n = unsafe { libc::read(self.out_fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n > 0 {
            self.lines += buf[..n as usize].iter().filter(|&&b| b == b'\n').count() as u64;
            self.output.extend_from_slice(&buf[..n as usize]);
            if self.output.len() > 2 * KEEP {
                self.output.drain(..self.output.len() - KEEP);
            }
        } else if n == 0 {
            unsafe { libc::close(self.out_fd) };
            self.out_fd = -1;
        }
    }

    /// Read what is left of the output, for at most a second (a stray process of the
    /// command's could hold the pipe open).
    fn drain_all(&mut self) {
        let until = mono_ns() + GRACE_NS;
        while self.out_fd >= 0 && mono_ns() < until {
            self.drain(100);
        }
    }

    fn reap(&mut self, flags: libc::c_int) -> bool {
        if self.status.is_none() && self.pid > 0 {
            let mut st = 0;
            if unsafe { libc::waitpid(self.pid, &mut st, flags) } == self.pid {
                self.status = Some(st);
            }
        }
        self.status.is_some()
    }

    fn group(&self, sig: libc::c_int) {
        if self.pid > 0 {
            unsafe { libc::kill(-self.pid, sig) };
        }
    }
}

/// In the forked child: the planned policy was refused. Say so on the captured output (the
/// enemy reports its last line) and exit 126, without allocating.
fn refused(errno: i32) -> ! {
    let mut msg = *b"xtalk external: sched_setattr of the enemy's policy for the command failed, errno     \n";
    let mut at = msg.len() - 2;
    let mut n = errno.unsigned_abs();
    loop {
        msg[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
        at -= 1;
    }
    unsafe {
        libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
        libc::_exit(126)
    }
}

fn describe(st: libc::c_int) -> String {
    if st == -1 {
        "could not be forked".into()
    } else if libc::WIFEXITED(st) {
        format!("exited with status {}", libc::WEXITSTATUS(st))
    } else if libc::WIFSIGNALED(st) {
        format!("was killed by signal {}", libc::WTERMSIG(st))
    } else {
        format!("ended with status {st}")
    }
}

impl EnemyLoad for External {
    /// The command starts after the barrier, with the run.
    fn prepare(&mut self) {}

    fn chunk(&mut self) -> u64 {
        if self.pid == 0 && self.status.is_none() {
            self.spawn();
        }
        self.drain(1);
        self.reap(libc::WNOHANG);
        // Milliseconds the command was running (not stopped by the pacer) since the last chunk.
        let ms = ((self.run_ns + mono_ns() - self.since) / 1_000_000) as u64;
        let d = ms - self.counted_ms;
        self.counted_ms = ms;
        if self.exe_fd.is_some() {
            let l = self.lines - self.counted_lines;
            self.counted_lines = self.lines;
            l
        } else if self.regex.is_some() {
            0
        } else {
            d
        }
    }

    fn ended(&mut self) -> Option<String> {
        let st = self.status?;
        self.group(libc::SIGKILL);
        self.drain_all();
        let tail = String::from_utf8_lossy(&self.output);
        let last = tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        let cmd = self.argv[0].to_string_lossy();
        let last = if last.is_empty() { String::new() } else { format!("; last output: {last}") };
        Some(format!("external command '{cmd}' {} after {:.2} s, before the run ended{last}",
            describe(st), (mono_ns() - self.started) as f64 / 1e9))
    }

    fn pause(&mut self) {
        self.group(libc::SIGSTOP);
        self.run_ns += mono_ns() - self.since;
    }

    fn resume(&mut self) {
        self.since = mono_ns();
        self.group(libc::SIGCONT);
    }

    fn window_ns(&self) -> i64 {
        10_000_000
    }

    /// Stop the group (SIGTERM, then SIGKILL after a grace period), reap it, and read the
    /// declared count from its output when a regex is given.
    fn finish(&mut self) -> Option<u64> {
        if self.pid > 0 && self.status.is_none() {
            self.group(libc::SIGCONT);
            self.group(libc::SIGTERM);
            let until = mono_ns() + GRACE_NS;
            while !self.reap(libc::WNOHANG) && mono_ns() < until {
                self.drain(10);
            }
            if !self.reap(libc::WNOHANG) {
                self.group(libc::SIGKILL);
                self.reap(0);
            }
        }
        // Anything else left in the group (the leader's own children) goes too.
        self.group(libc::SIGKILL);
        self.drain_all();
        let re = self.regex.as_ref()?;
        let text = String::from_utf8_lossy(&self.output);
        let last = re.captures_iter(&text).filter_map(|c| c.get(1)).last()?;
        last.as_str().replace(',', "").parse::<f64>().ok().map(|v| v as u64)
    }
}

/// The `external` kind (registry: mod.rs). Its counter is `unit` with a `rate_regex`, else
/// the milliseconds the command ran.
pub const KIND: Kind = Kind::new("external", "any command (argv, no shell), in its own process group", "ms", &[
    Param::strings("argv", "the command and its arguments"),
    Param::str("rate_regex", "one capture group around the command's total work, read from its output when it stops").default(Dflt::Unset),
    Param::str("unit", "unit of the work rate_regex reads").default(Dflt::Str("ops")),
], |a, cx| Ok(Box::new(External::new(&a.strings("argv"), a.opt_str("rate_regex").as_deref(), cx)?)))
.unit_param("unit", "rate_regex")
.runs_command(|_| true)
.check(check);

fn check(a: &Args, at: &str) -> Result<(), PlanError> {
    let argv = a.strings("argv");
    let Some(cmd) = argv.first().filter(|c| !c.is_empty()) else {
        return err(format!("{at}.argv"), "is empty; give the command and its arguments, e.g. [\"stress-ng\", \"--cpu\", \"1\"]");
    };
    if crate::victims::command::find_program(cmd).is_none() {
        return err(format!("{at}.argv[0]"), format!("'{cmd}' is not an executable file nor found on PATH; install it or give its full path"));
    }
    if let Some(r) = a.opt_str("rate_regex") {
        match Regex::new(&r) {
            Err(e) => return err(format!("{at}.rate_regex"), format!("is not a valid regex: {}", e.to_string().lines().last().unwrap_or(""))),
            Ok(re) if re.captures_len() < 2 => return err(format!("{at}.rate_regex"), "needs one capture group around the number, e.g. \"([0-9.]+) bogo ops\""),
            _ => {}
        }
    }
    Ok(())
}
