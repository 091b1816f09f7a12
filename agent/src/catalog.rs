//! The agent's catalog: every enemy kind and victim body with its declared parameters, and the plan's
//! limits, as JSON (`xtalk-agent catalog --json`). The host validates experiment files,
//! fills defaults and writes the plan's JSON Schema and docs/enemies.md's parameter tables
//! from it; src/xtalk/schema/catalog.json is this output checked in.

use serde_json::{json, Value};

/// Bumped when the catalog's own layout changes (not when a kind is added).
pub const CATALOG_VERSION: u32 = 1;

/// The whole catalog.
pub fn catalog() -> Value {
    json!({
        "version": CATALOG_VERSION,
        "plan_version": crate::plan::PLAN_VERSION,
        "limits": limits(),
        "enemies": crate::enemies::KINDS.iter().map(|k| k.to_json()).collect::<Vec<_>>(),
        "bodies": crate::victims::BODIES.iter().map(|b| b.to_json()).collect::<Vec<_>>(),
    })
}

/// The bounds a plan must keep that the host also checks before it writes a plan.
fn limits() -> Value {
    use crate::bounds::*;
    json!({
        "max_jobs": MAX_JOBS,
        "max_enemies": crate::launch::shm::MAX_ENEMIES,
        "max_period_ns": MAX_PERIOD_NS,
        "max_run_s": MAX_RUN_S,
        "max_timeout_s": MAX_TIMEOUT_S,
        "max_pids": MAX_PIDS,
        "max_run_id": MAX_RUN_ID,
        "max_chains": crate::enemies::MAX_CHAINS,
        "max_functions": crate::enemies::MAX_FUNCTIONS,
        "max_tasks": crate::check::MAX_TASKS,
    })
}

#[cfg(test)]
mod tests {
    use crate::enemies::{kind::Dflt, KINDS};

    #[test]
    fn kinds_are_unique_and_well_declared() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(KINDS[..i].iter().all(|o| o.name != k.name), "{} registered twice", k.name);
            assert!(!k.doc.is_empty() && !k.unit.is_empty(), "{}: doc and unit", k.name);
            for p in k.params {
                assert!(!p.doc.is_empty(), "{}.{}: doc", k.name, p.name);
                if let Some(d) = p.per_bytes {
                    assert!(k.param(d).is_some(), "{}.{}: per_bytes names '{d}'", k.name, p.name);
                }
                if let Some(o) = p.at_most {
                    assert!(k.param(o).is_some(), "{}.{}: at_most names '{o}'", k.name, p.name);
                }
                if let (Some(lo), Dflt::U64(d)) = (p.min, p.default) {
                    assert!(d >= lo && p.max.map_or(true, |hi| d <= hi), "{}.{}: default outside its bounds", k.name, p.name);
                }
            }
            for f in k.footprint.params {
                assert!(k.param(f).is_some(), "{}: footprint names '{f}'", k.name);
            }
        }
    }
}

#[cfg(test)]
mod body_tests {
    use crate::enemies::kind::Dflt;
    use crate::victims::BODIES;

    #[test]
    fn bodies_are_unique_and_well_declared() {
        for (i, b) in BODIES.iter().enumerate() {
            assert!(BODIES[..i].iter().all(|o| o.name != b.name), "{} registered twice", b.name);
            assert!(!b.doc.is_empty() && !b.sections.is_empty(), "{}: doc and sections", b.name);
            for p in b.params {
                assert!(!p.doc.is_empty(), "{}.{}: doc", b.name, p.name);
                if let (Some(lo), Dflt::U64(d)) = (p.min, p.default) {
                    assert!(d >= lo && p.max.map_or(true, |hi| d <= hi), "{}.{}: default outside its bounds", b.name, p.name);
                }
            }
            for f in b.footprint.params.iter().chain(b.work.iter()).chain(b.probes.iter()) {
                assert!(b.param(f).is_some(), "{}: names '{f}', which it does not declare", b.name);
            }
        }
    }
}
