//! Making untrusted text (probe logs, failure signatures, commit subjects) safe to put in a
//! GitHub comment.
//!
//! The comment is read by people and parsed back by us, so text from a log must not be able to:
//! close the code fence it sits in (and then render as markup), ping people (`@user`), link
//! issues (`#123`), inject raw HTML, or forge our own hidden markers (`<!-- setrows-bisect... -->`).
//! GitHub renders neither mentions, references nor HTML inside a code block, so for logs it is
//! enough to pick a fence the text cannot close; inline text is escaped character by character.

/// Zero-width space: breaks `@user` / `#123` recognition without changing what a reader sees.
pub const ZWSP: char = '\u{200B}';

/// Removes what has no business in a comment and could smuggle structure in: ANSI colour codes,
/// control characters (GitHub rejects NUL), carriage returns. Also breaks up `<!--`, so that a
/// log line can never look like one of our hidden markers or state blocks when we read the
/// comment back.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI sequence: ESC [ params final-byte (0x40..=0x7e); other escapes: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for p in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&p) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            // Bidirectional overrides can make a log line read differently from what it is.
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out.replace("<!--", "<!\u{200B}--")
}

/// The length of the longest run of `ch` in `text`.
fn longest_run(text: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in text.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// A fenced code block holding `text` verbatim (after [`sanitize`]). The fence is one backtick
/// longer than the longest backtick run in the text, so no line of it can close the block
/// (CommonMark: a closing fence must be at least as long as the opening one).
pub fn code_block(text: &str) -> String {
    let body = sanitize(text);
    let fence = "`".repeat(3.max(longest_run(&body, '`') + 1));
    let body = body.trim_end_matches('\n');
    format!("{fence}text\n{body}\n{fence}")
}

/// Escapes text for use inside a markdown paragraph or table cell (never at the start of a
/// line): one line, inline markup characters backslash-escaped, HTML special characters as entities, and a
/// zero-width space after `@` and `#` so that no mention or issue reference is created.
pub fn inline(text: &str) -> String {
    let clean = sanitize(text);
    let mut out = String::with_capacity(clean.len() + 8);
    for c in clean.chars() {
        match c {
            '\n' | '\t' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '@' => {
                out.push('@');
                out.push(ZWSP);
            }
            '#' => {
                out.push_str("\\#");
                out.push(ZWSP);
            }
            // Only what can start markup mid-line: emphasis, code, links and images, tables,
            // strikethrough and math. The rest (`-`, `.`, `:`, ...) only means something at the
            // start of a line, where inline text never goes; escaping it made terminal output
            // unreadable (`ringbuf\: speed\-up`).
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for raw HTML context (e.g. `<summary>`), where markdown backslash escapes are
/// not processed: entities for HTML specials, zero-width spaces against mentions/references.
pub fn html_text(text: &str) -> String {
    let clean = sanitize(text);
    let mut out = String::with_capacity(clean.len() + 8);
    for c in clean.chars() {
        match c {
            '\n' | '\t' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '`' => out.push_str("&#96;"),
            '@' | '#' => {
                out.push(c);
                out.push(ZWSP);
            }
            c => out.push(c),
        }
    }
    out
}

/// [`inline`], cut to at most `max_chars` characters of the original text (with an ellipsis).
pub fn inline_short(text: &str, max_chars: usize) -> String {
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first_line.chars().count() > max_chars {
        let cut: String = first_line.chars().take(max_chars).collect();
        format!("{}…", inline(&cut))
    } else {
        inline(first_line)
    }
}

/// A commit id rendered as code when it really is one (hex), escaped text otherwise.
pub fn sha(text: &str, len: usize) -> String {
    if !text.is_empty() && text.len() <= 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        format!("`{}`", &text[..len.min(text.len())])
    } else {
        inline_short(text, 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Would a line close a backtick fence of length `n`? (CommonMark 4.5: up to three spaces
    /// of indentation, at least `n` backticks, then only spaces.)
    fn closes(line: &str, n: usize) -> bool {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        let ticks = rest.len() - rest.trim_start_matches('`').len();
        indent <= 3 && ticks >= n && rest[ticks..].trim().is_empty()
    }

    fn assert_sealed(block: &str) {
        let lines: Vec<&str> = block.lines().collect();
        let open = lines[0];
        let n = open.len() - open.trim_start_matches('`').len();
        assert!(n >= 3, "fence too short: {open:?}");
        let last = lines.len() - 1;
        assert!(closes(lines[last], n), "last line must close: {block:?}");
        for (i, l) in lines[1..last].iter().enumerate() {
            assert!(
                !closes(l, n),
                "line {} closes the fence early: {block:?}",
                i + 1
            );
        }
    }

    #[test]
    fn fence_outgrows_backticks_in_text() {
        let evil = "ok\n```\n@everyone <script>x</script>\n````\n  `````` \n";
        let block = code_block(evil);
        assert!(block.starts_with("```````text\n"), "{block}");
        assert_sealed(&block);
    }

    #[test]
    fn sanitize_strips_ansi_controls_and_markers() {
        let s = sanitize("\u{1b}[31mred\u{1b}[0m\0 a\r\nb\rc <!-- setrows-bisect:matrix -->");
        assert_eq!(s, "red a\nb\nc <!\u{200B}-- setrows-bisect:matrix -->");
        assert!(!s.contains("<!--"));
    }

    #[test]
    fn inline_blocks_mentions_refs_and_html() {
        let s = inline("@alice fixed #12 in <b>x</b> | [a](javascript:x) **b**");
        assert!(!s.contains("@a"), "{s}");
        assert!(!s.contains("#1"), "{s}");
        assert!(!s.contains('<') && !s.contains('>'), "{s}");
        assert!(!s.contains(" | "), "a table cell must not be split: {s}");
        assert!(s.contains("\\[a\\](javascript"), "no link forms: {s}");
        assert!(s.contains("&lt;b&gt;"));
    }

    #[test]
    fn html_text_is_inert() {
        let s = html_text("a</summary><img src=x onerror=alert(1)> @bob #3 `x`");
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('`'),
            "{s}"
        );
        assert!(
            s.contains("@\u{200B}bob") && s.contains("#\u{200B}3"),
            "{s}"
        );
    }

    #[test]
    fn sha_only_code_formats_hex() {
        assert_eq!(sha("0123456789abcdef", 7), "`0123456`");
        assert_eq!(sha("`x` @y", 7), "\\`x\\` @\u{200B}y");
    }

    proptest! {
        #[test]
        fn no_text_escapes_its_fence(parts in proptest::collection::vec(
            prop_oneof![Just("`".to_string()), Just("\n".to_string()), Just(" ".to_string()),
                        Just("~~~".to_string()), "[a-z@#<>!-]{0,4}"], 0..60)) {
            let text: String = parts.concat();
            assert_sealed(&code_block(&text));
        }

        #[test]
        fn inline_never_mentions_or_breaks_lines(text in "\\PC{0,80}") {
            let s = inline(&text);
            prop_assert!(!s.contains('\n'));
            prop_assert!(!s.contains('<'));
            let chars: Vec<char> = s.chars().collect();
            for w in chars.windows(2) {
                if w[0] == '@' || w[0] == '#' {
                    prop_assert_eq!(w[1], ZWSP);
                }
            }
        }
    }
}
