//! Making untrusted text (probe logs, failure signatures, commit subjects) safe to put in a
//! GitHub comment.
//!
//! The comment is read by people and parsed back by us, so text from a log must not be able to:
//! close the code fence it sits in (and then render as markup), ping people (`@user`), link
//! issues (`#123`), inject raw HTML, or forge our own hidden markers (`<!-- setrows-bisect... -->`).
//! GitHub renders neither mentions, references nor HTML inside code, so for logs it is enough to
//! pick a fence the text cannot close, and inline text goes into code spans word-run by word-run
//! (no backslashes or zero-width characters outside code: copied text reads as the original).

/// Zero-width space: breaks up `<!--` (inside code, where it is the only zero-width character
/// a comment holds) so a log line can never look like one of our hidden markers.
pub const ZWSP: char = '\u{200B}';

/// Zero-width and invisible formatting characters: removed from untrusted text (they would hide
/// in anything copied from a comment).
fn invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

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
            c if c.is_control() || invisible(c) => {}
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

/// Characters that start markup, HTML, a mention or a reference mid-line in GitHub markdown.
/// Everything else (`-`, `.`, `:`, ...) only means something at the start of a line, where
/// inline text never goes.
fn risky(c: char) -> bool {
    matches!(
        c,
        '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '!' | '$' | '<' | '>' | '&' | '@' | '#'
    )
}

/// `text` as one code span: nothing renders inside one (no markup, mention, reference or HTML),
/// so untrusted text stays readable and copies back as itself. The delimiter is one backtick
/// longer than any run inside; `in_table` escapes `|`, which GFM table rows split on even
/// inside code spans (and unescape there).
pub fn span(text: &str, in_table: bool) -> String {
    let clean: String = sanitize(text)
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect();
    if clean.trim().is_empty() {
        return String::new();
    }
    let ticks = "`".repeat(longest_run(&clean, '`') + 1);
    let pad = if clean.starts_with('`') || clean.ends_with('`') {
        " "
    } else {
        ""
    };
    let body = if in_table {
        clean.replace('|', "\\|")
    } else {
        clean
    };
    format!("{ticks}{pad}{body}{pad}{ticks}")
}

/// Untrusted text inside a markdown paragraph (never at the start of a line): one line, words
/// that are plain stay plain, and each run of words holding a markup, HTML, mention or
/// reference character becomes one code span. No backslashes, no zero-width characters: what a
/// reader copies is the text.
pub fn inline(text: &str) -> String {
    words(text, false)
}

/// [`inline`] for a table cell (a `|` inside a span is escaped, as GFM tables require).
pub fn cell(text: &str) -> String {
    words(text, true)
}

fn words(text: &str, in_table: bool) -> String {
    let clean = sanitize(text);
    let mut out: Vec<String> = Vec::new();
    let mut pending: Vec<&str> = Vec::new();
    let flush = |pending: &mut Vec<&str>, out: &mut Vec<String>| {
        if !pending.is_empty() {
            out.push(span(&pending.join(" "), in_table));
            pending.clear();
        }
    };
    for w in clean.split_whitespace() {
        if w.chars().any(risky) || w.contains(ZWSP) {
            pending.push(w);
        } else {
            flush(&mut pending, &mut out);
            out.push(w.to_string());
        }
    }
    flush(&mut pending, &mut out);
    out.join(" ")
}

/// Escapes text for raw HTML context (e.g. `<summary>`), where markdown is not processed:
/// entities for HTML specials; text that could mention or reference goes in `<code>`, where
/// GitHub links neither.
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
            c => out.push(c),
        }
    }
    if out.contains(['@', '#']) || out.contains(ZWSP) {
        format!("<code>{out}</code>")
    } else {
        out
    }
}

/// [`inline`], cut to at most `max_chars` characters of the original text (with an ellipsis).
pub fn inline_short(text: &str, max_chars: usize) -> String {
    short_with(text, max_chars, inline)
}

