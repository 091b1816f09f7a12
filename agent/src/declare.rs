//! The declaration vocabulary an enemy kind (enemies/kind.rs) and a victim body
//! (victims/body.rs) share: a parameter's type, bounds, default, unit and doc; a memory
//! footprint; the plan's values read through a declaration (`Values`), checked against it
//! (`check_values`) and printed for the catalog (`param_json`).

use crate::plan::{err, PlanError};
use serde_json::{json, Map, Value};

/// The JSON type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    U64,
    Bool,
    Str,
    /// A list of strings (argv).
    Strings,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// A structured value (a list of tasks, a map of names) whose shape the word names; the
    /// declaring file checks it itself (victim bodies: taskset's `tasks`, command's `env`).
    Json(&'static str),
}

/// A parameter's default in the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dflt {
    /// The plan must give it.
    Required,
    /// Absent means "not set" (an optional string).
    Unset,
    U64(u64),
    Bool(bool),
    Str(&'static str),
}

/// One parameter of a kind.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub ty: Ty,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub multiple_of: Option<u64>,
    pub default: Dflt,
    /// "bytes", "ns" or a count's name; the host reads a "bytes" value as a size expression
    /// and a "ns" value `X_ns` as a duration written `X`.
    pub unit: &'static str,
    pub doc: &'static str,
    /// What an experiment file gets when it leaves the parameter out (a size or duration
    /// expression the host resolves against the target), where that differs from `default`.
    pub file_default: Option<&'static str>,
    /// A count the file may give as `bytes` instead: the count is bytes / this parameter.
    pub per_bytes: Option<&'static str>,
    /// Another count parameter this one may not exceed (chase's `chains`: at most one walker
    /// per node); the kind's check refuses more, and `xtalk worst` draws within it.
    pub at_most: Option<&'static str>,
    /// The architectures (`std::env::consts::ARCH` names) on which a choice exists, for the
    /// choices that exist only on some (the store methods: `stnp` on aarch64, `nt64` on
    /// x86_64); a choice not listed exists everywhere. The catalog prints it as
    /// `choice_arch`, and `xtalk worst` draws only the choices of the machine it runs on.
    pub arch: &'static [(&'static str, &'static [&'static str])],
}

impl Param {
    const fn new(name: &'static str, ty: Ty, doc: &'static str) -> Param {
        Param { name, ty, min: None, max: None, multiple_of: None, default: Dflt::Required, unit: "", doc, file_default: None, per_bytes: None, at_most: None, arch: &[] }
    }
    /// An unsigned integer.
    pub const fn u64(name: &'static str, doc: &'static str) -> Param {
        Param::new(name, Ty::U64, doc)
    }
    pub const fn bool(name: &'static str, doc: &'static str) -> Param {
        Param::new(name, Ty::Bool, doc).default(Dflt::Bool(false))
    }
    pub const fn str(name: &'static str, doc: &'static str) -> Param {
        Param::new(name, Ty::Str, doc)
    }
    pub const fn strings(name: &'static str, doc: &'static str) -> Param {
        Param::new(name, Ty::Strings, doc)
    }
    pub const fn json(name: &'static str, shape: &'static str, doc: &'static str) -> Param {
        Param::new(name, Ty::Json(shape), doc).default(Dflt::Unset)
    }
    pub const fn choice(name: &'static str, words: &'static [&'static str], doc: &'static str) -> Param {
        Param::new(name, Ty::Choice(words), doc)
    }
    pub const fn min(self, v: u64) -> Param {
        Param { min: Some(v), ..self }
    }
    pub const fn max(self, v: u64) -> Param {
        Param { max: Some(v), ..self }
    }
    pub const fn range(self, lo: u64, hi: u64) -> Param {
        self.min(lo).max(hi)
    }
    pub const fn multiple_of(self, v: u64) -> Param {
        Param { multiple_of: Some(v), ..self }
    }
    pub const fn default(self, d: Dflt) -> Param {
        Param { default: d, ..self }
    }
    pub const fn unit(self, u: &'static str) -> Param {
        Param { unit: u, ..self }
    }
    pub const fn file_default(self, expr: &'static str) -> Param {
        Param { file_default: Some(expr), ..self }
    }
    pub const fn per_bytes(self, divisor: &'static str) -> Param {
        Param { per_bytes: Some(divisor), ..self }
    }
    pub const fn at_most(self, other: &'static str) -> Param {
        Param { at_most: Some(other), ..self }
    }
    pub const fn arch(self, table: &'static [(&'static str, &'static [&'static str])]) -> Param {
        Param { arch: table, ..self }
    }
}

/// Memory an enemy allocates: `factor` × the product of the named parameters.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub factor: u64,
    pub params: &'static [&'static str],
}

/// A parameter's entry in the catalog (enemies' and victim bodies' alike).
pub fn param_json(p: &Param) -> Value {
    let (ty, choices, shape) = match p.ty {
        Ty::U64 => ("u64", None, None),
        Ty::Bool => ("bool", None, None),
        Ty::Str => ("str", None, None),
        Ty::Strings => ("strings", None, None),
        Ty::Choice(w) => ("choice", Some(w), None),
        Ty::Json(shape) => ("json", None, Some(shape)),
    };
    let default = match p.default {
        Dflt::Required | Dflt::Unset => Value::Null,
        Dflt::U64(v) => json!(v),
        Dflt::Bool(v) => json!(v),
        Dflt::Str(v) => json!(v),
    };
    json!({
        "name": p.name, "type": ty, "choices": choices, "shape": shape,
        "min": p.min, "max": p.max, "multiple_of": p.multiple_of,
        "required": p.default == Dflt::Required, "default": default,
        "unit": p.unit, "doc": p.doc,
        "file_default": p.file_default, "per_bytes": p.per_bytes, "at_most": p.at_most,
        "choice_arch": if p.arch.is_empty() { Value::Null } else {
            Value::Object(p.arch.iter().map(|(c, a)| (c.to_string(), json!(a))).collect::<Map<String, Value>>())
        },
    })
}

