//! The environment recorded with every run (kernel, CPU, caches, clocks, virtualization,
//! time-sync services), so that a result can be traced to the machine that produced it.
use super::machine::{cpu_list, online_cpus, parse_cpu_list};
use serde_json::{json, Map, Value};
use std::fs;
use std::io::Read;

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The kernel config: /proc/config.gz, else /boot/config-RELEASE.
fn kernel_config(release: &str) -> Option<String> {
    if let Ok(f) = fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f).read_to_string(&mut s).is_ok() {
            return Some(s);
        }
    }
    fs::read_to_string(format!("/boot/config-{release}")).ok()
}

/// Config options that change real-time behaviour.
const CONFIG_KEYS: &[&str] = &[
    "CONFIG_PREEMPT_RT", "CONFIG_PREEMPT", "CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_HZ", "CONFIG_NO_HZ_FULL", "CONFIG_NO_HZ_IDLE", "CONFIG_RT_GROUP_SCHED",
    "CONFIG_CFS_BANDWIDTH", "CONFIG_CPUSETS", "CONFIG_SCHED_DEBUG", "CONFIG_FTRACE", "CONFIG_PERF_EVENTS",
];

fn kernel(uts: &libc::utsname) -> Value {
    let field = |b: &[libc::c_char]| unsafe { std::ffi::CStr::from_ptr(b.as_ptr()) }.to_string_lossy().into_owned();
    let release = field(&uts.release);
    let cmdline = read_trim("/proc/cmdline").unwrap_or_default();
    let mut config = Map::new();
    let cfg = kernel_config(&release);
    if let Some(text) = &cfg {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=') {
                if CONFIG_KEYS.contains(&k) {
                    config.insert(k.into(), Value::String(v.into()));
                }
            }
        }
    }
    let has = |k: &str| config.get(k).map(|v| v == "y").unwrap_or(false);
    let param = |name: &str| cmdline.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}=")).map(String::from));
    json!({
        "release": release,
        "version": field(&uts.version),
        "machine": field(&uts.machine),
        "cmdline": cmdline,
        "config_available": cfg.is_some(),
        "config": config,
        "preempt_rt": has("CONFIG_PREEMPT_RT") || fs::metadata("/sys/kernel/realtime").is_ok(),
        "hz": config.get("CONFIG_HZ").and_then(|v| v.as_str()?.parse::<u32>().ok()),
        "rt_group_sched": has("CONFIG_RT_GROUP_SCHED"),
        "isolcpus": param("isolcpus"),
        "nohz_full": param("nohz_full"),
        "sched_rt_runtime_us": read_trim("/proc/sys/kernel/sched_rt_runtime_us").and_then(|s| s.parse::<i64>().ok()),
        "sched_rt_period_us": read_trim("/proc/sys/kernel/sched_rt_period_us").and_then(|s| s.parse::<i64>().ok()),
    })
}

fn cpuinfo_field(info: &str, key: &str) -> Option<String> {
    info.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())
}

fn caches() -> Vec<Value> {
    let mut out = Vec::new();
    for idx in 0..16 {
        let base = format!("/sys/devices/system/cpu/cpu0/cache/index{idx}");
        let Some(level) = read_trim(&format!("{base}/level")) else { break };
        let size = read_trim(&format!("{base}/size")).unwrap_or_default();
        out.push(json!({
            "level": level.parse::<u32>().unwrap_or(0),
            "type": read_trim(&format!("{base}/type")),
            "size_bytes": parse_size(&size),
            "line_bytes": read_trim(&format!("{base}/coherency_line_size")).and_then(|s| s.parse::<u64>().ok()),
            "ways": read_trim(&format!("{base}/ways_of_associativity")).and_then(|s| s.parse::<u64>().ok()),
            "shared_cpus": read_trim(&format!("{base}/shared_cpu_list")),
        }));
    }
    out
}

/// "32768K" -> bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mul)
}

fn topology(cpus: &[usize]) -> Vec<Value> {
    cpus.iter()
        .map(|c| {
            let t = format!("/sys/devices/system/cpu/cpu{c}/topology");
            json!({
                "cpu": c,
                "package": read_trim(&format!("{t}/physical_package_id")).and_then(|s| s.parse::<i64>().ok()),
                "core": read_trim(&format!("{t}/core_id")).and_then(|s| s.parse::<i64>().ok()),
                "siblings": read_trim(&format!("{t}/thread_siblings_list")),
                "governor": read_trim(&format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")),
            })
        })
        .collect()
}

/// NUMA nodes and their CPUs (sysfs); empty when the kernel exposes none.
fn numa() -> Vec<Value> {
    let mut nodes: Vec<(u64, String)> = fs::read_dir("/sys/devices/system/node")
        .map(|d| d.flatten().filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix("node")?.parse::<u64>().ok()?;
            Some((n, read_trim(&format!("/sys/devices/system/node/node{n}/cpulist"))?))
        }).collect())
        .unwrap_or_default();
    nodes.sort();
    nodes.into_iter().map(|(n, cpus)| json!({"node": n, "cpus": cpus})).collect()
}

/// Hypervisor vendor from CPUID leaf 0x40000000 when the hypervisor bit is set.
fn hypervisor_vendor() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        if __cpuid(1).ecx & (1 << 31) == 0 {
            return None;
        }
        let r = __cpuid(0x4000_0000);
        let bytes: Vec<u8> = [r.ebx, r.ecx, r.edx].iter().flat_map(|w| w.to_le_bytes()).collect();
        return Some(String::from_utf8_lossy(&bytes).trim_matches(char::from(0)).to_string());
    }
    #[allow(unreachable_code)]
    read_trim("/sys/hypervisor/type")
}

