//! The configuration matrix as one table: a row per configuration, a column per revision, and
//! the provenance of each image below. Several result files (one per fan-out job, e.g. one per
//! ROCm version) merge into the one table, so the comment and the job that wrote one file show
//! the same layout.

use super::document::Document;
use super::{code, code_cell, escape, icon, secs};
use crate::core::outcome::Outcome;
use crate::core::result::{Cell, MatrixResults};
use std::collections::{BTreeMap, BTreeSet};

/// Provenance keys that describe an image on a machine (the same for every cell in it);
/// per-run values (throughput, steps) stay in the JSON, where they belong to their cell.
const IMAGE_FACTS: &[&str] = &[
    "engine",
    "image",
    "image_digest",
    "kernel",
    "rocm",
    "hip",
    "amdgpu_driver",
    "nvcc",
    "cuda_driver",
    "cuda_driver_api",
    "compiler",
    "gpu",
    "device",
    "backend",
    "ggml_version",
    "provenance_error",
];

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

    /// The table alone, as the terminal and `matrix-results.md` show it.
    pub fn markdown(&self) -> String {
        let mut doc = Document::default();
        render(&[self], &mut doc);
        doc.to_markdown(None)
    }
}

/// Infrastructure reasons up to this long are written in their cell; longer ones (an engine's
/// error text) go below the table, numbered, as signatures do.
const REASON_IN_ROW: usize = 100;

/// A cell as one glance reads it: the symbol, then the outcome word when it is not a pass
/// (signatures go below the table, numbered, so columns stay narrow).
fn cell_text(c: &Cell, note: Option<usize>, build_only: bool) -> String {
    let word = if c.outcome == Outcome::Pass {
        String::new()
    } else {
        format!(" {}", c.outcome)
    };
    let note = note.map(|n| format!(" [{n}]")).unwrap_or_default();
    // A cell that shares another's result says so: it was not run twice.
    let shared = c
        .provenance
        .get("shared_with")
        .map(|id| {
            let what = if build_only { "build" } else { "build and run" };
            format!(" (same {what} as `{}`)", escape::inline_short(id, 40))
        })
        .unwrap_or_default();
    format!("{}{word}{note}{shared}", cell_icon(c.outcome, build_only))
}

/// In a compile check (`matrix --build-only`) a failed build is the finding, not a skip.
fn cell_icon(o: Outcome, build_only: bool) -> &'static str {
    if build_only && o == Outcome::BuildFailed {
        "❌"
    } else {
        icon(o)
    }
}

