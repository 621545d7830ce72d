//! THE short-hash rule: an id made of inputs is the SHA-256 of them in hex, cut to the length
//! its use needs. Parts are each followed by a NUL, so ("ab", "c") and ("a", "bc") differ.
//! Every id below is stored (store keys, journals, build dirs, comment keys, configuration
//! ids), so each keeps the length and framing it was first written with.

use sha2::{Digest, Sha256};

/// The hash of `parts` (each followed by a NUL) as `hex_len` hex digits.
pub fn of_parts(parts: &[&str], hex_len: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    cut(&h.finalize(), hex_len)
}

/// The hash of one text as `hex_len` hex digits (configuration ids and comment keys, whose
/// inputs were framed into one text before this rule existed).
pub fn of_text(text: &str, hex_len: usize) -> String {
    cut(&Sha256::digest(text.as_bytes()), hex_len)
}

/// A digest shown in `hex_len` hex digits (whole when shorter).
pub fn cut(digest: &[u8], hex_len: usize) -> String {
    let mut s = hex::encode(digest);
    s.truncate(hex_len);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_framed_and_lengths_kept() {
        assert_ne!(of_parts(&["ab", "c"], 12), of_parts(&["a", "bc"], 12));
        assert_eq!(of_parts(&["x"], 16).len(), 16);
        assert_eq!(of_text("x", 8).len(), 8);
        // The framing every stored id was written with: sha256("a\0b\0").
        assert_eq!(of_parts(&["a", "b"], 64), of_text("a\0b\0", 64));
    }
}
