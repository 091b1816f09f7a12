//! xtalk-explore: the native core of the interference explorer (xtalk.model.native).
//!
//! stdin: {"model": <compiled model>, "max_states": N, "witness_cols": [...]}
//! stdout: {"finals": [...], "explored", "stored", "transitions", "seconds", "memory_kb",
//!          "epoch_states": [...], "limit": bool, "configurations", "accesses", "witnesses": [[col, reached, [[kind, i], ...]], ...]}

mod explore;
mod layer;
mod model;

use serde_json::{json, Value};
use std::io::Read;
use std::time::Instant;

/// Peak resident memory of this process in kB (Linux; 0 elsewhere).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("xtalk-explore: cannot read stdin: {e}");
        std::process::exit(2);
    }
    let req: Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("xtalk-explore: stdin is not JSON: {e}");
            std::process::exit(2);
        }
    };
    let m = match model::Model::from_json(&req["model"]) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("xtalk-explore: {e}");
            std::process::exit(2);
        }
    };
    if m.n > 64 || m.n_comp > 64 {
        eprintln!("xtalk-explore: at most 64 tasks and 64 components");
        std::process::exit(2);
    }
    let max_states = req["max_states"].as_u64().unwrap_or(u64::MAX);
    let wit: Vec<usize> = req["witness_cols"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect())
        .unwrap_or_default();
    let t0 = Instant::now();
    let mut ex = explore::Explorer::new(&m);
    let o = ex.run(max_states, &wit);
    let seconds = t0.elapsed().as_secs_f64();
    let wits: Vec<Value> = o.witnesses.iter().map(|(c, r, steps)| json!([c, r, steps])).collect();
    let out = json!({
        "finals": o.finals,
        "explored": o.explored,
        "stored": o.stored_peak,
        "transitions": o.transitions,
        "seconds": seconds,
        "memory_kb": peak_rss_kb(),
        "table_bytes": o.bytes_peak,
        "configurations": ex.store.configurations(),
        "accesses": ex.store.accesses(),
        "epoch_states": o.epoch_states,
        "limit": o.limit,
        "witnesses": wits,
    });
    println!("{out}");
}
