//! Plans that passed every check and then crashed the run (an index past the control block,
//! an overflowing job count, a pids.max the kernel refuses, a job log larger than memory):
//! `xtalk-agent check` refuses each with one line naming the field, exit code 2, and never
//! panics.

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

fn base() -> Value {
    json!({
        "version": 1, "run_id": "bounds", "timeout_s": 30.0, "settle_ms": 10.0,
        "victim": {"body": {"kind": "sum", "bytes": 65536}, "period_ns": 1_000_000, "jobs": 10, "warmup_jobs": 1},
        "enemies": []
    })
}

/// The agent under test; through $XTALK_AGENT_RUNNER where one is set (qemu-aarch64-static for
/// the aarch64 agent on an x86_64 machine, `make test-agent-aarch64`), as cargo runs the tests.
fn agent() -> Command {
    let bin = env!("CARGO_BIN_EXE_xtalk-agent");
    match std::env::var("XTALK_AGENT_RUNNER") {
        Ok(runner) if !runner.is_empty() => {
            let mut c = Command::new(runner);
            c.arg(bin);
            c
        }
        _ => Command::new(bin),
    }
}

/// (exit code, stdout, stderr) of `xtalk-agent check -` fed `plan`.
fn check(plan: &Value) -> (i32, String, String) {
    let mut child = agent()
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(plan.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn refused(plan: Value, field: &str) -> String {
    let (code, _, err) = check(&plan);
    assert_eq!(code, 2, "expected a refusal naming {field}, got exit {code}: {err}");
    let lines: Vec<&str> = err.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].starts_with(&format!("xtalk-agent: plan: {field}")), "{field} not named: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo").unwrap().lines().find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).unwrap() * 1024
}

#[test]
fn the_base_plan_is_accepted() {
    let (code, out, err) = check(&base());
    assert_eq!((code, out.trim()), (0, "ok"), "{err}");
}

#[test]
fn more_enemies_than_the_control_block_holds() {
    let mut p = base();
    p["enemies"] = (0..257).map(|i| json!({"name": format!("e{i}"), "load": {"kind": "pi"}})).collect();
    refused(p, "enemies");
}

#[test]
fn a_job_count_that_overflows() {
    let mut p = base();
    p["victim"]["jobs"] = json!(i64::MAX);
    refused(p, "victim.jobs");
    let mut p = base();
    p["victim"]["warmup_jobs"] = json!(u64::MAX);
    refused(p, "victim.warmup_jobs");
}

#[test]
fn a_pids_max_the_kernel_refuses() {
    let mut p = base();
    p["pids_max"] = json!(10_000_000_000_000u64);
    refused(p, "pids_max");
    let mut p = base();
    p["groups"] = json!([{"name": "g", "pids_max": 10_000_000_000_000u64}]);
    refused(p, "groups[0].pids_max");
}

#[test]
fn a_job_log_larger_than_memory() {
    // Twice the available memory in job records (80 bytes each), below the hard limit when
    // the machine is small enough; the hard limit otherwise.
    let jobs = (mem_available() / 40).min(xtalk_max_jobs());
    let mut p = base();
    p["victim"]["jobs"] = json!(jobs);
    p["victim"]["period_ns"] = json!(10_000);
    p["timeout_s"] = json!(2_000_000.0);
    let why = refused(p, "victim.jobs");
    assert!(why.contains("MiB") && (why.contains("memory") || why.contains("limit")), "{why}");
}

fn xtalk_max_jobs() -> u64 {
    1_000_000_000
}

#[test]
fn times_past_what_the_clocks_hold() {
    let mut p = base();
    p["victim"]["period_ns"] = json!(u64::MAX);
    refused(p, "victim.period_ns");
    let mut p = base();
    p["timeout_s"] = json!(1e300);
    refused(p, "timeout_s");
    let mut p = base();
    p["victim"]["jobs"] = json!(900_000_000u64);
    p["victim"]["period_ns"] = json!(3_600_000_000_000u64);
    refused(p, "victim.jobs");
}

#[test]
fn a_run_id_too_long_for_a_directory_name() {
    let mut p = base();
    p["run_id"] = json!("x".repeat(300));
    refused(p, "run_id");
}

#[test]
fn a_task_set_whose_hyperperiod_overflows() {
    let mut p = base();
    p["victim"]["body"] = json!({"kind": "taskset", "tasks": [
        {"name": "a", "period_ns": 3_000_000_000_000u64, "wcet_ns": 1000},
        {"name": "b", "period_ns": 18_446_744_073_709_551_557u64, "wcet_ns": 1000}]});
    refused(p, "victim.body.tasks");
}
