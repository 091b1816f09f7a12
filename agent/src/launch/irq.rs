//! Steer device interrupts to the housekeeping CPUs for the run: every IRQ whose affinity
//! the kernel lets us change, journalled and restored afterwards.
use super::journal::Journal;
use crate::observe::machine::cpu_list;
use std::fs;
use std::path::Path;

/// (moved, refused): IRQs steered, and IRQs the kernel would not move (per-CPU timers...).
pub fn steer(cpus: &[usize], journal: &mut Journal) -> (usize, usize) {
    let target = cpu_list(cpus);
    let (mut moved, mut refused) = (0, 0);
    let Ok(dir) = fs::read_dir("/proc/irq") else { return (0, 0) };
    for e in dir.flatten() {
        if !e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let f = e.path().join("smp_affinity_list");
        let current = fs::read_to_string(&f).unwrap_or_default();
        if current.trim() == target {
            continue;
        }
        match journal.write(Path::new(&f), &target) {
            Ok(()) => moved += 1,
            Err(_) => refused += 1,
        }
    }
    (moved, refused)
}
