//! FNV-1a, 64 bits: a tiny hash every host can compute the same way (the Node runner
//! has the same function in `runners/node/fnv.mjs`).

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// A running FNV-1a 64 hash.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET)
    }
}

impl Fnv1a {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }

    /// As 16 lowercase hex digits (how trace files carry it: JSON numbers stop at 2^53).
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The hash of one text.
pub fn hash_hex(text: &str) -> String {
    let mut h = Fnv1a::default();
    h.update(text.as_bytes());
    h.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The reference test vectors of FNV-1a 64.
        assert_eq!(hash_hex(""), "cbf29ce484222325");
        assert_eq!(hash_hex("a"), "af63dc4c8601ec8c");
        assert_eq!(hash_hex("foobar"), "85944171f73967e8");
    }
}
