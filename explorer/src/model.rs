//! The compiled model (xtalk.model.semantics.Compiled) and the storage semantics of
//! xtalk.model.storage, mirrored exactly: the Python explorer and the brute force are the
//! reference, and the tests compare this core with them on generated models.

use serde_json::Value;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's hasher): the memo tables hash small integer keys, where SipHash costs
/// more than the lookup itself.
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_i64(&mut self, x: i64) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Tags owned by one task are owner * TAG_BASE + local index; shared tags are negative.
pub const TAG_BASE: i64 = 1 << 20;

/// One storage component: a cache set or a DRAM bank's row buffer per key.
pub struct Storage {
    pub cache: bool,
    pub ways: usize,
    pub lru: bool,
    pub state_rule: bool,
}

/// Per storage, a sorted sparse map key -> value (cache: tags, most recent first; DRAM: [row]).
pub type Conf = Vec<Vec<(i64, Vec<i64>)>>;

pub struct Model {
    pub n: usize,
    pub nx: usize,
    pub n_epochs: usize,
    pub n_comp: usize,
    pub n_gseg: usize,
    pub epoch_seg: Vec<Vec<i32>>,
    pub mu: Vec<Vec<u32>>,
    pub transport_of: Vec<i32>,
    pub storages: Vec<Storage>,
    /// [task][global segment][request] -> ((storage, key, tag), ...)
    pub chains: Vec<Vec<Vec<Vec<(usize, i64, i64)>>>>,
    pub init_actual: Conf,
    pub init_private: Vec<Conf>,
    pub sym_classes: Vec<Vec<usize>>,
    /// [task][global segment] -> id of the segment's first request (memo keys)
    pub req_base: Vec<Vec<u32>>,
}

impl Model {
    /// Flat index of nb_interferences_comp[g][t] (as Compiled.counter).
    #[inline]
    pub fn counter(&self, t: usize, c: usize, g: usize) -> usize {
        (t * self.n_comp + c) * self.n_gseg + g
    }

    pub fn n_counters(&self) -> usize {
        self.n * self.n_comp * self.n_gseg
    }
}

fn bad(what: &str) -> String {
    format!("model: cannot read {what}")
}

fn ints(v: &Value, what: &str) -> Result<Vec<i64>, String> {
    v.as_array()
        .ok_or_else(|| bad(what))?
        .iter()
        .map(|x| x.as_i64().ok_or_else(|| bad(what)))
        .collect()
}

fn conf(v: &Value) -> Result<Conf, String> {
    let mut out = Vec::new();
    for m in v.as_array().ok_or_else(|| bad("storage state"))? {
        let mut entries = Vec::new();
        for kv in m.as_array().ok_or_else(|| bad("storage state"))? {
            let key = kv[0].as_i64().ok_or_else(|| bad("storage key"))?;
            entries.push((key, ints(&kv[1], "storage value")?));
        }
        entries.sort();
        out.push(entries);
    }
    Ok(out)
}

impl Model {
    /// Read the JSON written by xtalk.model.native.model_json.
    pub fn from_json(v: &Value) -> Result<Model, String> {
        let u = |k: &str| v[k].as_u64().map(|x| x as usize).ok_or_else(|| bad(k));
        let n = u("n_tasks")?;
        let mut epoch_seg = Vec::new();
        let mut mu = Vec::new();
        for t in 0..n {
            epoch_seg.push(ints(&v["epoch_seg"][t], "epoch_seg")?.into_iter().map(|x| x as i32).collect());
            mu.push(ints(&v["mu"][t], "mu")?.into_iter().map(|x| x as u32).collect());
        }
        let mut storages = Vec::new();
        for s in v["storages"].as_array().ok_or_else(|| bad("storages"))? {
            storages.push(Storage {
                cache: s["cache"].as_bool().ok_or_else(|| bad("storages.cache"))?,
                ways: s["ways"].as_u64().unwrap_or(1) as usize,
                lru: s["lru"].as_bool().unwrap_or(true),
                state_rule: s["state_rule"].as_bool().unwrap_or(false),
            });
        }
        let mut chains = Vec::new();
        for t in v["chains"].as_array().ok_or_else(|| bad("chains"))? {
            let mut segs = Vec::new();
            for seg in t.as_array().ok_or_else(|| bad("chains"))? {
                let mut reqs = Vec::new();
                for ch in seg.as_array().ok_or_else(|| bad("chains"))? {
                    let mut steps = Vec::new();
                    for st in ch.as_array().ok_or_else(|| bad("chains"))? {
                        let x = ints(st, "chain step")?;
                        steps.push((x[0] as usize, x[1], x[2]));
                    }
                    reqs.push(steps);
                }
                segs.push(reqs);
            }
            chains.push(segs);
        }
        let mut init_private = Vec::new();
        for p in v["init_private"].as_array().ok_or_else(|| bad("init_private"))? {
            init_private.push(conf(p)?);
        }
        let mut req_base = Vec::new();
        let mut next = 0u32;
        for segs in &chains {
            let mut row = Vec::new();
            for reqs in segs {
                row.push(next);
                next += reqs.len() as u32;
            }
            req_base.push(row);
        }
        let mut sym_classes = Vec::new();
        for c in v["sym_classes"].as_array().ok_or_else(|| bad("sym_classes"))? {
            sym_classes.push(ints(c, "sym_classes")?.into_iter().map(|x| x as usize).collect());
        }
        Ok(Model {
            n,
            nx: u("n_transports")?,
            n_epochs: u("n_epochs")?,
            n_comp: u("n_comp")?,
            n_gseg: u("n_gseg")?,
            epoch_seg,
            mu,
            transport_of: ints(&v["transport_of"], "transport_of")?.into_iter().map(|x| x as i32).collect(),
            storages,
            chains,
            init_actual: conf(&v["init_actual"])?,
            init_private,
            sym_classes,
            req_base,
        })
    }
}