/// Parameters seen through their declaration: what the plan gives, else the default. An
/// enemy's load and a victim's body read theirs through it.
pub struct Values<'a> {
    /// Who declares them ("enemy 'read'", "body 'chase'"), for the panic of an undeclared read.
    pub owner: &'static str,
    pub params: &'static [Param],
    map: &'a Map<String, Value>,
}

impl<'a> Values<'a> {
    pub fn new(owner: &'static str, params: &'static [Param], map: &'a Map<String, Value>) -> Values<'a> {
        Values { owner, params, map }
    }
    fn value(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.map.get(name).filter(|v| !v.is_null()) {
            return Some(v.clone());
        }
        let p = self.params.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{} reads '{name}', which it does not declare", self.owner));
        match p.default {
            Dflt::Required | Dflt::Unset => None,
            Dflt::U64(v) => Some(json!(v)),
            Dflt::Bool(v) => Some(json!(v)),
            Dflt::Str(v) => Some(json!(v)),
        }
    }
    /// An integer parameter (checked, so present).
    pub fn u64(&self, name: &str) -> u64 {
        self.value(name).and_then(|v| v.as_u64()).unwrap_or_default()
    }
    /// An integer parameter that may be unset.
    pub fn opt_u64(&self, name: &str) -> Option<u64> {
        self.value(name).and_then(|v| v.as_u64())
    }
    pub fn bool(&self, name: &str) -> bool {
        self.value(name).and_then(|v| v.as_bool()).unwrap_or(false)
    }
    /// A string parameter, None when unset.
    pub fn opt_str(&self, name: &str) -> Option<String> {
        self.value(name).and_then(|v| v.as_str().map(String::from))
    }
    pub fn str(&self, name: &str) -> String {
        self.opt_str(name).unwrap_or_default()
    }
    pub fn strings(&self, name: &str) -> Vec<String> {
        self.value(name).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
    }
    /// A structured (`json`) parameter as the type its file reads it into; Err names the
    /// problem, None when it is unset.
    pub fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, String> {
        self.value(name).map(|v| serde_json::from_value(v).map_err(|e| e.to_string())).transpose()
    }
    /// Bytes the declared footprint makes: `factor` × the named parameters.
    pub fn footprint(&self, f: Footprint) -> u64 {
        f.params.iter().fold(f.factor, |acc, p| acc.saturating_mul(self.u64(p)))
    }
}

/// Every key of `map` is one of `params`, has its type and lies in its bounds; every required
/// one is there. `noun` and `name` say whose ("enemy 'read'", "body 'chase'"); `at` is the
/// field holding them.
pub fn check_values(noun: &str, name: &str, params: &[Param], map: &Map<String, Value>, at: &str) -> Result<(), PlanError> {
    let f = |k: &str| format!("{at}.{k}");
    let names = || params.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    for key in map.keys() {
        if !params.iter().any(|p| p.name == key) {
            let known = if params.is_empty() { "it takes none".to_string() } else { format!("its parameters: {}", names()) };
            return err(f(key), format!("is not a parameter of {noun} '{name}' ({known}); remove it"));
        }
    }
    for p in params {
        let v = map.get(p.name).filter(|v| !v.is_null());
        let Some(v) = v else {
            if p.default == Dflt::Required {
                return err(f(p.name), format!("is required for {noun} '{name}' ({}); add it", p.doc));
            }
            continue;
        };
        let bad_type = |what: &str| err(f(p.name), format!("{v} is not {what}; change it"));
        match p.ty {
            Ty::U64 => {
                let Some(n) = v.as_u64() else { return bad_type("a non-negative integer") };
                let unit = if p.unit.is_empty() { String::new() } else { format!(" {}", p.unit) };
                let (below, above) = (p.min.is_some_and(|lo| n < lo), p.max.is_some_and(|hi| n > hi));
                match (p.min, p.max) {
                    (Some(lo), Some(hi)) if below || above => {
                        return err(f(p.name), format!("{n} is out of range; use between {lo} and {hi}{unit} ({})", p.doc));
                    }
                    (Some(lo), _) if below => return err(f(p.name), format!("{n} is too small; use at least {lo}{unit} ({})", p.doc)),
                    (_, Some(hi)) if above => return err(f(p.name), format!("{n} is too large; use at most {hi}{unit} ({})", p.doc)),
                    _ => {}
                }
                if let Some(m) = p.multiple_of.filter(|m| n % m != 0) {
                    return err(f(p.name), format!("{n} is not a multiple of {m}; use a multiple of {m}"));
                }
            }
            Ty::Bool if !v.is_boolean() => return bad_type("true or false"),
            Ty::Str => match v.as_str() {
                None => return bad_type("a string"),
                Some(s) if s.is_empty() => return err(f(p.name), "must not be empty"),
                Some(_) => {}
            },
            Ty::Strings if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => return bad_type("a list of strings"),
            Ty::Choice(words) if !v.as_str().is_some_and(|s| words.contains(&s)) => {
                return err(f(p.name), format!("{v} is not one of {}; change it", words.join(", ")));
            }
            _ => {}
        }
    }
    Ok(())
}
