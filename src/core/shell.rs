//! Shell words, THE quoting rule of every line a person may paste (build and run steps in logs,
//! the report's reproducer, the dry run's plan, a script's step): it must run the argv that was
//! judged whatever a value holds (spaces, quotes, `$`), and stay unquoted where nothing needs it,
//! so the common line reads as the user typed it (`--good 01612b740^`).

/// `a` as one POSIX shell word.
pub fn word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./,:+@%^".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// `NAME=VALUE` as an assignment prefix: only the value is quoted (a quoted whole would be run
/// as a command name).
pub fn assignment(kv: &str) -> String {
    match kv.split_once('=') {
        Some((k, v))
            if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            format!("{k}={}", if v.is_empty() { String::new() } else { word(v) })
        }
        _ => word(kv),
    }
}

/// Shell words quoted so that pasting the line runs the same argv.
pub fn line<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| word(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(
            line(&["decode-probe", "--steps", "600"]),
            "decode-probe --steps 600"
        );
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word("it's"), r"'it'\''s'");
        assert_eq!(word(""), "''");
        assert_eq!(word("$HOME"), "'$HOME'");
        assert_eq!(line(&["sh", "-c", "x y"]), "sh -c 'x y'");
        assert_eq!(word("01612b740^"), "01612b740^");
    }

    #[test]
    fn an_assignment_quotes_its_value_only() {
        assert_eq!(assignment("LLAMA_SET_ROWS=1"), "LLAMA_SET_ROWS=1");
        assert_eq!(
            assignment("ASAN_OPTIONS=detect_leaks=0 verbosity=1"),
            "ASAN_OPTIONS='detect_leaks=0 verbosity=1'"
        );
        assert_eq!(assignment("EMPTY="), "EMPTY=");
        // not a NAME=VALUE: one word, so it cannot turn into something else
        assert_eq!(assignment("no name"), "'no name'");
    }
}
