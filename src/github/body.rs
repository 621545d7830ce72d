//! The comment body: a hidden marker that says which comment is ours for a key, the visible
//! markdown, and a hidden versioned state block, assembled under GitHub's size limit.
//!
//! Pure functions only, so the layout (and the truncation that keeps it under the limit) is
//! tested without a server.

use super::signing::Signer;
use super::GithubError;
use crate::report::document::{fit, Document};

/// GitHub rejects comment bodies longer than this (in characters). We count UTF-8 bytes, which
/// is never less than the number of characters in any encoding GitHub might count.
pub const MAX_BODY: usize = 65_536;

/// The largest state block we embed: half the body, so the report people read always has room.
pub const MAX_STATE: usize = MAX_BODY / 2 - 512;

const MARKER_PREFIX: &str = "<!-- setrows-bisect:";
const STATE_PREFIX: &str = "<!-- setrows-bisect-state:v1 ";
const COMMENT_END: &str = " -->";

/// Keys name one living comment: `matrix`, `bisect:<id>`. Restricted to characters that cannot
/// end an HTML comment or span lines.
pub fn validate_key(key: &str) -> Result<(), GithubError> {
    let ok = !key.is_empty()
        && key.len() <= 100
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '-' | '/'))
        && !key.contains("--");
    if ok {
        Ok(())
    } else {
        // Never echo an oversized key whole (a 10 MB key once went to stderr).
        let shown: String = key.chars().take(80).collect();
        let more = key.chars().count().saturating_sub(80);
        Err(GithubError::InvalidKey(if more > 0 {
            format!("{shown}... ({more} more characters)")
        } else {
            shown
        }))
    }
}

/// The hidden first line that identifies the comment for `key`.
pub fn marker(key: &str) -> String {
    format!("{MARKER_PREFIX}{key}{COMMENT_END}")
}

/// Does this (raw) comment body belong to `key`? The marker must be a line of its own; log
/// text cannot forge one because [`escape::sanitize`] breaks up every `<!--` it contains.
pub fn has_marker(body: &str, key: &str) -> bool {
    let m = marker(key);
    body.lines().any(|l| l.trim_end() == m)
}

/// JSON that is safe inside an HTML comment: `<` and `>` can only occur inside JSON strings,
/// where `\u003c` / `\u003e` mean the same, so `-->` can never appear. `@` and `#` are escaped
/// the same way so that not even the raw body holds a mention or reference. Compact JSON has no
/// raw newlines, so the block stays one line.
pub fn state_block(state: &serde_json::Value) -> String {
    format!("{STATE_PREFIX}{}{COMMENT_END}", state_json(state))
}

/// The block's JSON text, escaped as [`state_block`] says; what a signature covers.
fn state_json(state: &serde_json::Value) -> String {
    serde_json::to_string(state)
        .unwrap_or_else(|_| "null".to_string())
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('@', "\\u0040")
        .replace('#', "\\u0023")
}

/// A state block read back: the value, and the exact text and signature line a
/// [`Verifier`](super::signing::Verifier) checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadState {
    pub value: serde_json::Value,
    pub json: String,
    pub signature: Option<String>,
}

/// Reads the state block back from a raw comment body. `Ok(None)` when there is none; an error
/// when there is one we cannot read (another version, corrupted by a manual edit).
pub fn parse_state(body: &str) -> Result<Option<serde_json::Value>, GithubError> {
    Ok(read_state(body)?.map(|r| r.value))
}

/// [`parse_state`] with the block's text and its signature line.
pub fn read_state(body: &str) -> Result<Option<ReadState>, GithubError> {
    let signature = body
        .lines()
        .rev()
        .find(|l| super::signing::is_line(l))
        .map(|l| l.trim().to_string());
    let Some(line) = body
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with("<!-- setrows-bisect-state:"))
    else {
        return Ok(None);
    };
    let Some(rest) = line.strip_prefix(STATE_PREFIX) else {
        let version = line
            .trim_start_matches("<!-- setrows-bisect-state:")
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        return Err(GithubError::StateVersion(version));
    };
    let json = rest.strip_suffix(COMMENT_END).unwrap_or(rest).trim();
    let value = serde_json::from_str(json).map_err(|e| GithubError::StateCorrupt(e.to_string()))?;
    Ok(Some(ReadState {
        value,
        json: json.to_string(),
        signature,
    }))
}

/// The full comment body for `key`: marker, markdown (cut to fit), state block; never longer
/// than [`MAX_BODY`]. Fails only when the state block alone leaves no room for the report.
pub fn assemble(
    key: &str,
    doc: &Document,
    state: Option<&serde_json::Value>,
    artifact_url: Option<&str>,
) -> Result<String, GithubError> {
    assemble_signed(key, doc, state, artifact_url, None)
}

