//! Shell completion as a user installs it: the bash script the real binary prints is sourced by
//! a real bash, and a TAB is simulated the way bash's programmable completion calls the
//! function (COMP_WORDS, COMP_CWORD, then the function with command, word and previous word).

use std::path::Path;
use std::process::Command;

/// What TAB offers after `words` (the last one is the word being completed), run from `dir`.
fn complete(dir: &Path, words: &[&str]) -> Vec<String> {
    let bin = assert_cmd::cargo::cargo_bin("setrows-bisect");
    let script = dir.join("setrows-bisect.bash");
    let out = Command::new(&bin)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::write(&script, out.stdout).unwrap();
    let mut argv = vec![bin.to_string_lossy().into_owned()];
    argv.extend(words.iter().map(|w| w.to_string()));
    let quoted: Vec<String> = argv
        .iter()
        .map(|w| setrows_bisect::core::shell::word(w))
        .collect();
    let line = format!(
        "source {s}\nCOMP_WORDS=({w})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}}-1))\n\
         _setrows__bisect \"${{COMP_WORDS[0]}}\" \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        s = setrows_bisect::core::shell::word(&script.to_string_lossy()),
        w = quoted.join(" ")
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &line])
        .current_dir(dir)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{words:?}: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn every_subcommand_completes_its_own_flags() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(complete(tmp.path(), &["matrix", "--li"]), ["--list"]);
    assert_eq!(complete(tmp.path(), &["log", "--wor"]), ["--work-dir"]);
    assert_eq!(complete(tmp.path(), &["bisect-config", "--ax"]), ["--axis"]);
    assert_eq!(complete(tmp.path(), &["--dry-r"]), ["--dry-run"]);
    assert!(complete(tmp.path(), &["ma"]).contains(&"matrix".to_string()));
}

#[test]
fn config_offers_the_matrix_ids_and_op_the_trees_ops() {
    let tmp = tempfile::tempdir().unwrap();
    // No matrix.toml here: the ids are the built-in matrix's, as `matrix --list` prints them.
    let list = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .args(["matrix", "--list"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let ids: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(ids.len() > 10, "{ids:?}");
    let want: Vec<String> = ids
        .iter()
        .filter(|i| i.starts_with("2e"))
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(complete(tmp.path(), &["--config", "2e"]), want);
    assert_eq!(complete(tmp.path(), &["bisect", "--config", "2e"]), want);
    assert_eq!(complete(tmp.path(), &["matrix", "--only", "2e"]), want);

    // A ggml tree of its own: the ops are read from its ggml.c, wherever --repo points.
    let ggml = tmp.path().join("ggml");
    for (path, text) in [
        ("CMakeLists.txt", "project(ggml)\n"),
        ("include/ggml.h", "\n"),
        ("tests/test-backend-ops.cpp", "int main() {}\n"),
        (
            "src/ggml.c",
            "static const char * GGML_OP_NAME[GGML_OP_COUNT] = {\n  \"NONE\",\n  \"SET_ROWS\",\n  \"SET\",\n  \"MUL_MAT\",\n};\n",
        ),
    ] {
        let p = ggml.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let repo = ggml.to_string_lossy().into_owned();
    assert_eq!(
        complete(
            tmp.path(),
            &[
                "--repo",
                &repo,
                "--probe-kind",
                "backend-ops",
                "--op",
                "SET"
            ]
        ),
        ["SET_ROWS", "SET"]
    );
    // From inside the tree, --repo defaults to it.
    assert_eq!(complete(&ggml, &["--op", "M"]), ["MUL_MAT"]);
    // Nowhere near a ggml tree: nothing, and no error on the prompt.
    assert!(complete(tmp.path(), &["--op", ""]).is_empty());
}

#[test]
fn choice_flags_offer_their_words() {
    let tmp = tempfile::tempdir().unwrap();
    for (words, want) in [
        (&["--backend", ""][..], &["cpu", "cuda", "hip"][..]),
        (&["--memory", ""][..], &["device", "unified", "host"][..]),
        (&["--graphs", ""][..], &["on", "off"][..]),
        (&["--wave-size", ""][..], &["32", "64"][..]),
        (&["--graph", ""][..], &["decode-reuse", "ds4"][..]),
        (&["matrix", "--graph", ""][..], &["decode-reuse", "ds4"][..]),
    ] {
        assert_eq!(complete(tmp.path(), words), want, "{words:?}");
    }
}
