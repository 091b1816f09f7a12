//! The plan's applications (measured processes beside the victim) are judged like the
//! victim: names well formed and unique, `may_fail` for applications only, and each body,
//! period and count refused with the application's own field named.

use crate::plan::{parse, PlanError};
use serde_json::{json, Value};

fn base() -> Value {
    json!({
        "version": 1, "run_id": "apps", "timeout_s": 30.0, "settle_ms": 10.0,
        "victim": {"body": {"kind": "sum", "bytes": 65536}, "period_ns": 1_000_000, "jobs": 10},
        "applications": [
            {"name": "b", "body": {"kind": "pi", "iterations": 1000}, "period_ns": 2_000_000, "jobs": 5},
            {"name": "c", "may_fail": true, "body": {"kind": "sum", "bytes": 4096}, "period_ns": 1_000_000, "jobs": 5},
        ],
    })
}

fn judged(plan: &Value) -> Result<(), PlanError> {
    let p = parse(&plan.to_string())?;
    super::check(&p)
}

/// The plan is refused and the error names `field`, with `hint` in its message.
fn refused(plan: Value, field: &str, hint: &str) {
    let e = judged(&plan).expect_err(&format!("{field} should be refused"));
    assert_eq!(e.field, field, "{e}");
    assert!(e.message.contains(hint), "{e}");
}

#[test]
fn a_plan_with_applications_is_accepted_and_written_back() {
    judged(&base()).unwrap();
    let p = parse(&base().to_string()).unwrap();
    assert_eq!(p.measured().map(|v| v.name()).collect::<Vec<_>>(), ["victim", "b", "c"]);
    assert!(p.applications[1].may_fail && !p.applications[0].may_fail);
    let back = serde_json::to_value(&p).unwrap();
    assert_eq!((&back["applications"][0]["name"], &back["applications"][1]["may_fail"]), (&json!("b"), &json!(true)));
    assert!(back["applications"][0].get("may_fail").is_none(), "may_fail = false is left out");
    // A plan without applications writes back without the new keys (old run.json files).
    let mut solo = base();
    solo.as_object_mut().unwrap().remove("applications");
    let back = serde_json::to_value(parse(&solo.to_string()).unwrap()).unwrap();
    assert!(back.get("applications").is_none() && back["victim"].get("name").is_none() && back["victim"].get("may_fail").is_none());
}

#[test]
fn the_run_lasts_as_long_as_its_longest_measured_process() {
    let p = parse(&base().to_string()).unwrap();
    // victim 10 x 1 ms, b 5 x 2 ms, c 5 x 1 ms: 10 ms, plus 10 ms settle.
    assert!((p.run_seconds() - 0.020).abs() < 1e-9, "{}", p.run_seconds());
    let mut long = base();
    long["applications"][0]["jobs"] = json!(20_000); // 40 s, past timeout_s = 30
    refused(long, "timeout_s", "shorter than the run");
}

#[test]
fn duplicate_names_are_refused() {
    let mut p = base();
    p["applications"][1]["name"] = json!("b");
    refused(p, "applications[1].name", "used twice");
    let mut p = base();
    p["applications"][0]["name"] = json!("victim");
    refused(p, "applications[0].name", "used twice");
    let mut p = base();
    p["victim"]["name"] = json!("c");
    refused(p, "applications[1].name", "used twice");
}

#[test]
fn bad_names_and_a_missing_name_are_refused() {
    for bad in ["", "a/b", "..", "x y", &"n".repeat(65)] {
        let mut p = base();
        p["applications"][0]["name"] = json!(bad);
        refused(p, "applications[0].name", "not a name");
    }
    let mut p = base();
    p["victim"]["name"] = json!("a/b");
    refused(p, "victim.name", "not a name");
    let mut p = base();
    p["applications"][0].as_object_mut().unwrap().remove("name");
    refused(p, "applications[0].name", "required");
}

#[test]
fn may_fail_is_for_applications_only() {
    let mut p = base();
    p["victim"]["may_fail"] = json!(true);
    refused(p, "victim.may_fail", "only applications");
}

#[test]
fn an_application_with_a_bad_body_or_count_is_refused_with_its_own_field() {
    let mut p = base();
    p["applications"][1]["body"] = json!({"kind": "sum", "bytes": 1});
    refused(p, "applications[1].body.bytes", "at least 8");
    let mut p = base();
    p["applications"][0]["jobs"] = json!(0);
    refused(p, "applications[0].jobs", "at least 1");
    let mut p = base();
    p["applications"][0]["period_ns"] = json!(10);
    refused(p, "applications[0].period_ns", "at least 10000");
    let mut p = base();
    p["applications"][0]["body"] = json!({"kind": "command", "argv": ["/no/such/program"]});
    p["applications"][0]["jobs"] = json!(1);
    refused(p, "applications[0].body.argv[0]", "not an executable");
    let mut p = base();
    p["applications"][0]["placement"] = json!({"cpus": [4096]});
    refused(p, "applications[0].placement.cpus[0]", "does not exist");
    let mut p = base();
    p["applications"][0]["group"] = json!("nowhere");
    refused(p, "applications[0].group", "no group named");
    let mut p = base();
    p["applications"][0]["jobs"] = json!(crate::plan::MAX_JOBS + 1);
    refused(p, "applications[0].jobs", "above the limit");
    let mut p = base();
    p["applications"][0]["bogus"] = json!(1);
    let e = judged(&p).unwrap_err();
    assert!(e.field.starts_with("applications[0]") && e.message.contains("bogus"), "{e}");
}

#[test]
fn more_applications_than_the_control_block_holds_are_refused() {
    let mut p = base();
    let one = p["applications"][0].clone();
    p["applications"] = (0..=crate::plan::MAX_APPLICATIONS).map(|i| {
        let mut a = one.clone();
        a["name"] = json!(format!("a{i}"));
        a
    }).collect();
    refused(p, "applications", "at most");
}