/// [`cell`], cut to at most `max_chars` characters of the original text (with an ellipsis).
pub fn cell_short(text: &str, max_chars: usize) -> String {
    short_with(text, max_chars, cell)
}

fn short_with(text: &str, max_chars: usize, f: fn(&str) -> String) -> String {
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first_line.chars().count() > max_chars {
        let cut: String = first_line.chars().take(max_chars).collect();
        format!("{}…", f(&cut))
    } else {
        f(first_line)
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

/// What a reader sees as text outside code: `md` without fenced code blocks, code spans and
/// HTML comments (hidden). A CommonMark approximation good for what we generate; tests use it
/// to prove that no zero-width character or escape noise sits where people copy from.
pub fn outside_code(md: &str) -> String {
    let mut visible = String::new();
    let mut rest = md;
    while let Some(i) = rest.find("<!--") {
        visible.push_str(&rest[..i]);
        rest = match rest[i..].find("-->") {
            Some(j) => &rest[i + j + 3..],
            None => "",
        };
    }
    visible.push_str(rest);
    let mut out = String::new();
    let mut fence: Option<usize> = None;
    for line in visible.lines() {
        let t = line.trim_start_matches(' ');
        let n = t.len() - t.trim_start_matches('`').len();
        let indent = line.len() - t.len();
        match fence {
            Some(k) => {
                if indent <= 3 && n >= k && t[n..].trim().is_empty() {
                    fence = None;
                }
                continue;
            }
            None if indent <= 3 && n >= 3 => {
                fence = Some(n);
                continue;
            }
            None => {}
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] != '`' {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && chars[i] == '`' {
                i += 1;
            }
            let n = i - start;
            // the closing run: exactly n backticks
            let mut j = i;
            let mut close = None;
            while j < chars.len() {
                if chars[j] == '`' {
                    let s = j;
                    while j < chars.len() && chars[j] == '`' {
                        j += 1;
                    }
                    if j - s == n {
                        close = Some(j);
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            match close {
                Some(end) => i = end,
                None => out.extend(&chars[start..i]),
            }
        }
        out.push('\n');
    }
    out
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
    fn inline_puts_mentions_refs_and_html_in_code_spans() {
        let s = inline("@alice fixed #12 in <b>x</b> | [a](javascript:x) **b** ok-now");
        assert_eq!(
            s,
            "`@alice` fixed `#12` in `<b>x</b> | [a](javascript:x) **b**` ok-now"
        );
        assert!(!s.contains(ZWSP) && !s.contains('\\'), "{s}");
        // a table cell escapes the pipe (GFM unescapes it inside the span)
        assert_eq!(cell("a|b c"), "`a\\|b` c");
        // backticks inside get a longer delimiter, padded when at an edge
        assert_eq!(inline("use `x` now"), "use `` `x` `` now");
        assert_eq!(inline("ringbuf: speed-up"), "ringbuf: speed-up");
        // zero-width characters in the input are dropped
        assert_eq!(inline("a\u{200B}b"), "ab");
    }

    #[test]
    fn html_text_is_inert() {
        let s = html_text("a</summary><img src=x onerror=alert(1)> @bob #3 `x`");
        assert!(
            !s.contains("</summary>") && !s.contains("<img") && !s.contains('`'),
            "{s}"
        );
        assert!(s.starts_with("<code>") && s.ends_with("</code>"), "{s}");
        assert_eq!(html_text("log 3"), "log 3");
    }

    #[test]
    fn sha_only_code_formats_hex() {
        assert_eq!(sha("0123456789abcdef", 7), "`0123456`");
        assert_eq!(sha("`x` @y", 7), "`` `x` @y ``");
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
            let outside = crate::report::escape::outside_code(&s);
            for c in ['@', '#', '<', '>', '&', '\\', ZWSP] {
                prop_assert!(!outside.contains(c), "{:?} outside code in {:?}", c, s);
            }
        }
    }
}
