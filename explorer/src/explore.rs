//! Layered exploration of the interleavings (the algorithm of xtalk.model.explorer).
//!
//! Every transition raises the potential (epoch, 2*issued - outstanding), so the state
//! graph is a DAG whose layers are processed in potential order; the maximum of every
//! counter is a longest path. A layer is dropped once expanded (its successors all lie in
//! later layers), so only the live layers are in memory unless witnesses are asked for.
//! Symmetry: states are mapped to a representative exactly as explorer._Symmetry does.

use crate::layer::{hash, Layer};
use crate::model::{Model, Store};
use std::collections::BTreeMap;

const NONE: u32 = u32::MAX;

/// Successors of one state, flat.
pub struct Succ {
    pub states: Vec<u32>,
    pub events: Vec<(u8, u32)>, // (0 issue task | 1 complete transport | 2 advance, index)
    pub dstart: Vec<usize>,
    pub deltas: Vec<(u32, u16)>,
}

pub struct Explorer<'a> {
    pub m: &'a Model,
    pub store: Store,
    pub w: usize,
    iss: usize,
    bus: usize,
    act: usize,
    prv: usize,
    /// per perm id: new_vector[j] = old_vector[idx[j]]
    perm_idx: Vec<Vec<u32>>,
    old: Vec<u32>,
    keys: Vec<(u32, u32, u32, u32, usize)>,
    perm: Vec<u8>,
}

pub struct Outcome {
    pub finals: Vec<u16>,
    pub explored: u64,
    pub stored_peak: u64,
    pub transitions: u64,
    pub epoch_states: Vec<u64>,
    pub limit: bool,
    pub bytes_peak: usize,
    pub witnesses: Vec<(usize, usize, Vec<(u8, u32)>)>,
}

