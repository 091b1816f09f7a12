//! Machine facts needed to check a plan: CPUs, privileges, limits, memory.
use std::fs;

/// Parse a kernel CPU list such as "0-3,8,10-11".
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.push(a)
                }
            }
        }
    }
    out
}

/// Format CPUs back into the kernel's list notation.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
        i = j + 1;
    }
    parts.join(",")
}

pub fn online_cpus() -> Vec<usize> {
    fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_else(|_| (0..num_cpus_conf()).collect())
}

fn num_cpus_conf() -> usize {
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) as usize }
}

/// CPUs this process may run on (its cpuset and affinity).
pub fn allowed_cpus() -> Vec<usize> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return online_cpus();
    }
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

pub fn mem_available_bytes() -> u64 {
    meminfo_kib("MemAvailable:") * 1024
}

pub fn meminfo_kib(key: &str) -> u64 {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn cap_effective() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("CapEff:")).and_then(|l| u64::from_str_radix(l[7..].trim(), 16).ok()))
        .unwrap_or(0)
}

const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;

pub fn has_cap_sys_nice() -> bool {
    cap_effective() & (1 << CAP_SYS_NICE) != 0
}

pub fn has_cap_ipc_lock() -> bool {
    cap_effective() & (1 << CAP_IPC_LOCK) != 0
}

/// The type of an rlimit resource number: glibc declares its own enum type, musl (the static
/// aarch64 build) a plain int.
#[cfg(target_env = "gnu")]
pub type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type RlimitResource = libc::c_int;

fn rlimit(res: RlimitResource) -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe { libc::getrlimit(res, &mut r) };
    if r.rlim_cur == libc::RLIM_INFINITY { u64::MAX } else { r.rlim_cur }
}

pub fn rlimit_rtprio() -> u64 {
    rlimit(libc::RLIMIT_RTPRIO)
}

pub fn rlimit_memlock() -> u64 {
    rlimit(libc::RLIMIT_MEMLOCK)
}

/// Lowest nice value allowed without privilege (RLIMIT_NICE maps 20 - rlim).
pub fn rlimit_nice_floor() -> i32 {
    let r = rlimit(libc::RLIMIT_NICE).min(40) as i32;
    20 - r
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }
}