fn get(m: &[(i64, Vec<i64>)], key: i64) -> Option<&Vec<i64>> {
    m.binary_search_by_key(&key, |e| e.0).ok().map(|i| &m[i].1)
}

fn set(m: &mut Vec<(i64, Vec<i64>)>, key: i64, val: Vec<i64>) {
    match m.binary_search_by_key(&key, |e| e.0) {
        Ok(i) => m[i].1 = val,
        Err(i) => m.insert(i, (key, val)),
    }
}

fn lookup(c: &Storage, v: Option<&Vec<i64>>, tag: i64) -> bool {
    match v {
        None => false,
        Some(v) if c.cache => v.contains(&tag),
        Some(v) => v.len() == 1 && v[0] == tag,
    }
}

fn update(c: &Storage, v: Option<&Vec<i64>>, tag: i64) -> Vec<i64> {
    if !c.cache {
        return vec![tag];
    }
    let empty = Vec::new();
    let cur = v.unwrap_or(&empty);
    if !c.lru && cur.contains(&tag) {
        return cur.clone(); // FIFO: a hit does not reorder
    }
    let mut out = Vec::with_capacity(c.ways);
    out.push(tag);
    out.extend(cur.iter().copied().filter(|&x| x != tag));
    out.truncate(c.ways);
    out
}

fn is_interference(c: &Storage, a: Option<&Vec<i64>>, p: Option<&Vec<i64>>, tag: i64) -> bool {
    if c.state_rule {
        if c.cache {
            let e = Vec::new();
            return a.unwrap_or(&e) != p.unwrap_or(&e); // an empty set equals an untouched one
        }
        return a != p;
    }
    lookup(c, p, tag) && !lookup(c, a, tag)
}

/// One request's storage accesses (semantics.access_chain): new actual and private states
/// and the mask of components (transports first) where the access suffered an interference.
pub fn access_chain(m: &Model, actual: &Conf, private: &Conf, chain: &[(usize, i64, i64)]) -> (Conf, Conf, u64) {
    let mut a = actual.clone();
    let mut p = private.clone();
    let mut hits = 0u64;
    for &(s, key, tag) in chain {
        let c = &m.storages[s];
        let av = get(&a[s], key).cloned();
        let pv = get(&p[s], key).cloned();
        if is_interference(c, av.as_ref(), pv.as_ref(), tag) {
            hits |= 1 << (m.nx + s);
        }
        let hit = lookup(c, av.as_ref(), tag);
        set(&mut a[s], key, update(c, av.as_ref(), tag));
        set(&mut p[s], key, update(c, pv.as_ref(), tag));
        if hit {
            break;
        }
    }
    (a, p, hits)
}

/// Interned storage configurations with memoised accesses, renamings and symmetry keys.
/// Configurations are few (hundreds to thousands), so the per-configuration tables are
/// dense vectors indexed by configuration id.
pub struct Store {
    vals: Vec<Conf>,
    ids: FxMap<Conf, u32>,
    access: FxMap<(u32, u32, u32), (u32, u32, u64)>,
    /// per perm id, per configuration: renamed id (u32::MAX: not yet computed)
    rename: Vec<Vec<u32>>,
    /// per configuration * n + task: id of the owner-free form of a private view
    local: Vec<u32>,
    /// per actual configuration * n + task: id of where the task's tags sit in it
    sig: Vec<u32>,
    sig_ids: FxMap<Vec<(u32, i64, u32, i64)>, u32>,
    perms: FxMap<Vec<u8>, u32>,
    pub perm_list: Vec<Vec<u8>>,
    n: usize,
}

fn map_tags(c: &Conf, f: impl Fn(i64) -> i64) -> Conf {
    c.iter()
        .map(|m| m.iter().map(|(k, v)| (*k, v.iter().map(|&x| f(x)).collect())).collect())
        .collect()
}

