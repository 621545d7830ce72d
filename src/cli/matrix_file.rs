//! Which matrix a command reads: `--matrix FILE`, else `./matrix.toml`, else the copy built
//! into the binary. A leaf of `cli`, so bisect, matrix and report read it alike without
//! importing each other.

use crate::core::matrix::{self, Matrix};
use crate::error::CliError;
use std::path::Path;

/// The repository's `matrix.toml`, built in: `--config ID` works from any directory.
pub const EMBEDDED_MATRIX: &str = include_str!("../../matrix.toml");
pub const EMBEDDED_NAME: &str = "embedded matrix.toml";

/// Reads and parses a matrix file (errors name file, line, column and key).
pub fn read_matrix(path: &Path) -> Result<Matrix, matrix::MatrixError> {
    let file = path.display().to_string();
    let err = |line, column, message: String| matrix::MatrixError {
        file: file.clone(),
        line,
        column,
        key: "-".into(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| err(0, 0, format!("cannot read: {e}")))?;
    // A stray non-UTF-8 byte is pointed at, like any other error in the file.
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let text = String::from_utf8_lossy(good);
        let (line, column) = matrix::line_col(&text, text.len());
        err(
            line,
            column,
            "not valid UTF-8 here (TOML files are UTF-8)".into(),
        )
    })?;
    matrix::parse(&file, &text)
}

/// `--matrix FILE`, else `./matrix.toml`, else the embedded copy.
pub fn load_matrix(file: Option<&Path>) -> anyhow::Result<Matrix> {
    let usage = |e: matrix::MatrixError| CliError::usage(e.to_string());
    match file {
        Some(p) if !p.is_file() => Err(CliError::usage(format!(
            "--matrix {}: {}; give an existing matrix file (or leave --matrix out for ./matrix.toml or the built-in one)",
            p.display(),
            if p.exists() { "not a file" } else { "no such file" }
        ))),
        Some(p) => read_matrix(p).map_err(usage),
        None if Path::new("matrix.toml").is_file() => {
            read_matrix(Path::new("matrix.toml")).map_err(usage)
        }
        None => matrix::parse(EMBEDDED_NAME, EMBEDDED_MATRIX).map_err(usage),
    }
}
