//! Shared by the container tests: the engine (or a loud failure under CI), test images, and a
//! small generated git repository with a CMake-built C program whose behaviour changes at a
//! known commit.
#![allow(dead_code)]

#[path = "../gitcommit/mod.rs"]
mod gitcommit;

use setrows_bisect::probe::container::{Engine, EngineChoice};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

pub fn image_a() -> String {
    std::env::var("SETROWS_TEST_IMAGE").unwrap_or_else(|_| "localhost/setrows-cpu:bookworm".into())
}

/// Same toolchain plus `/etc/setrows-variant`, which the test scripts treat as "broken".
pub fn image_b() -> String {
    std::env::var("SETROWS_TEST_IMAGE_B")
        .unwrap_or_else(|_| "localhost/setrows-cpu-variant:bookworm".into())
}

#[path = "../tools/mod.rs"]
mod tools;
use tools::in_ci;

/// podman, proven able to run both test images; `None` (test skipped, with a note) only when
/// not under CI.
pub fn podman() -> Option<Engine> {
    static READY: OnceLock<Result<Engine, String>> = OnceLock::new();
    let r = READY.get_or_init(|| {
        let e = Engine::detect(EngineChoice::Podman)
            .map_err(|e| e.to_string())?
            .ok_or("no engine")?;
        for image in [image_a(), image_b()] {
            let out = Command::new(&e.program)
                .args(["run", "--rm", "--network", "none", &image, "true"])
                .output()
                .map_err(|err| err.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "`podman run {image} true` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(e)
    });
    match r {
        Ok(e) => Some(e.clone()),
        Err(why) if in_ci() => panic!(
            "container tests need podman and the test images under CI: {why}. \
             Run `eval \"$(bash scripts/setup.d/30-podman.sh)\"` (as root) first."
        ),
        Err(why) => {
            eprintln!("SKIPPED (not CI): {why}; run scripts/setup.d/30-podman.sh");
            None
        }
    }
}

pub fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("setrows-test-{what}-{}-{nanos}", std::process::id())
}

/// A repository of `n` commits; commit `i` (0-based) returns 1 from its program when
/// `i >= bad_from` and its `--level` argument (default 10) is at least 5. Returns the commit shas, oldest first.
pub fn make_repo(dir: &Path, n: usize, bad_from: usize) -> Vec<String> {
    let repo = git2::Repository::init(dir).unwrap();
    let mut shas = Vec::new();
    for i in 0..n {
        std::fs::write(
            dir.join("CMakeLists.txt"),
            "cmake_minimum_required(VERSION 3.13)\nproject(t C)\nadd_executable(t t.c)\n",
        )
        .unwrap();
        let ret = i32::from(i >= bad_from);
        std::fs::write(
            dir.join("t.c"),
            format!(
                "/* revision {i} */\n#include <stdlib.h>\n\
                 int main(int argc, char **argv) {{\n\
                 \tint level = argc > 2 ? atoi(argv[2]) : 10;\n\
                 \treturn {ret} && level >= 5;\n}}\n"
            ),
        )
        .unwrap();
        shas.push(gitcommit::commit_all(&repo, &format!("revision {i}")));
    }
    shas
}

/// The probe the matrix tests use: a CMake build with the configuration's recipe arguments,
/// then the program; images with `/etc/setrows-variant` fail regardless of the revision.
pub const BUILD: &str = r#"cmake -S "$SRC" -B "$WORK" -G Ninja $SETROWS_CMAKE_ARGS >/dev/null && cmake --build "$WORK""#;
pub const TEST: &str = r#"if [ -f /etc/setrows-variant ]; then echo "variant image: wrong result"; exit 1; fi; "$WORK/t" $SETROWS_REPRO_ARGS"#;

pub fn matrix_file(dir: &Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("matrix.toml");
    std::fs::write(
        &p,
        format!(
            "[probe]\nkind = \"script\"\nbuild = '{BUILD}'\nscript = '{TEST}'\ntimeout_s = 120\n\n{body}"
        ),
    )
    .unwrap();
    p
}

/// `name` on PATH, under the tools rule (fails under CI, skipped loudly elsewhere).
pub fn tools_require(name: &str) -> Option<()> {
    tools::require(
        setrows_bisect::probe::exec::which(name).map(|_| ()),
        name,
        "scripts/setup.d/00-base.sh",
    )
}
