//! A bundled program (the replay, decode-probe) is embedded source text: its hash names it in
//! store keys and in the directory it is written to. Its own module: both probes use it and
//! the replay's module already uses the decode probe's.

use sha2::{Digest, Sha256};

/// THE hash of a bundled program's embedded sources (the replay's, decode-probe's): its
/// identity in store keys and the name of the directory it is written to.
pub fn hash_of(sources: &[(&str, &str)]) -> String {
    let mut h = Sha256::new();
    for (path, text) in sources {
        h.update(path.as_bytes());
        h.update([0]);
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    hex::encode(h.finalize())
}
