//! Credential values out of a step's log, where its text enters the tool.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn replace_bytes(buf: &[u8], secrets: &[String]) -> Vec<u8> {
    let mut cur = buf.to_vec();
    for s in secrets {
        let needle = s.as_bytes();
        if find_bytes(&cur, needle).is_none() {
            continue;
        }
        let mut out = Vec::with_capacity(cur.len());
        let mut i = 0;
        while let Some(at) = find_bytes(&cur[i..], needle) {
            out.extend_from_slice(&cur[i..i + at]);
            out.extend_from_slice(crate::probe::secrets::REDACTED.as_bytes());
            i += at + needle.len();
        }
        out.extend_from_slice(&cur[i..]);
        cur = out;
    }
    cur
}

/// Replaces every credential value in the log from `from` on by `[REDACTED]`: the one point where
/// a step's text enters the tool (the output kept in memory is read back from here), so no
/// report, store entry, comment or message can carry one. Streams, so a huge log costs no memory.
pub(super) fn redact_log(
    log: &mut File,
    log_path: &Path,
    from: u64,
    secrets: &[String],
) -> std::io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let keep = secrets.iter().map(String::len).max().unwrap_or(1) - 1;
    let scan = |log: &mut File, mut sink: Option<&mut File>| -> std::io::Result<bool> {
        log.seek(SeekFrom::Start(from))?;
        let mut carry: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; CHUNK];
        let mut found = false;
        loop {
            let n = log.read(&mut chunk)?;
            let eof = n == 0;
            carry.extend_from_slice(&chunk[..n]);
            let hit = secrets
                .iter()
                .any(|s| find_bytes(&carry, s.as_bytes()).is_some());
            found |= hit;
            let replaced = if hit {
                replace_bytes(&carry, secrets)
            } else {
                carry
            };
            let cut = if eof {
                replaced.len()
            } else {
                replaced.len().saturating_sub(keep)
            };
            if let Some(out) = sink.as_deref_mut() {
                out.write_all(&replaced[..cut])?;
            }
            carry = replaced[cut..].to_vec();
            if eof {
                return Ok(found);
            }
        }
    };
    if !scan(log, None)? {
        return Ok(());
    }
    let dir = log_path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::tempfile_in(dir)?;
    scan(log, Some(&mut tmp))?;
    log.set_len(from)?;
    tmp.seek(SeekFrom::Start(0))?;
    std::io::copy(&mut tmp, log)?;
    Ok(())
}
