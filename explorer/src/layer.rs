//! One layer of the state graph: the states of one potential (epoch, 2*issued - outstanding),
//! stored flat (w words each) in an open-addressing hash set, with their counter maxima.

#[inline]
pub fn hash(s: &[u32]) -> u64 {
    let mut h: u64 = 0;
    for &x in s {
        h = (h.rotate_left(5) ^ x as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    // final mix so that the low bits (the slot) depend on every word
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

pub struct Layer {
    pub w: usize,
    pub data: Vec<u32>,
    /// (state index, upper hash bits): a probe compares states only when the bits match
    slots: Vec<(u32, u32)>,
    /// counter maxima, `width` per state
    pub best: Vec<u16>,
    /// predecessors (global state ids) per state for the witness columns
    pub pred: Vec<u32>,
    /// global ids of the states (witness mode only)
    pub ids: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

impl Layer {
    pub fn new(w: usize) -> Layer {
        Layer { w, data: Vec::new(), slots: vec![(EMPTY, 0); 16], best: Vec::new(), pred: Vec::new(), ids: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.data.len() / self.w
    }

    #[inline]
    pub fn state(&self, i: usize) -> &[u32] {
        &self.data[i * self.w..(i + 1) * self.w]
    }

    /// Index of state s, inserting it when absent; the flag says whether it is new.
    pub fn insert(&mut self, s: &[u32]) -> (usize, bool) {
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let h = hash(s);
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let (id, t) = self.slots[i];
            if id == EMPTY {
                let n = self.len();
                self.slots[i] = (n as u32, tag);
                self.data.extend_from_slice(s);
                return (n, true);
            }
            if t == tag && self.state(id as usize) == s {
                return (id as usize, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// Add a state known to be absent (a failed `find` with the same hash): no comparisons.
    pub fn push_absent(&mut self, s: &[u32], h: u64) -> usize {
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        while self.slots[i].0 != EMPTY {
            i = (i + 1) & mask;
        }
        let n = self.len();
        self.slots[i] = (n as u32, (h >> 32) as u32);
        self.data.extend_from_slice(s);
        n
    }

    /// Index of state s (whose hash is h) when present.
    pub fn find(&self, s: &[u32], h: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let (id, t) = self.slots[i];
            if id == EMPTY {
                return None;
            }
            if t == tag && self.state(id as usize) == s {
                return Some(id as usize);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        let mut slots = vec![(EMPTY, 0); size];
        for id in 0..self.len() {
            let h = hash(self.state(id));
            let mut i = h as usize & (size - 1);
            while slots[i].0 != EMPTY {
                i = (i + 1) & (size - 1);
            }
            slots[i] = (id as u32, (h >> 32) as u32);
        }
        self.slots = slots;
    }

    /// Drop the hash index once the layer is final (witness mode keeps states, not slots).
    pub fn freeze(&mut self) {
        self.slots = vec![(EMPTY, 0); 1];
    }

    pub fn bytes(&self) -> usize {
        self.data.capacity() * 4 + self.slots.capacity() * 8 + self.best.capacity() * 2 + self.pred.capacity() * 4 + self.ids.capacity() * 4
    }
}