/// Appends the merged table of `files` to `doc`.
pub fn render(files: &[&MatrixResults], doc: &mut Document) {
    let cells: Vec<&Cell> = files.iter().flat_map(|m| &m.cells).collect();
    let build_only = !files.is_empty() && files.iter().all(|m| m.build_only);
    // Rows and columns in first-appearance order across files; a cell whose configuration has
    // no row in its file still gets one.
    let mut rows: Vec<(String, Option<String>)> = Vec::new();
    let mut add_row = |id: &str, label: Option<&str>| {
        if !rows.iter().any(|(r, _)| r == id) {
            rows.push((id.to_string(), label.map(str::to_string)));
        }
    };
    for m in files {
        for c in &m.configs {
            add_row(&c.id, Some(&c.label));
        }
    }
    for c in &cells {
        add_row(&c.config, None);
    }
    let mut cols: Vec<(String, String)> = Vec::new();
    for m in files {
        for r in &m.revisions {
            if !cols.iter().any(|(s, _)| *s == r.sha) {
                cols.push((r.sha.clone(), r.rev.clone()));
            }
        }
    }
    for c in &cells {
        if !cols.iter().any(|(s, _)| *s == c.sha) {
            cols.push((c.sha.clone(), c.rev.clone()));
        }
    }

    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    for c in &cells {
        *counts.entry(c.outcome).or_default() += 1;
    }
    let tally: Vec<String> = counts
        .iter()
        .map(|(o, n)| format!("{} {n} {o}", cell_icon(*o, build_only)))
        .collect();
    let sources: BTreeSet<String> = files.iter().map(|m| code(&m.matrix)).collect();
    // A document made for cells that never ran (`MatrixResults::cut_off` without a run) names
    // no engine.
    let engines: BTreeSet<String> = files
        .iter()
        .filter(|m| !m.engine.is_empty())
        .map(|m| escape::inline(&m.engine))
        .collect();
    let mut md = format!(
        "## setrows-bisect: configuration matrix{}\n\n{} · engine {} · **{} cell(s):** {}\n\n| id | configuration |",
        if build_only {
            " (build only: no test ran)"
        } else {
            ""
        },
        sources.into_iter().collect::<Vec<_>>().join(", "),
        engines.into_iter().collect::<Vec<_>>().join(", "),
        cells.len(),
        tally.join(" · ")
    );
    // `--apply`: what every cell's tree had applied before its build, said before the table.
    let mut applied: Vec<&crate::core::applied::AppliedInfo> = Vec::new();
    for a in files.iter().flat_map(|m| &m.applied) {
        if !applied.iter().any(|b| b.id == a.id) {
            applied.push(a);
        }
    }
    if !applied.is_empty() {
        let lines: Vec<String> = applied
            .iter()
            .map(|a| {
                format!(
                    "{} ({})",
                    escape::inline(&crate::core::applied::describe_info(a)),
                    code(&a.apply_line())
                )
            })
            .collect();
        let table = md.rfind("\n\n| id |").unwrap_or(md.len());
        md.insert_str(
            table,
            &format!(
                "\n\nApplied to every cell's tree before its build: {}",
                lines.join("; ")
            ),
        );
    }
    for (sha, rev) in &cols {
        let name = escape::cell_short(rev, 40);
        let sha10 = &sha[..sha.len().min(10)];
        if name.is_empty() || rev == sha || sha.starts_with(rev.as_str()) {
            md.push_str(&format!(" {} |", code_cell(sha10)));
        } else {
            md.push_str(&format!(" {name} ({}) |", code_cell(sha10)));
        }
    }
    md.push_str("\n|---|---|");
    md.push_str(&"---|".repeat(cols.len()));
    md.push('\n');
    let mut notes: Vec<String> = Vec::new();
    for (id, label) in &rows {
        md.push_str(&format!(
            "| {} | {} |",
            code_cell(id),
            label
                .as_deref()
                .map(|l| escape::cell_short(l, 100))
                .unwrap_or_default()
        ));
        for (sha, _) in &cols {
            match cells.iter().find(|c| c.config == *id && c.sha == *sha) {
                None => md.push_str(" · |"),
                Some(c) => {
                    // A build that ran although the test could not (no GPU here): it is kept,
                    // and a reader needs to see that it built and where its log is.
                    let built =
                        if c.outcome == Outcome::Untestable && c.build_s > 0.0 && c.test_s == 0.0 {
                            format!(
                                ", built in {}, log {}, not run",
                                secs(c.build_s),
                                code(&super::log_place(&c.log))
                            )
                        } else {
                            String::new()
                        };
                    // An infrastructure error's signature is its reason (a cut-off job, a lost
                    // runner, an engine that is down): the row says it, so a stale or missing
                    // result is read where the cell is, not behind a footnote.
                    let reason = (c.outcome == Outcome::InfraError)
                        .then_some(c.signature.as_deref())
                        .flatten()
                        .filter(|r| r.chars().count() <= REASON_IN_ROW);
                    let note = c
                        .signature
                        .as_deref()
                        .filter(|_| reason.is_none())
                        .map(|sig| {
                            notes.push(format!(
                                "{}. {} at {}: {}{} ({}{}{built})",
                                notes.len() + 1,
                                code(id),
                                code(&sha[..sha.len().min(10)]),
                                cell_icon(c.outcome, build_only),
                                code(&sig.chars().take(160).collect::<String>()),
                                secs(c.duration_s),
                                if c.cached { ", stored" } else { "" }
                            ));
                            notes.len()
                        });
                    let reason = reason
                        .map(|r| format!(": {}", escape::cell(r)))
                        .unwrap_or_default();
                    md.push_str(&format!(" {}{reason} |", cell_text(c, note, build_only)));
                }
            }
        }
        md.push('\n');
    }
    md.push_str(if build_only {
        "\n✅ built · ❌ build failed · ⚠️ could not be built (untestable, infrastructure) · `·` not run\n"
    } else {
        "\n✅ pass · ❌ fails (wrong result, crash, GPU fault, hang) · ⚠️ could not be tested (build failure, untestable, infrastructure) · `·` not run\n"
    });
    let built_now = cells.iter().filter(|c| !c.cached);
    if let Some(line) = super::ccache::line(built_now.filter_map(|c| c.ccache.as_ref())) {
        md.push_str(&format!("\n{line}\n"));
    }
    if !notes.is_empty() {
        md.push_str("\n**Signatures**\n\n");
        md.push_str(&notes.join("\n"));
        md.push('\n');
    }
    if let Some(m) = files.iter().find(|m| m.invocation.argv.len() > 1) {
        let mut argv = m.invocation.argv.clone();
        argv[0] = "setrows-bisect".into();
        md.push_str(&format!(
            "\nRun again:\n\n{}\n",
            escape::code_block(&crate::core::shell::line(&argv)).replacen("text\n", "sh\n", 1)
        ));
    }
    doc.push_markdown(md);
    if let Some(p) = provenance(files) {
        doc.push_markdown(p);
    }
}