const UNSET: u32 = u32::MAX;

impl Store {
    pub fn new(n: usize) -> Store {
        Store {
            vals: Vec::new(),
            ids: FxMap::default(),
            access: FxMap::default(),
            rename: Vec::new(),
            local: Vec::new(),
            sig: Vec::new(),
            sig_ids: FxMap::default(),
            perms: FxMap::default(),
            perm_list: Vec::new(),
            n,
        }
    }

    pub fn intern(&mut self, c: Conf) -> u32 {
        if let Some(&i) = self.ids.get(&c) {
            return i;
        }
        let i = self.vals.len() as u32;
        self.ids.insert(c.clone(), i);
        self.vals.push(c);
        i
    }

    /// (new actual id, new private id, interference mask) of task t's request k of segment g.
    #[inline]
    pub fn access(&mut self, m: &Model, actual: u32, private: u32, t: usize, g: usize, k: usize) -> (u32, u32, u64) {
        let key = (actual, private, m.req_base[t][g] + k as u32);
        if let Some(&r) = self.access.get(&key) {
            return r;
        }
        let (a, p, hits) = access_chain(m, &self.vals[actual as usize], &self.vals[private as usize], &m.chains[t][g][k]);
        let r = (self.intern(a), self.intern(p), hits);
        self.access.insert(key, r);
        r
    }

    pub fn perm_id(&mut self, perm: &[u8]) -> u32 {
        if let Some(&i) = self.perms.get(perm) {
            return i;
        }
        let i = self.perm_list.len() as u32;
        self.perms.insert(perm.to_vec(), i);
        self.perm_list.push(perm.to_vec());
        self.rename.push(Vec::new());
        i
    }

    /// Id of configuration i with tag owners renamed by perm (owner t becomes perm[t]).
    #[inline]
    pub fn renamed(&mut self, i: u32, pid: u32) -> u32 {
        if let Some(&r) = self.rename[pid as usize].get(i as usize) {
            if r != UNSET {
                return r;
            }
        }
        let perm = &self.perm_list[pid as usize];
        let c = map_tags(&self.vals[i as usize], |x| {
            if x >= 0 { perm[(x / TAG_BASE) as usize] as i64 * TAG_BASE + x % TAG_BASE } else { x }
        });
        let r = self.intern(c);
        let row = &mut self.rename[pid as usize];
        if row.len() <= i as usize {
            row.resize(i as usize + 1, UNSET);
        }
        row[i as usize] = r;
        r
    }

    /// Id of task t's private view with its own tags made owner-free (a symmetry sort key).
    #[inline]
    pub fn local(&mut self, i: u32, t: usize) -> u32 {
        let at = i as usize * self.n + t;
        if let Some(&r) = self.local.get(at) {
            if r != UNSET {
                return r;
            }
        }
        let mut c = map_tags(&self.vals[i as usize], |x| {
            if x >= 0 && x / TAG_BASE == t as i64 { x % TAG_BASE } else { x }
        });
        // a marker storage keeps local forms apart from real configurations
        c.push(vec![(i64::MIN, Vec::new())]);
        let r = self.intern(c);
        if self.local.len() <= at {
            self.local.resize(at + 1, UNSET);
        }
        self.local[at] = r;
        r
    }

    /// Id of the places (storage, key, position, own tag index) of task t's tags in the
    /// actual configuration i: with the task's own counters and private view it makes the
    /// symmetry sort key complete (tasks with equal keys are interchangeable).
    #[inline]
    pub fn sig(&mut self, i: u32, t: usize) -> u32 {
        let n = self.n;
        if let Some(&r) = self.sig.get(i as usize * n + t) {
            if r != UNSET {
                return r;
            }
        }
        let mut places: Vec<Vec<(u32, i64, u32, i64)>> = vec![Vec::new(); n];
        for (s, m) in self.vals[i as usize].iter().enumerate() {
            for (key, v) in m {
                for (pos, &x) in v.iter().enumerate() {
                    if x >= 0 && ((x / TAG_BASE) as usize) < n {
                        places[(x / TAG_BASE) as usize].push((s as u32, *key, pos as u32, x % TAG_BASE));
                    }
                }
            }
        }
        if self.sig.len() < (i as usize + 1) * n {
            self.sig.resize((i as usize + 1) * n, UNSET);
        }
        for (u, p) in places.into_iter().enumerate() {
            let next = self.sig_ids.len() as u32;
            self.sig[i as usize * n + u] = *self.sig_ids.entry(p).or_insert(next);
        }
        self.sig[i as usize * n + t]
    }

    pub fn configurations(&self) -> usize {
        self.vals.len()
    }

    /// Size of the access memo (distinct (actual, private, request) triples met).
    pub fn accesses(&self) -> usize {
        self.access.len()
    }
}
