//! `setrows-bisect schema KIND`: the JSON Schema of a result document, generated from the
//! structs every writer serializes and every reader deserializes, so a consumer (a workflow's
//! `jq`, a dashboard) can check what it reads against what this binary writes.

use crate::core::result::Kind;
use crate::error::Exit;
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaKind {
    /// `bisect --json FILE`.
    Bisect,
    /// `matrix` (`matrix-results.json`).
    Matrix,
    /// `bisect-config` (`bisect-config.json`).
    BisectConfig,
    /// `bisect --dry-run --json FILE` (a plan; nothing ran).
    Plan,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which result document.
    #[arg(value_enum, value_name = "KIND")]
    pub kind: SchemaKind,
}

pub fn run(args: SchemaArgs) -> anyhow::Result<Exit> {
    let (mut schema, tag) = match args.kind {
        SchemaKind::Bisect => (Kind::Bisect.json_schema(), Kind::Bisect.tag()),
        SchemaKind::Matrix => (Kind::Matrix.json_schema(), Kind::Matrix.tag()),
        SchemaKind::BisectConfig => (Kind::BisectConfig.json_schema(), Kind::BisectConfig.tag()),
        SchemaKind::Plan => (
            schemars::schema_for!(crate::core::result::PlanDocument),
            crate::core::result::plan_tag(),
        ),
    };
    schema.insert("$id".into(), tag.into());
    outln!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(Exit::Ok)
}
