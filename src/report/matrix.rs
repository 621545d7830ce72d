//! The results table of a matrix run: `matrix-results.json` (what the workflow merges and the
//! GitHub report reads) and its markdown rendering. Pure: cells in, text out.

use crate::core::outcome::Outcome;
use crate::core::result::{Cell, MatrixResults};

/// Provenance keys that describe an image on a machine (the same for every cell in it).
const IMAGE_FACTS: &[&str] = &[
    "engine",
    "image",
    "image_digest",
    "kernel",
    "hip",
    "nvcc",
    "compiler",
    "gpu",
    "device",
    "backend",
    "ggml_version",
    "provenance_error",
];

/// Text from logs cannot break the table.
fn cell_text(s: &str) -> String {
    s.replace('|', "\\|")
        .replace(['\n', '\r'], " ")
        .chars()
        .take(120)
        .collect()
}

impl MatrixResults {
    pub fn cell(&self, config: &str, sha: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.config == config && c.sha == sha)
    }

    pub fn infra_errors(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.outcome == Outcome::InfraError)
            .count()
    }

    /// One row per configuration, one column per revision, then provenance per image.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "## Matrix results: `{}`\n\n| id | configuration |",
            self.matrix
        );
        for r in &self.revisions {
            s.push_str(&format!(" `{}` ({}) |", cell_text(&r.rev), &r.sha[..10]));
        }
        s.push_str("\n|---|---|");
        s.push_str(&"---|".repeat(self.revisions.len()));
        s.push('\n');
        for c in &self.configs {
            s.push_str(&format!("| `{}` | {} |", c.id, cell_text(&c.label)));
            for r in &self.revisions {
                match self.cell(&c.id, &r.sha) {
                    None => s.push_str(" not run |"),
                    Some(cell) => {
                        let sig = cell
                            .signature
                            .as_deref()
                            .map(|t| format!(": {}", cell_text(t)))
                            .unwrap_or_default();
                        let stored = if cell.cached { ", stored" } else { "" };
                        s.push_str(&format!(
                            " **{}**{sig} ({:.1}s{stored}) |",
                            cell.outcome, cell.duration_s
                        ));
                    }
                }
            }
            s.push('\n');
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut prov = String::new();
        for cell in &self.cells {
            let key = cell
                .provenance
                .get("image")
                .cloned()
                .unwrap_or_else(|| "host".into());
            if cell.provenance.is_empty() || !seen.insert(key.clone()) {
                continue;
            }
            // Facts of the image and machine only; per-run values (throughput, steps) stay in
            // the JSON, where they belong to their cell.
            let facts: Vec<String> = cell
                .provenance
                .iter()
                .filter(|(k, _)| IMAGE_FACTS.contains(&k.as_str()))
                .map(|(k, v)| format!("{k}: `{}`", cell_text(v)))
                .collect();
            prov.push_str(&format!(
                "- **{}**: {}\n",
                cell_text(&key),
                facts.join(", ")
            ));
        }
        if !prov.is_empty() {
            s.push_str(&format!("\n### Provenance ({})\n\n{prov}", self.engine));
        }
        s
    }
}
