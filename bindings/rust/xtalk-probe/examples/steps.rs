//! A small periodic program instrumented with xtalk probes: `steps N PERIOD_US` runs N steps,
//! each a probe-1 section of busy work, one every PERIOD_US, and prints how many it ran.
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("steps N PERIOD_US")).collect();
    let (n, period) = (args.first().copied().unwrap_or(50), Duration::from_micros(args.get(1).copied().unwrap_or(2000)));
    let mut sink = 0u64;
    let start = Instant::now();
    for k in 0..n {
        {
            let _step = xtalk_probe::span(1);
            for i in 0..20_000u64 {
                sink = sink.wrapping_mul(31).wrapping_add(i ^ k);
            }
        }
        if let Some(rest) = (start + period * (k as u32 + 1)).checked_duration_since(Instant::now()) {
            std::thread::sleep(rest);
        }
    }
    println!("steps {n} attached {} dropped {} ({sink})", xtalk_probe::attached(), xtalk_probe::dropped());
}
