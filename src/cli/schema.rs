//! `setrows-bisect schema KIND`: the JSON Schema of a result document, generated from the
//! structs every writer serializes and every reader deserializes, so a consumer (a workflow's
//! `jq`, a dashboard) can check what it reads against what this binary writes.

use crate::core::result::Kind;
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaKind {
    /// `bisect --json FILE`.
    Bisect,
    /// `matrix` (`matrix-results.json`).
    Matrix,
    /// `bisect-config` (`bisect-config.json`).
    BisectConfig,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which result document.
    #[arg(value_enum, value_name = "KIND")]
    pub kind: SchemaKind,
}

pub fn run(args: SchemaArgs) -> anyhow::Result<i32> {
    let kind = match args.kind {
        SchemaKind::Bisect => Kind::Bisect,
        SchemaKind::Matrix => Kind::Matrix,
        SchemaKind::BisectConfig => Kind::BisectConfig,
    };
    let mut schema = kind.json_schema();
    schema.insert("$id".into(), kind.tag().into());
    outln!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(crate::error::exit::FOUND)
}
