//! `setrows-bisect gc`: removes checkouts (with their build dirs) and ccache dirs not used for
//! N days. Results, logs and journals stay: they are what later runs reuse and `show` renders.
//! A checkout a running bisect holds is skipped.

use crate::error::{CliError, Exit};
use crate::run::workdir;
use clap::Args;
use std::time::{Duration, SystemTime};

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Remove what has not been used for N days.
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 14, value_parser = |s: &str| crate::cli::ranges::int(s, 0, 36500).map(|v| v as u64))]
    pub older_than: u64,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// `--work-dir`.
    #[command(flatten)]
    pub work_dir: crate::cli::flags::WorkDirFlag,
}

fn human(bytes: u64) -> String {
    let mb = bytes as f64 / (1024.0 * 1024.0);
    if mb >= 1024.0 {
        format!("{:.1} GiB", mb / 1024.0)
    } else {
        format!("{mb:.1} MiB")
    }
}

pub fn run(args: GcArgs) -> anyhow::Result<Exit> {
    let dir = args.work_dir.dir();
    let now = SystemTime::now();
    let items = workdir::gc_plan(&dir, Duration::from_secs(args.older_than * 86_400), now);
    let (mut freed, mut removed, mut busy) = (0u64, 0usize, 0usize);
    for item in &items {
        let days = now
            .duration_since(item.last_used)
            .map(|d| d.as_secs() / 86_400)
            .unwrap_or(0);
        let rel = item.path.strip_prefix(&dir).unwrap_or(&item.path);
        if args.dry_run {
            outln!(
                "would remove {:<8} {} ({}, unused for {days} days)",
                item.kind,
                rel.display(),
                human(item.bytes)
            );
            freed += item.bytes;
            removed += 1;
            continue;
        }
        match workdir::gc_remove(item).map_err(|e| CliError::infra(e.to_string()))? {
            true => {
                outln!(
                    "removed {:<8} {} ({})",
                    item.kind,
                    rel.display(),
                    human(item.bytes)
                );
                freed += item.bytes;
                removed += 1;
            }
            false => {
                outln!("in use, kept {:<8} {}", item.kind, rel.display());
                busy += 1;
            }
        }
    }
    outln!(
        "{} {removed} item(s), {} in {}{}",
        if args.dry_run {
            "would remove"
        } else {
            "removed"
        },
        human(freed),
        dir.display(),
        if busy > 0 {
            format!("; {busy} in use kept")
        } else {
            String::new()
        }
    );
    Ok(Exit::Ok)
}