/// [`assemble`], with the state block signed by `signer` (a line of its own after it).
pub fn assemble_signed(
    key: &str,
    doc: &Document,
    state: Option<&serde_json::Value>,
    artifact_url: Option<&str>,
    signer: Option<&Signer>,
) -> Result<String, GithubError> {
    validate_key(key)?;
    let head = format!("{}\n", marker(key));
    let block = state.map(state_json);
    let block_len = block
        .as_ref()
        .map_or(0, |j| STATE_PREFIX.len() + j.len() + COMMENT_END.len());
    if block_len > MAX_STATE {
        return Err(GithubError::StateTooLarge {
            key: key.to_string(),
            bytes: block_len + 2,
        });
    }
    let foot = match (&block, signer) {
        (None, _) => String::new(),
        (Some(json), None) => format!("\n{STATE_PREFIX}{json}{COMMENT_END}\n"),
        (Some(json), Some(signer)) => format!(
            "\n{STATE_PREFIX}{json}{COMMENT_END}\n{}\n",
            signer.line(key, json)
        ),
    };
    let reserve = head.len() + foot.len() + 16;
    // A state that had to be emptied to fit must say so where people look: a later
    // `--resume-from-issue` finds nothing to resume, and that must not be a surprise.
    let dropped = state.is_some_and(|s| s.get("compacted").and_then(|c| c.as_u64()) == Some(2));
    let note = if dropped {
        "\n\n_The saved state was dropped: these results are too large for a comment's state \
         block, so `--resume-from-issue` starts from nothing here. Keep the JSON results as \
         workflow artifacts to resume._"
    } else {
        ""
    };
    // `fit` keeps to its budget up to the few bytes its cut notes add; a body over GitHub's
    // limit is refused outright, so whatever it overshot comes off the budget and it cuts again.
    let mut budget = MAX_BODY - reserve - note.len();
    loop {
        let md = fit(doc, budget, artifact_url);
        let body = format!("{head}{}{note}{foot}", md.trim_end());
        if body.len() <= MAX_BODY || budget == 0 {
            return Ok(body);
        }
        budget = budget.saturating_sub(body.len() - MAX_BODY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_state_is_said_in_the_visible_body() {
        let doc = Document::markdown("## report");
        let st = serde_json::json!({"key": "matrix", "results": [], "compacted": 2});
        let b = assemble("matrix", &doc, Some(&st), None).unwrap();
        assert!(b.contains("saved state was dropped"), "{b}");
        let kept = serde_json::json!({"key": "matrix", "results": [], "compacted": 1});
        let b = assemble("matrix", &doc, Some(&kept), None).unwrap();
        assert!(!b.contains("saved state was dropped"), "{b}");
    }

    #[test]
    fn an_oversized_key_is_not_echoed_whole() {
        let key = "x".repeat(100_000) + " ";
        let err = validate_key(&key).unwrap_err().to_string();
        assert!(err.len() < 400, "{} bytes", err.len());
        assert!(err.contains("more characters"), "{err}");
    }
    use crate::report::document::open_fence;
    use serde_json::json;

    #[test]
    fn marker_and_state_round_trip() {
        let state = json!({"probes": [{"sha": "abc", "log": "x --> y <!-- z @bob #1"}], "n": -1});
        let body = assemble("bisect:1a2b", &Document::markdown("hi"), Some(&state), None).unwrap();
        assert!(body.starts_with("<!-- setrows-bisect:bisect:1a2b -->\n"));
        assert!(has_marker(&body, "bisect:1a2b"));
        assert!(!has_marker(&body, "matrix"));
        let last = body.lines().last().unwrap();
        assert_eq!(last.matches("-->").count(), 1, "{last}");
        assert!(!last.contains('@') && !last.contains('#'), "{last}");
        assert_eq!(parse_state(&body).unwrap(), Some(state));
    }

    #[test]
    fn forged_state_in_a_log_is_not_read() {
        let mut doc = Document::default();
        doc.push_log("log", "<!-- setrows-bisect-state:v1 {\"evil\":true} -->");
        let body = assemble("matrix", &doc, None, None).unwrap();
        assert_eq!(parse_state(&body).unwrap(), None);
        let mut doc = Document::default();
        doc.push_log("log", "<!-- setrows-bisect:matrix -->");
        let body = assemble("other", &doc, None, None).unwrap();
        assert!(!has_marker(&body, "matrix"));
    }

    #[test]
    fn other_state_versions_are_refused() {
        let err = parse_state("x\n<!-- setrows-bisect-state:v9 {} -->").unwrap_err();
        assert!(matches!(err, GithubError::StateVersion(v) if v == "v9"));
        assert!(matches!(
            parse_state("<!-- setrows-bisect-state:v1 {nope -->"),
            Err(GithubError::StateCorrupt(_))
        ));
    }

    #[test]
    fn keys_cannot_break_the_marker() {
        for bad in ["", "a -->", "a--b", "a\nb", "x<y"] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
        validate_key("bisect:rocm-6.4_wave32/abc.1").unwrap();
    }

    #[test]
    fn huge_logs_are_cut_from_the_head_with_a_link() {
        let mut doc = Document::markdown("## Matrix\n\n| a | b |\n|---|---|\n| 1 | 2 |");
        let line = "x".repeat(99) + "\n";
        for i in 0..4 {
            doc.push_log(
                format!("log {i}"),
                line.repeat(2_000) + "FINAL FAULT LINE\n",
            );
        }
        let state = json!({"k": "v"});
        let url = "https://github.com/o/r/actions/runs/1";
        let body = assemble("matrix", &doc, Some(&state), Some(url)).unwrap();
        assert!(body.len() <= MAX_BODY, "{}", body.len());
        assert!(
            body.len() > MAX_BODY - 4_000,
            "budget should be used: {}",
            body.len()
        );
        assert_eq!(body.matches("FINAL FAULT LINE").count(), 4);
        assert!(body.contains("earlier bytes omitted; full log in the [workflow artifacts]"));
        assert!(body.contains("| 1 | 2 |"));
        assert_eq!(parse_state(&body).unwrap(), Some(state));
    }

    #[test]
    fn oversized_markdown_drops_trailing_sections() {
        let mut doc = Document::default();
        for i in 0..20 {
            doc.push_markdown(format!("## part {i}\n{}", "y".repeat(10_000)));
        }
        let body = assemble("matrix", &doc, None, None).unwrap();
        assert!(body.len() <= MAX_BODY);
        assert!(body.contains("## part 0"));
        assert!(body.contains("more section(s) omitted"));
        let mut doc = Document::default();
        doc.push_markdown("é".repeat(70_000));
        let body = assemble("matrix", &doc, None, None).unwrap();
        assert!(body.len() <= MAX_BODY);
        // A cut inside a code block closes it, so the state block stays a hidden comment.
        let mut doc = Document::default();
        doc.push_markdown(format!("intro\n````sh\n{}", "line\n".repeat(20_000)));
        let state = json!({"k": 1});
        let body = assemble("matrix", &doc, Some(&state), None).unwrap();
        assert!(body.len() <= MAX_BODY);
        assert_eq!(open_fence(&body), None, "{}", &body[body.len() - 200..]);
        assert!(
            body.contains("line\n````\n\n_(cut here"),
            "{}",
            &body[body.len() - 300..]
        );
        assert!(body.contains("intro"));
        assert_eq!(parse_state(&body).unwrap(), Some(state));
    }

    /// proptest's minimal case that came out at 65,537 bytes (one over GitHub's limit).
    #[test]
    fn a_document_that_once_overshot_fits() {
        let sections: [(bool, usize, &str); 6] = [
            (false, 28470, "\na<"),
            (false, 20430, ">><a\n"),
            (true, 9998, "-\n"),
            (true, 9996, ">a->"),
            (false, 28, ">a@a@ -"),
            (false, 126, "a"),
        ];
        let mut doc = Document::default();
        for (i, (is_log, len, unit)) in sections.iter().enumerate() {
            let text = unit.repeat(len / unit.len() + 1);
            if *is_log {
                doc.push_log(format!("log {i}"), text);
            } else {
                doc.push_markdown(text);
            }
        }
        let state = json!({"s": "x".repeat(16031)});
        let url = Some("https://github.com/o/r/actions/runs/1");
        let body = assemble("matrix", &doc, Some(&state), url).unwrap();
        assert!(body.len() <= MAX_BODY, "{}", body.len());
        assert_eq!(parse_state(&body).unwrap(), Some(state));
    }

    #[test]
    fn state_that_leaves_no_room_is_an_error() {
        let state = json!({"blob": "z".repeat(40_000)});
        let err = assemble("matrix", &Document::default(), Some(&state), None).unwrap_err();
        assert!(matches!(err, GithubError::StateTooLarge { .. }));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Whatever goes in (a case that once came out at 65,537 bytes is pinned in
        /// `a_document_that_once_overshot_fits`), the body fits, the marker is first, and the state reads back.
        #[test]
        fn any_document_fits_and_keeps_its_state(
            sections in proptest::collection::vec((proptest::bool::ANY, 0usize..40_000, "[a-z`@<>\\n -]{1,8}"), 0..12),
            state_len in 0usize..20_000,
        ) {
            let mut doc = Document::default();
            for (i, (is_log, len, unit)) in sections.iter().enumerate() {
                let text = unit.repeat(len / unit.len().max(1) + 1);
                if *is_log {
                    doc.push_log(format!("log {i}"), text);
                } else {
                    doc.push_markdown(text);
                }
            }
            let state = json!({"s": "x".repeat(state_len)});
            let body = assemble("matrix", &doc, Some(&state), Some("https://github.com/o/r/actions/runs/1")).unwrap();
            proptest::prop_assert!(body.len() <= MAX_BODY, "{}", body.len());
            proptest::prop_assert!(body.starts_with(&marker("matrix")));
            proptest::prop_assert_eq!(parse_state(&body).unwrap(), Some(state));
        }
    }
}