/// Why this machine's CPU is emulated rather than real, if it is (timings there prove function,
/// not performance): qemu's TCG names itself in x86's hypervisor CPUID leaf; on Arm, qemu's
/// `virt` machine names itself in the device tree (`linux,dummy-virt`) and a KVM guest of it
/// would see the host's CPU, so a Cortex-A53 there is a translated one; an arm64 process on an
/// x86 kernel runs under qemu-user.
pub fn emulation(hypervisor: Option<&str>) -> Option<String> {
    if let Some(v) = hypervisor.filter(|v| v.starts_with("TCG")) {
        return Some(format!("qemu TCG (CPUID hypervisor vendor {v})"));
    }
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cfg!(target_arch = "aarch64") && info.contains("vendor_id") {
        return Some("qemu-user (an arm64 process on an x86 kernel)".to_string());
    }
    let dt = fs::read("/sys/firmware/devicetree/base/compatible").unwrap_or_default();
    let virt = dt.split(|b| *b == 0).any(|c| c == b"linux,dummy-virt");
    let kvm = fs::metadata("/sys/hypervisor/type").is_ok() || read_trim("/sys/devices/system/clocksource/clocksource0/available_clocksource").is_some_and(|c| c.contains("kvm"));
    (virt && !kvm).then(|| "qemu virt machine (device tree linux,dummy-virt), CPU translated by TCG".to_string())
}

const TIME_SYNC: &[&str] = &["systemd-timesyn", "ntpd", "chronyd", "ptp4l", "phc2sys", "openntpd", "timesyncd"];

/// Time-synchronisation daemons running now (seed 000 §5.3.2: they caused periodic peaks).
pub fn time_sync_services() -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
            if let Some(comm) = read_trim(&format!("/proc/{pid}/comm")) {
                if TIME_SYNC.iter().any(|t| comm.starts_with(t)) && !found.contains(&comm) {
                    found.push(comm);
                }
            }
        }
    }
    found
}

/// Everything above as one JSON object.
pub fn collect() -> Value {
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut uts) };
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let online = online_cpus();
    let hv = hypervisor_vendor();
    let container = ["/.dockerenv", "/run/.containerenv"].iter().any(|p| fs::metadata(p).is_ok());
    json!({
        "kernel": kernel(&uts),
        "cpu": {
            "model": cpuinfo_field(&info, "model name").or_else(|| super::arm_cpu::model(&info)).or_else(|| cpuinfo_field(&info, "Processor")),
            "vendor": cpuinfo_field(&info, "vendor_id").or_else(|| cpuinfo_field(&info, "CPU implementer")),
            "online": cpu_list(&online),
            "count": online.len(),
            "isolated": read_trim("/sys/devices/system/cpu/isolated").map(|s| cpu_list(&parse_cpu_list(&s))),
            "topology": topology(&online),
            "caches": caches(),
            "numa": numa(),
        },
        "memory_bytes": super::machine::meminfo_kib("MemTotal:") * 1024,
        // What a run's buffers and tmpfs-staged records may use (the host checks plans with it).
        "memory_available_bytes": super::machine::mem_available_bytes(),
        "clocksource": {
            "current": read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            "available": read_trim("/sys/devices/system/clocksource/clocksource0/available_clocksource"),
        },
        "virtualization": {
            "hypervisor": hv.is_some(),
            "vendor": hv,
            "container": container,
            "emulated": emulation(hv.as_deref()),
        },
        "time_sync_services": time_sync_services(),
        "capabilities": super::capabilities::collect(),
        "agent_version": env!("CARGO_PKG_VERSION"),
    })
}

/// Why this process runs under user-mode emulation, if it does, for the tests that cannot
/// mean anything there (qemu-user translates the code: CPU-time predictions are not the
/// CPU's). Seen by the runner the tests were started with (`make test-agent-aarch64` sets
/// $XTALK_AGENT_RUNNER), or by an arm64 process reading an x86 kernel's /proc/cpuinfo.
#[cfg(test)]
pub fn user_emulation() -> Option<String> {
    if let Some(r) = std::env::var_os("XTALK_AGENT_RUNNER").filter(|r| !r.is_empty()) {
        return Some(format!("run through {}", r.to_string_lossy()));
    }
    let x86_kernel = fs::read_to_string("/proc/cpuinfo").map(|c| c.contains("vendor_id")).unwrap_or(false);
    (cfg!(target_arch = "aarch64") && x86_kernel).then(|| "an arm64 process on an x86 kernel".to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_parse() {
        assert_eq!(super::parse_size("32768K"), Some(32 << 20));
        assert_eq!(super::parse_size("2M"), Some(2 << 20));
        assert_eq!(super::parse_size("x"), None);
    }
    #[test]
    fn qemu_tcg_is_named_emulated_and_kvm_is_not() {
        let tcg = super::emulation(Some("TCGTCGTCGTCG")).expect("a TCG hypervisor vendor is emulation");
        assert!(tcg.contains("qemu TCG"), "{tcg}");
        // KVM runs the real CPU: emulated only if something else here says so (qemu-user).
        assert_eq!(super::emulation(Some("KVMKVMKVM")), super::emulation(None));
        let e = super::collect();
        let recorded = &e["virtualization"]["emulated"];
        assert!(recorded.is_null() || recorded.is_string(), "{recorded}");
        if super::user_emulation().is_some() && cfg!(target_arch = "aarch64") {
            assert!(recorded.as_str().unwrap().contains("qemu-user"), "{recorded}");
        }
    }
    #[test]
    fn environment_names_kernel_and_cpus() {
        let e = super::collect();
        assert!(e["kernel"]["release"].as_str().unwrap().len() > 0);
        assert!(e["cpu"]["count"].as_u64().unwrap() >= 1);
    }
}
