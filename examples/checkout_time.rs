//! Checkout time of a slot, whole tree against what the bundled reproducer reads (ggml's
//! directory and its `VENDOR.md`), on a real repository: BENCHMARKS.md "lucebox checkouts".
//!
//! `cargo run --release --example checkout_time -- REPO READS SHA...` with READS `tree` or
//! `ggml`: a fresh checkout of the first SHA, then moves to each next one (the incremental
//! path a bisection takes), each timed; a checkout that fails prints its error and the time
//! it took to fail.

use setrows_bisect::probe::Reads;
use setrows_bisect::run::git::Checkout;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [repo, reads, shas @ ..] = args.as_slice() else {
        eprintln!("usage: checkout_time REPO tree|ggml SHA...");
        std::process::exit(2);
    };
    let reads = match reads.as_str() {
        "tree" => Reads::Tree,
        "ggml" => Reads::Ggml,
        other => {
            eprintln!("READS is tree or ggml, not {other}");
            std::process::exit(2);
        }
    };
    let repo = git2::Repository::open(repo).expect("open the repository");
    let tmp = tempfile::tempdir().expect("temp dir");
    let slot = Checkout::new(tmp.path().join("src"), tmp.path().join("state"));
    for (i, sha) in shas.iter().enumerate() {
        let sha = repo
            .revparse_single(sha)
            .and_then(|o| o.peel_to_commit())
            .expect("a commit")
            .id()
            .to_string();
        let started = Instant::now();
        let res = slot.checkout_reading(&repo, &sha, reads, None);
        let took = started.elapsed().as_secs_f64();
        let (files, bytes) = size(&slot.dir);
        let kind = if i == 0 { "fresh" } else { "move" };
        match res {
            Ok(()) => println!(
                "{kind} {} {reads:?}: {took:.3} s, {files} files, {:.1} MB on disk",
                &sha[..10],
                bytes as f64 / 1e6
            ),
            Err(e) => {
                println!(
                    "{kind} {} {reads:?}: FAILED after {took:.3} s: {e}",
                    &sha[..10]
                );
                std::process::exit(1);
            }
        }
    }
}

fn size(dir: &std::path::Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                bytes += m.len();
            }
        }
    }
    (files, bytes)
}
