//! Where in a matrix file an error is: every error names the file, line, column and key, and
//! TOML's own errors are pointed at the key they are about.

use std::ops::Range;

/// A position-carrying error in a matrix file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: key `{key}`: {message}")]
pub struct MatrixError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
}

pub(super) struct Ctx<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Ctx<'_> {
    pub fn err(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> MatrixError {
        let (line, column) = line_col(self.text, span.start);
        MatrixError {
            file: self.file.into(),
            line,
            column,
            key: key.into(),
            message: message.into(),
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// The key a TOML syntax/shape error is about: named in the message, else the `key =` or
/// `[table]` on the line where it points.
pub(super) fn key_of_toml_error(text: &str, msg: &str, span: Option<Range<usize>>) -> String {
    let named = ["unknown field `", "missing field `", "duplicate key `"];
    for n in named {
        if let Some(start) = msg.find(n).map(|i| i + n.len()) {
            if let Some(len) = msg[start..].find('`') {
                return msg[start..start + len].to_string();
            }
        }
    }
    let Some(span) = span else { return "-".into() };
    let start = text.floor_char_boundary_compat(span.start.min(text.len()));
    // The line the error points at, or the last non-empty one before it (errors at EOF).
    let line_start = text[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let current = text[line_start..].lines().next().unwrap_or("");
    let line = std::iter::once(current)
        .chain(text[..line_start].lines().rev())
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if let Some((k, _)) = line.split_once('=') {
        return k.trim().trim_matches('"').to_string();
    }
    line.trim_matches(|c| c == '[' || c == ']').to_string()
}

pub(super) fn err_no_span(file: &str, key: &str, message: impl Into<String>) -> MatrixError {
    MatrixError {
        file: file.into(),
        line: 0,
        column: 0,
        key: key.into(),
        message: message.into(),
    }
}
