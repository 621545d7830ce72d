//! The decode probe's llama.cpp settings (issue 34 item 2) through the real binary: the flags
//! reach the plan's configuration and the decode-probe command line, a default value is the
//! configuration (and store key) of no flag, a setting given to the replay or a script is one
//! line and exit 2 before any work, a bad value is one line naming the flag, and matrix.toml and
//! `bisect-config` take the same settings as axes (errors at file:line).

mod common;
use common::git;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A two-commit repository that looks like a llama.cpp tree to the plan (include/llama.h beside
/// a top-level CMakeLists.txt); a dry run reads no more of it.
fn llama_like(dir: &Path) -> (PathBuf, String, String) {
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("include")).unwrap();
    std::fs::create_dir_all(repo.join("ggml/src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("CMakeLists.txt"), "project(llama)\n").unwrap();
    std::fs::write(repo.join("include/llama.h"), "// llama\n").unwrap();
    std::fs::write(repo.join("ggml/src/ggml.c"), "int a;\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "one"]);
    let good = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(repo.join("ggml/src/ggml.c"), "int b;\n").unwrap();
    git(&repo, &["commit", "-qam", "two"]);
    let bad = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    (repo, good, bad)
}

fn bin() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
    c.env_remove("SETROWS_WORK_DIR");
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The stderr of a refused run: exactly one line, and the code 2.
fn one_line_refusal(o: &Output) -> String {
    let (_, err) = text(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    lines[0].to_string()
}

struct Repo {
    dir: tempfile::TempDir,
    repo: PathBuf,
    good: String,
    bad: String,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let (repo, good, bad) = llama_like(dir.path());
        Repo {
            dir,
            repo,
            good,
            bad,
        }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn bisect(&self, args: &[&str]) -> Output {
        bin()
            .arg("--repo")
            .arg(&self.repo)
            .args(["--good", &self.good, "--bad", &self.bad])
            .arg("--work-dir")
            .arg(self.work())
            .args(args)
            .output()
            .unwrap()
    }
}

fn store_key(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("store key of these probes: "))
        .unwrap_or_else(|| panic!("no store key line: {stdout}"))
        .to_string()
}

#[test]
fn the_dry_run_shows_the_settings_and_the_decode_probe_command_and_defaults_keep_the_key() {
    let r = Repo::new();
    let base = ["--probe-kind", "decode", "--dry-run"];
    let plain = r.bisect(&base);
    let (plain_out, err) = text(&plain);
    assert!(plain.status.success(), "{err}");

    let mut with = base.to_vec();
    with.extend([
        "--flash-attn",
        "on",
        "--cache-type-k",
        "q8_0",
        "--batch-size",
        "8",
        "--ubatch-size",
        "4",
        "--weight-type",
        "q4_0",
        "--head-dim",
        "64",
        "--gqa",
        "4",
        "--ctx-size",
        "512",
    ]);
    let set = r.bisect(&with);
    let (out, err) = text(&set);
    assert!(set.status.success(), "{err}");
    assert!(
        out.contains("flash_attn=on cache_type_k=q8_0 ctx_size=512 batch_size=8 ubatch_size=4 weight_type=q4_0 head_dim=64 gqa=4"),
        "the configuration's settings: {out}"
    );
    // the probe options on its command line; the model settings are the model file
    assert!(
        out.contains("decode-probe --model MODEL.gguf --flash-attn on --cache-type-k q8_0 --ctx-size 512 --batch-size 8 --ubatch-size 4"),
        "{out}"
    );
    assert!(out.contains("512 KV cells"), "{out}");
    assert!(!out.contains("--weight-type"), "{out}");
    assert_ne!(store_key(&out), store_key(&plain_out));

    // the defaults, given: the same configuration and key as no flag at all
    let mut defaults = base.to_vec();
    defaults.extend([
        "--cache-type-k",
        "f16",
        "--cache-type-v",
        "f16",
        "--ctx-size",
        "256",
        "--batch-size",
        "1",
        "--ubatch-size",
        "1",
        "--parallel",
        "1",
        "--n-gpu-layers",
        "all",
        "--weight-type",
        "f16",
        "--head-dim",
        "128",
        "--gqa",
        "1",
    ]);
    let d = r.bisect(&defaults);
    let (dout, err) = text(&d);
    assert!(d.status.success(), "{err}");
    assert_eq!(store_key(&dout), store_key(&plain_out));
    assert!(dout.contains("decode-probe --model MODEL.gguf ("), "{dout}");
}

#[test]
fn a_setting_for_another_probe_or_a_bad_value_is_one_line_before_any_work() {
    let r = Repo::new();
    let line = one_line_refusal(&r.bisect(&["--flash-attn", "on", "--dry-run"]));
    assert!(
        line.contains("--flash-attn on") && line.contains("--probe-kind decode"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--script", "true", "--cache-type-v", "q4_0"]));
    assert!(
        line.contains("--cache-type-v q4_0") && line.contains("--script"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--flash-attn", "yes"]));
    assert!(
        line.contains("--flash-attn") && line.contains("off, on or auto"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--head-dim", "96"]));
    assert!(
        line.contains("--head-dim") && line.contains("64, 128 or 256"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--ubatch-size", "4"]));
    assert!(
        line.contains("--ubatch-size 4") && line.contains("--batch-size 1"),
        "{line}"
    );
    assert!(!r.work().exists(), "nothing ran, nothing was written");
}

/// `--compare-good` compares the decode probe's logits: refused in one line with the replay, a
/// script or a build-only question; its dry run says a run records `--good` first and that the
/// store key is not known before that; `--sliding-window` reaches the configuration.
#[test]
fn compare_good_is_the_decode_probes_and_its_dry_run_says_it_records_good_first() {
    let r = Repo::new();
    let line = one_line_refusal(&r.bisect(&["--compare-good", "--dry-run"]));
    assert!(
        line.contains("--compare-good") && line.contains("--probe-kind decode"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--compare-good", "--script", "true"]));
    assert!(line.contains("--compare-good"), "{line}");
    let line = one_line_refusal(&r.bisect(&[
        "--probe-kind",
        "decode",
        "--compare-good",
        "--regress",
        "build",
    ]));
    assert!(line.contains("--regress build"), "{line}");
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--sliding-window", "x"]));
    assert!(line.contains("--sliding-window"), "{line}");
    assert!(!r.work().exists(), "nothing ran, nothing was written");
    let o = r.bisect(&[
        "--probe-kind",
        "decode",
        "--compare-good",
        "--sliding-window",
        "128",
        "--dry-run",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        out.contains(&format!(
            "--compare-good: a run first probes --good {}",
            &r.good[..10]
        )),
        "{out}"
    );
    assert!(out.contains("sliding_window=128"), "{out}");
    assert!(
        out.contains("already in the store: not counted (the key names the --good commit's logits"),
        "{out}"
    );
    assert!(!out.contains("store key of these probes: "), "{out}");
}

const MATRIX: &str = "[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cpu\"]\nflash_attn = [\"off\", \"on\"]\ncache_type_k = [\"f16\", \"q8_0\"]\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_matrix_with_settings_axes_expands_lists_and_keeps_the_default_rows_ids() {
    let d = tempfile::tempdir().unwrap();
    let m = write(d.path(), "m.toml", MATRIX);
    let o = bin()
        .args(["matrix", "--list", "--format", "json", "--matrix"])
        .arg(&m)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).expect("json list");
    let labels: Vec<&str> = list
        .as_array()
        .expect("an array of configurations")
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "backend=cpu flash_attn=off",
            "backend=cpu flash_attn=off cache_type_k=q8_0",
            "backend=cpu flash_attn=on",
            "backend=cpu flash_attn=on cache_type_k=q8_0"
        ]
    );
    // the f16 row (the default) has the id of the same row in a matrix without the axis
    let without = write(
        d.path(),
        "w.toml",
        "[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cpu\"]\nflash_attn = [\"off\"]\n",
    );
    let o = bin()
        .args(["matrix", "--list", "--format", "json", "--matrix"])
        .arg(&without)
        .output()
        .unwrap();
    let w: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    assert_eq!(w[0]["id"], list[0]["id"]);
    assert_ne!(list[0]["id"], list[1]["id"]);
}

#[test]
fn matrix_settings_errors_point_at_the_file_line_and_key() {
    let d = tempfile::tempdir().unwrap();
    let list = |text: &str| {
        let m = write(d.path(), "bad.toml", text);
        let o = bin()
            .args(["matrix", "--list", "--matrix"])
            .arg(&m)
            .output()
            .unwrap();
        one_line_refusal(&o)
    };
    let line = list(&MATRIX.replace("\"on\"]", "\"yes\"]"));
    assert!(
        line.contains("bad.toml:5:")
            && line.contains("key `flash_attn`")
            && line.contains("off, on or auto"),
        "{line}"
    );
    let line = list(&MATRIX.replace("kind = \"decode\"", "kind = \"replay\""));
    assert!(
        line.contains("bad.toml:5:") && line.contains("decode probe"),
        "{line}"
    );
    let line = list("[probe]\nkind = \"decode\"\n[matrix]\nctx_size = [\"big\"]\n");
    assert!(
        line.contains("bad.toml:4:") && line.contains("key `ctx_size`") && line.contains("integer"),
        "{line}"
    );
}

/// `bisect-config --axis flash_attn` walks the ladder in decode configurations: each value's
/// cell is the decode probe with that setting (here on a tree that is not llama.cpp, so every
/// cell is untestable at once and nothing is built); a value the axis does not take is one
/// line before anything runs.
#[test]
fn bisect_config_takes_a_settings_axis() {
    let d = tempfile::tempdir().unwrap();
    let m = write(d.path(), "m.toml", MATRIX);
    let repo = d.path().join("plain");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("x.c"), "int x;\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "x"]);
    let run = |values: &str| {
        bin()
            .args(["bisect-config", "--axis", "flash_attn", "--values", values])
            .arg("--matrix")
            .arg(&m)
            .arg("--repo")
            .arg(&repo)
            .arg("--work-dir")
            .arg(d.path().join("work"))
            .arg("--out")
            .arg(d.path().join("out"))
            .args(["--engine", "none"])
            .output()
            .unwrap()
    };
    let line = one_line_refusal(&run("off,maybe"));
    assert!(
        line.contains("--axis flash_attn = maybe") && line.contains("off, on or auto"),
        "{line}"
    );
    let o = run("off,on");
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(2), "accepted: {out}{err}");
    let doc = std::fs::read_dir(d.path().join("out"))
        .expect("results written")
        .filter_map(|e| e.ok())
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap_or_else(|| panic!("no json result: {out}{err}"));
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["axis"], "flash_attn");
    assert_eq!(doc["ladder"], serde_json::json!(["off", "on"]));
    for p in doc["probes"].as_array().unwrap() {
        assert_eq!(p["cell"]["outcome"], "untestable", "{p}");
    }
}

/// `--n-head-kv` (the tiny model's K/V heads) with a GQA ratio that is not a power of 2: the
/// flags reach the configuration and its key, are the model's (no decode-probe option), and a
/// shape the model cannot take is one line before any work; the matrix takes the same axis
/// (`auto`, its default, keeps a row's id) and points at the key of a shape too wide.
#[test]
fn k_v_heads_reach_the_configuration_and_a_shape_too_wide_is_one_line() {
    let r = Repo::new();
    let base = ["--probe-kind", "decode", "--dry-run", "--gqa", "3"];
    let one = r.bisect(&base);
    let (one_out, err) = text(&one);
    assert!(one.status.success(), "{err}");
    let mut with = base.to_vec();
    with.extend([
        "--n-head-kv",
        "2",
        "--flash-attn",
        "on",
        "--batch-size",
        "8",
    ]);
    let o = r.bisect(&with);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("flash_attn=on batch_size=8 gqa=3 n_head_kv=2"),
        "{out}"
    );
    assert!(
        out.contains("decode-probe --model MODEL.gguf --flash-attn on --batch-size 8"),
        "{out}"
    );
    assert!(!out.contains("--n-head-kv"), "a model setting: {out}");
    assert_ne!(store_key(&out), store_key(&one_out));
    let mut auto = base.to_vec();
    auto.extend(["--n-head-kv", "auto"]);
    let a = r.bisect(&auto);
    assert_eq!(
        store_key(&text(&a).0),
        store_key(&one_out),
        "auto is the default"
    );

    let line =
        one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--gqa", "6", "--n-head-kv", "4"]));
    assert!(
        line.contains("--n-head-kv 4 with --gqa 6 and --head-dim 128 makes 24 heads, 3072 wide")
            && line.contains("1 to 2 K/V heads"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--n-head-kv", "0"]));
    assert!(
        line.contains("--n-head-kv") && line.contains(">= 1 or auto"),
        "{line}"
    );
    let line = one_line_refusal(&r.bisect(&["--probe-kind", "decode", "--gqa", "9"]));
    assert!(line.contains("--gqa") && line.contains("8"), "{line}");
    assert!(!r.work().exists(), "nothing ran, nothing was written");

    let d = tempfile::tempdir().unwrap();
    let m = write(
        d.path(),
        "kv.toml",
        "[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cpu\"]\ngqa = [3]\nn_head_kv = [\"auto\", 2]\n",
    );
    let o = bin()
        .args(["matrix", "--list", "--format", "json", "--matrix"])
        .arg(&m)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).expect("json list");
    let labels: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["backend=cpu gqa=3", "backend=cpu gqa=3 n_head_kv=2"]
    );
    let wide = write(
        d.path(),
        "wide.toml",
        "[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cpu\"]\ngqa = [6]\nn_head_kv = [4]\n",
    );
    let o = bin()
        .args(["matrix", "--list", "--matrix"])
        .arg(&wide)
        .output()
        .unwrap();
    let line = one_line_refusal(&o);
    assert!(
        line.contains("wide.toml:6:")
            && line.contains("key `n_head_kv`")
            && line.contains("3072 wide"),
        "{line}"
    );
}
