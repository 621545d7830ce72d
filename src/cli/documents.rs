//! The documents commands read back (`--results` files, fan-out records): each refused with
//! one line naming the file and the flag, before anything is posted. A leaf of `cli`, so
//! report and fan-out read them alike without importing each other.

use crate::core::fanout::{self, Record};
use crate::core::result::{self, AnyResult};
use crate::error::CliError;
use std::path::PathBuf;

/// Reads result files; one whose schema is missing or unknown is refused with one line naming
/// the file (exit 2), before anything is posted.
pub fn read_results(paths: &[PathBuf]) -> anyhow::Result<Vec<AnyResult>> {
    paths
        .iter()
        .map(|p| {
            let origin = p.display().to_string();
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::usage(format!("--results {origin}: cannot read: {e}")))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                CliError::usage(format!(
                    "--results {origin}: not JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ))
            })?;
            result::read(v).map_err(|e| CliError::usage(format!("--results {origin}: {e}")))
        })
        .collect()
}

/// Reads a fan-out record; anything else is a one-line usage error naming the file.
/// One `--finished` file (a bisect's reported result, core::fanout::Finished).
pub fn read_finished(flag: &str, p: &std::path::Path) -> anyhow::Result<fanout::Finished> {
    let shown = p.display();
    let text = std::fs::read_to_string(p)
        .map_err(|e| CliError::usage(format!("{flag} {shown}: cannot read: {e}")))?;
    let r: fanout::Finished = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{flag} {shown}: not a finished bisect: {e}")))?;
    if r.schema != fanout::FINISHED_SCHEMA {
        return Err(CliError::usage(format!(
            "{flag} {shown}: schema {:?} is not {:?}",
            r.schema,
            fanout::FINISHED_SCHEMA
        )));
    }
    Ok(r)
}

pub fn read_record(flag: &str, p: &std::path::Path) -> anyhow::Result<Record> {
    let shown = p.display();
    let text = std::fs::read_to_string(p)
        .map_err(|e| CliError::usage(format!("{flag} {shown}: cannot read: {e}")))?;
    let r: Record = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{flag} {shown}: not a fan-out record: {e}")))?;
    if r.schema != fanout::RECORD_SCHEMA {
        return Err(CliError::usage(format!(
            "{flag} {shown}: schema {:?} is not {:?}",
            r.schema,
            fanout::RECORD_SCHEMA
        )));
    }
    Ok(r)
}