impl<'a> Explorer<'a> {
    pub fn new(m: &'a Model) -> Explorer<'a> {
        let (n, nx) = (m.n, m.nx);
        let iss = 1;
        let bus = iss + n;
        let act = bus + nx * n;
        let prv = act + 1;
        Explorer {
            m,
            store: Store::new(n),
            w: prv + n,
            iss,
            bus,
            act,
            prv,
            perm_idx: Vec::new(),
            old: Vec::new(),
            keys: Vec::new(),
            perm: Vec::new(),
        }
    }

    pub fn initial(&mut self) -> Vec<u32> {
        let mut s = vec![0u32; self.w];
        for x in 0..self.m.nx * self.m.n {
            s[self.bus + x] = NONE;
        }
        s[self.act] = self.store.intern(self.m.init_actual.clone());
        for t in 0..self.m.n {
            s[self.prv + t] = self.store.intern(self.m.init_private[t].clone());
        }
        s
    }

    fn potential(&self, s: &[u32]) -> (u32, u32) {
        let n = self.m.n;
        let issued: u32 = s[self.iss..self.iss + n].iter().sum();
        let out = s[self.bus..self.act].iter().filter(|&&x| x != NONE).count() as u32;
        (s[0], 2 * issued - out)
    }

    /// Enabled transitions of s (explorer.successors).
    pub fn successors(&mut self, s: &[u32], out: &mut Succ) {
        out.states.clear();
        out.events.clear();
        out.dstart.clear();
        out.deltas.clear();
        let m = self.m;
        let (n, w) = (m.n, self.w);
        let epoch = s[0] as usize;
        if epoch >= m.n_epochs {
            return;
        }
        let mut outstanding = 0u64;
        for &x in &s[self.bus..self.act] {
            if x != NONE {
                outstanding |= 1 << x;
            }
        }
        for t in 0..n {
            let g = m.epoch_seg[t][epoch];
            if g < 0 || outstanding & (1 << t) != 0 {
                continue;
            }
            let g = g as usize;
            let k = s[self.iss + t];
            if k >= m.mu[t][g] {
                continue;
            }
            let base = out.states.len();
            out.states.extend_from_slice(s);
            out.states[base + self.iss + t] = k + 1;
            out.events.push((0, t as u32));
            out.dstart.push(out.deltas.len());
            let x = m.transport_of[t];
            if x < 0 {
                let (a2, p2, hits) = self.store.access(m, s[self.act], s[self.prv + t], t, g, k as usize);
                out.states[base + self.act] = a2;
                out.states[base + self.prv + t] = p2;
                push_hits(m, t, g, hits, &mut out.deltas);
                continue;
            }
            let slot = self.bus + x as usize * n;
            let qlen = s[slot..slot + n].iter().take_while(|&&v| v != NONE).count();
            out.states[base + slot + qlen] = t as u32;
            if qlen > 0 {
                out.deltas.push((m.counter(t, x as usize, g) as u32, qlen as u16));
            }
        }
        for x in 0..m.nx {
            let slot = self.bus + x * n;
            let h = s[slot];
            if h == NONE {
                continue;
            }
            let h = h as usize;
            let g = m.epoch_seg[h][epoch] as usize;
            let (a2, p2, hits) = self.store.access(m, s[self.act], s[self.prv + h], h, g, s[self.iss + h] as usize - 1);
            let base = out.states.len();
            out.states.extend_from_slice(s);
            out.states[base + self.act] = a2;
            out.states[base + self.prv + h] = p2;
            // the queue moves up one place
            for i in 0..n {
                out.states[base + slot + i] = if i + 1 < n { s[slot + i + 1] } else { NONE };
            }
            out.events.push((1, x as u32));
            out.dstart.push(out.deltas.len());
            push_hits(m, h, g, hits, &mut out.deltas);
        }
        if outstanding == 0 {
            let e2 = epoch + 1;
            let base = out.states.len();
            out.states.extend_from_slice(s);
            out.states[base] = e2 as u32;
            for t in 0..n {
                let keep = e2 < m.n_epochs && m.epoch_seg[t][e2] == m.epoch_seg[t][epoch];
                if !keep {
                    out.states[base + self.iss + t] = 0;
                }
            }
            out.events.push((2, 0));
            out.dstart.push(out.deltas.len());
        }
        debug_assert_eq!(out.states.len(), out.events.len() * w);
        out.dstart.push(out.deltas.len());
    }

    /// Rewrite s into its class representative; the perm id when it changed.
    ///
    /// Tasks of a class are sorted by (issued, role on the transport, private view without
    /// owners, places of their tags in the actual state). Tasks with equal keys are
    /// interchangeable (swapping them gives the same state), so the representative of an
    /// orbit is unique: the reduction merges every symmetric state.
    pub fn canonical(&mut self, s: &mut [u32]) -> Option<u32> {
        let m = self.m;
        if m.sym_classes.is_empty() {
            return None;
        }
        let n = m.n;
        let mut role = [0u32; 64];
        for x in 0..m.nx {
            for i in 0..n {
                let t = s[self.bus + x * n + i];
                if t != NONE {
                    role[t as usize] = 1 + i as u32;
                }
            }
        }
        let mut moved = false;
        let actual = s[self.act];
        for cls in &m.sym_classes {
            self.keys.clear();
            for &t in cls {
                let lid = self.store.local(s[self.prv + t], t);
                let sig = self.store.sig(actual, t);
                self.keys.push((s[self.iss + t], role[t], lid, sig, t));
            }
            self.keys.sort_unstable();
            if self.keys.iter().zip(cls).any(|(k, &t)| k.4 != t) {
                if !moved {
                    moved = true;
                    self.perm.clear();
                    self.perm.extend(0..n as u8);
                }
                for (k, &new_pos) in self.keys.iter().zip(cls) {
                    self.perm[k.4] = new_pos as u8;
                }
            }
        }
        if !moved {
            return None;
        }
        let pid = self.store.perm_id(&self.perm);
        self.old.clear();
        self.old.extend_from_slice(s);
        for t in 0..n {
            let nt = self.perm[t] as usize;
            s[self.iss + nt] = self.old[self.iss + t];
            s[self.prv + nt] = self.store.renamed(self.old[self.prv + t], pid);
        }
        for i in self.bus..self.act {
            if self.old[i] != NONE {
                s[i] = self.perm[self.old[i] as usize] as u32;
            }
        }
        s[self.act] = self.store.renamed(actual, pid);
        Some(pid)
    }

    /// Counter layout of each epoch: the counters a state carries there. Without
    /// witnesses only the counters of the segments active in the epoch are carried; a
    /// counter whose segment ends is retired into the final maxima on the `advance`
    /// transition (nothing can raise it afterwards, and every state reaches the end).
    /// The witness columns are carried in every epoch to the end, for the predecessor links.
    fn layouts(&self, wit_cols: &[usize]) -> Vec<Vec<u32>> {
        let m = self.m;
        (0..=m.n_epochs)
            .map(|e| {
                let mut cols: Vec<u32> = wit_cols.iter().map(|&c| c as u32).collect();
                if e < m.n_epochs {
                    for t in 0..m.n {
                        let g = m.epoch_seg[t][e];
                        if g >= 0 {
                            for c in 0..m.n_comp {
                                cols.push(m.counter(t, c, g as usize) as u32);
                            }
                        }
                    }
                }
                cols.sort_unstable();
                cols.dedup();
                cols
            })
            .collect()
    }

    /// new_vector[j] = old_vector[idx[j]] in `layout` after renaming tasks by perm `pid`.
    fn perm_index(&mut self, pid: u32, e: usize, layout: &[u32], pos: &[u32]) -> &Vec<u32> {
        let m = self.m;
        let key = pid as usize * (m.n_epochs + 1) + e;
        if self.perm_idx.len() <= key {
            self.perm_idx.resize(key + 1, Vec::new());
        }
        if self.perm_idx[key].is_empty() && !layout.is_empty() {
            let p = &self.store.perm_list[pid as usize];
            let mut inv = vec![0usize; m.n];
            for t in 0..m.n {
                inv[p[t] as usize] = t;
            }
            let per_task = m.n_comp * m.n_gseg;
            self.perm_idx[key] = layout
                .iter()
                .map(|&cnt| {
                    let cnt = cnt as usize;
                    let (t2, rest) = (cnt / per_task, cnt % per_task);
                    pos[inv[t2] * per_task + rest]
                })
                .collect();
        }
        &self.perm_idx[key]
    }

    /// Explore everything (or stop beyond `max_states` states, with `limit` set).
    pub fn run(&mut self, max_states: u64, wit_cols: &[usize]) -> Outcome {
        let m = self.m;
        let n_c = m.n_counters();
        let nw = wit_cols.len();
        let keep = nw > 0;
        let layout = self.layouts(wit_cols);
        let pos: Vec<Vec<u32>> = layout
            .iter()
            .map(|l| {
                let mut p = vec![NONE; n_c];
                for (j, &c) in l.iter().enumerate() {
                    p[c as usize] = j as u32;
                }
                p
            })
            .collect();
        let mut layers: Vec<Option<Layer>> = Vec::new();
        let mut queue: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let mut init = self.initial();
        self.canonical(&mut init);
        let mut first = Layer::new(self.w);
        first.insert(&init);
        first.best.resize(layout[0].len(), 0);
        first.pred.resize(nw, u32::MAX);
        // witness mode: global state id -> (layer, index), so that links take 4 bytes
        let mut place: Vec<(u32, u32)> = Vec::new();
        if keep {
            first.ids.push(0);
            place.push((0, 0));
        }
        queue.insert(self.potential(&init), 0);
        layers.push(Some(first));
        let mut o = Outcome {
            finals: vec![0; n_c],
            explored: 1,
            stored_peak: 1,
            transitions: 0,
            epoch_states: vec![0; m.n_epochs + 1],
            limit: false,
            bytes_peak: 0,
            witnesses: Vec::new(),
        };
        let mut arg: Vec<(usize, usize)> = vec![(0, 0); n_c];
        let mut live: u64 = 1;
        let mut succ = Succ { states: Vec::new(), events: Vec::new(), dstart: Vec::new(), deltas: Vec::new() };
        // positions of the witness columns in each epoch's layout
        let wpos: Vec<Vec<usize>> = pos.iter().map(|p| wit_cols.iter().map(|&c| p[c] as usize).collect()).collect();
        let mut cand = vec![0u16; n_c];
        let mut moved = vec![0u16; n_c];
        let mut next = vec![0u32; self.w];
        // the few layers a layer's successors fall in: (potential, layer) looked up once
        let mut targets: Vec<((u32, u32), usize)> = Vec::with_capacity(8);
        while let Some((&pot, &seq)) = queue.iter().next() {
            queue.remove(&pot);
            let mut cur = layers[seq].take().expect("layer expanded twice");
            let epoch = pot.0 as usize;
            o.epoch_states[epoch.min(m.n_epochs)] += cur.len() as u64;
            let we = layout[epoch.min(m.n_epochs)].len();
            if epoch >= m.n_epochs {
                // terminal states: what is still carried is retired here
                for i in 0..cur.len() {
                    for (j, &c) in layout[m.n_epochs].iter().enumerate() {
                        let v = cur.best[i * we + j];
                        if v > o.finals[c as usize] {
                            o.finals[c as usize] = v;
                            arg[c as usize] = (seq, i);
                        }
                    }
                }
            } else {
                let e2 = epoch + 1;
                let w2 = layout[e2].len();
                for i in 0..cur.len() {
                    self.successors(cur.state(i), &mut succ);
                    for e in 0..succ.events.len() {
                        o.transitions += 1;
                        next.copy_from_slice(&succ.states[e * self.w..(e + 1) * self.w]);
                        cand[..we].copy_from_slice(&cur.best[i * we..(i + 1) * we]);
                        for &(c, k) in &succ.deltas[succ.dstart[e]..succ.dstart[e + 1]] {
                            cand[pos[epoch][c as usize] as usize] += k;
                        }
                        let mut te = epoch;
                        if succ.events[e].0 == 2 {
                            // advance: retire the counters whose segment ends, carry the others
                            te = e2;
                            moved[..w2].fill(0);
                            for (j, &c) in layout[epoch].iter().enumerate() {
                                let tp = pos[e2][c as usize];
                                if tp == NONE {
                                    if cand[j] > o.finals[c as usize] {
                                        o.finals[c as usize] = cand[j];
                                    }
                                } else {
                                    moved[tp as usize] = cand[j];
                                }
                            }
                            cand[..w2].copy_from_slice(&moved[..w2]);
                        }
                        let wt = layout[te].len();
                        // the potential does not depend on task names: the layer is known first
                        let p = match succ.events[e].0 {
                            0 if m.transport_of[succ.events[e].1 as usize] < 0 => (pot.0, pot.1 + 2),
                            0 | 1 => (pot.0, pot.1 + 1),
                            _ => self.potential(&next),
                        };
                        let tseq = match targets.iter().find(|x| x.0 == p) {
                            Some(&(_, ls)) => ls,
                            None => {
                                let ls = *queue.entry(p).or_insert_with(|| {
                                    layers.push(Some(Layer::new(self.w)));
                                    layers.len() - 1
                                });
                                targets.push((p, ls));
                                ls
                            }
                        };
                        // only representatives are stored and they are their own
                        // representative, so a successor found as it is needs no renaming
                        let h = hash(&next);
                        let known = layers[tseq].as_ref().expect("target layer is live").find(&next, h);
                        let mut renamed = false;
                        if known.is_none() {
                            if let Some(pid) = self.canonical(&mut next) {
                                renamed = true;
                                let idx = self.perm_index(pid, te, &layout[te], &pos[te]);
                                for j in 0..wt {
                                    moved[j] = cand[idx[j] as usize];
                                }
                                cand[..wt].copy_from_slice(&moved[..wt]);
                            }
                        }
                        let target = &cand[..wt];
                        let tl = layers[tseq].as_mut().expect("target layer is live");
                        let (j, new) = match known {
                            Some(j) => (j, false),
                            None if renamed => tl.insert(&next),
                            None => (tl.push_absent(&next, h), true),
                        };
                        if new {
                            o.explored += 1;
                            live += 1;
                            tl.best.extend_from_slice(target);
                            if keep {
                                tl.pred.extend(std::iter::repeat(cur.ids[i]).take(nw));
                                tl.ids.push(place.len() as u32);
                                place.push((tseq as u32, j as u32));
                            }
                            if o.explored > max_states {
                                o.limit = true;
                                return o;
                            }
                        } else {
                            let b = &mut tl.best[j * wt..(j + 1) * wt];
                            for (k, &c) in wpos[te].iter().enumerate() {
                                if target[c] > b[c] {
                                    tl.pred[j * nw + k] = cur.ids[i];
                                }
                            }
                            for (x, &y) in b.iter_mut().zip(target) {
                                if y > *x {
                                    *x = y;
                                }
                            }
                        }
                    }
                }
                o.stored_peak = o.stored_peak.max(live);
                let bytes: usize = layers.iter().flatten().map(|l| l.bytes()).sum::<usize>() + cur.bytes();
                o.bytes_peak = o.bytes_peak.max(bytes);
            }
            targets.clear();
            if keep {
                cur.freeze();
                layers[seq] = Some(cur);
            } else {
                live -= cur.len() as u64;
            }
        }
        for &c in wit_cols {
            if o.finals[c] > 0 {
                let (reached, steps) = self.witness(&layers, &place, arg[c], c, nw, wit_cols, &layout, &pos);
                o.witnesses.push((c, reached, steps));
            }
        }
        o
    }

    /// Walk the predecessor links of column c back to the initial state; return the
    /// events told in the initial frame (task indices of the concrete model), and the task
    /// of that frame whose counter reached the maximum.
    #[allow(clippy::too_many_arguments)]
    fn witness(
        &mut self,
        layers: &[Option<Layer>],
        place: &[(u32, u32)],
        end: (usize, usize),
        col: usize,
        nw: usize,
        wit_cols: &[usize],
        layout: &[Vec<u32>],
        pos: &[Vec<u32>],
    ) -> (usize, Vec<(u8, u32)>) {
        let m = self.m;
        let n = m.n;
        let k_of = |c: usize| wit_cols.iter().position(|&x| x == c);
        let mut chain: Vec<((u8, u32), Option<u32>)> = Vec::new();
        let (mut cur, mut c) = (end, col);
        let mut succ = Succ { states: Vec::new(), events: Vec::new(), dstart: Vec::new(), deltas: Vec::new() };
        while cur != (0, 0) {
            let lc = layers[cur.0].as_ref().unwrap();
            // renamings move the column inside its orbit, which the caller asked for whole
            let k = k_of(c).expect("witness columns are closed under symmetry");
            let p = lc.pred[cur.1 * nw + k];
            let p = place[p as usize];
            let p = (p.0 as usize, p.1 as usize);
            let lp = layers[p.0].as_ref().unwrap();
            let ps = lp.state(p.1).to_vec();
            let target = lc.state(cur.1).to_vec();
            // a layer's counters follow the layout of its epoch (word 0 of its states)
            let (ec, ep) = (target[0] as usize, ps[0] as usize);
            let best_cur = lc.best[cur.1 * layout[ec].len() + pos[ec][c] as usize];
            self.successors(&ps, &mut succ);
            let mut found = None;
            for e in 0..succ.events.len() {
                let mut nx = succ.states[e * self.w..(e + 1) * self.w].to_vec();
                let pid = self.canonical(&mut nx);
                if nx != target {
                    continue;
                }
                let c_p = match pid {
                    Some(pid) => {
                        let idx = self.perm_index(pid, ec, &layout[ec], &pos[ec]);
                        layout[ec][idx[pos[ec][c] as usize] as usize] as usize
                    }
                    None => c,
                };
                let gain: u32 = succ.deltas[succ.dstart[e]..succ.dstart[e + 1]]
                    .iter()
                    .filter(|d| d.0 as usize == c_p)
                    .map(|d| d.1 as u32)
                    .sum();
                if lp.best[p.1 * layout[ep].len() + pos[ep][c_p] as usize] as u32 + gain == best_cur as u32 {
                    found = Some((succ.events[e], pid, c_p));
                    break;
                }
            }
            let (ev, pid, c_p) = found.expect("witness reconstruction failed");
            chain.push((ev, pid));
            cur = p;
            c = c_p;
        }
        chain.reverse();
        // phi[t]: task t of the current frame is task phi[t] of the initial frame
        let mut phi: Vec<usize> = (0..n).collect();
        let mut out = Vec::new();
        for (ev, pid) in chain {
            out.push(if ev.0 == 0 { (0, phi[ev.1 as usize] as u32) } else { ev });
            if let Some(pid) = pid {
                let perm = &self.store.perm_list[pid as usize];
                let mut next = vec![0; n];
                for t in 0..n {
                    next[perm[t] as usize] = phi[t];
                }
                phi = next;
            }
        }
        // the initial-frame task whose counter the column holds at the end
        let reached = phi[col / (m.n_comp * m.n_gseg)];
        (reached, out)
    }
}

#[inline]
fn push_hits(m: &Model, t: usize, g: usize, mut hits: u64, deltas: &mut Vec<(u32, u16)>) {
    while hits != 0 {
        let c = hits.trailing_zeros() as usize;
        hits &= hits - 1;
        deltas.push((m.counter(t, c, g) as u32, 1));
    }
}