/// The facts of each image once (every cell of an image shares them).
fn provenance(files: &[&MatrixResults]) -> Option<String> {
    let mut seen = BTreeSet::new();
    let mut out = String::new();
    for c in files.iter().flat_map(|m| &m.cells) {
        let image = c
            .provenance
            .get("image")
            .cloned()
            .unwrap_or_else(|| "host".into());
        if c.provenance.is_empty() || !seen.insert(image.clone()) {
            continue;
        }
        let facts: Vec<String> = c
            .provenance
            .iter()
            .filter(|(k, _)| IMAGE_FACTS.contains(&k.as_str()))
            .map(|(k, v)| format!("{}: {}", escape::inline(k), code(v)))
            .collect();
        out.push_str(&format!(
            "- **{}**: {}\n",
            escape::inline_short(&image, 120),
            facts.join(", ")
        ));
    }
    if let Some(t) = files.iter().find_map(|m| m.invocation.tool.as_ref()) {
        out.push_str(&format!("\n<sub>{}</sub>\n", escape::inline(&t.line())));
    }
    (!out.is_empty()).then(|| format!("### Provenance\n\n{out}"))
}

/// The reason a lost leg's cells carry: its job wrote nothing (no step ran, or its runner
/// died with the results), which the report can only tell by their absence.
pub const LOST_LEG: &str = "no results: runner offline or lost";

/// One planned leg of a fan-out run (an entry of `matrix --list --format github`'s `include`):
/// its name and the configuration ids it was to run.
pub struct Leg {
    pub name: String,
    pub ids: Vec<String>,
}

/// The legs of `plan` (`{"include":[{name, ids}]}`) that no result file covers: a leg is
/// present when any file has a row for one of its configurations. Each lost leg becomes a
/// document of its own with every configuration an `infra_error` ([`LOST_LEG`]) at every
/// revision the other files have (else `revisions`, as written), so a ROCm version whose runner
/// never reported stays in the table, saying why, instead of silently dropping out.
pub fn lost_legs(
    plan: &serde_json::Value,
    files: &[&MatrixResults],
    labels: &dyn Fn(&str) -> Option<crate::core::result::ConfigRow>,
    revisions: &[String],
) -> Result<(Vec<Leg>, Vec<MatrixResults>), String> {
    use crate::core::result::{ConfigRow, Kind, Rev};
    let include = plan
        .get("include")
        .and_then(|i| i.as_array())
        .ok_or("not a workflow matrix: no `include` list")?;
    let mut revs: Vec<Rev> = Vec::new();
    for m in files {
        for r in &m.revisions {
            if !revs.iter().any(|x| x.sha == r.sha) {
                revs.push(r.clone());
            }
        }
    }
    if revs.is_empty() {
        revs = revisions
            .iter()
            .map(|r| Rev {
                rev: r.clone(),
                sha: r.clone(),
                tree: String::new(),
                checkout: Default::default(),
                facts: Default::default(),
            })
            .collect();
    }
    let (mut lost, mut docs) = (Vec::new(), Vec::new());
    for leg in include {
        let name = leg.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        let ids: Vec<String> = leg
            .get("ids")
            .and_then(|i| i.as_str())
            .ok_or_else(|| format!("leg {name}: no `ids`"))?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let covered = files
            .iter()
            .any(|m| m.configs.iter().any(|c| ids.contains(&c.id)));
        if covered {
            continue;
        }
        let configs: Vec<ConfigRow> = ids
            .iter()
            .map(|id| {
                labels(id).unwrap_or(ConfigRow {
                    id: id.clone(),
                    label: String::new(),
                    backend: crate::core::build::Backend::Cpu,
                    image: None,
                })
            })
            .collect();
        let mut doc = MatrixResults {
            schema: Kind::Matrix.tag(),
            matrix: files
                .first()
                .map(|m| m.matrix.clone())
                .unwrap_or_else(|| "matrix.toml".into()),
            engine: String::new(),
            revisions: revs.clone(),
            configs,
            cells: Vec::new(),
            build_only: false,
            applied: Vec::new(),
            invocation: Default::default(),
        };
        doc.cut_off(LOST_LEG);
        lost.push(Leg {
            name: name.to_string(),
            ids,
        });
        docs.push(doc);
    }
    Ok((lost, docs))
}
