//! One schema for every result: real `bisect`, `matrix` and `bisect-config` runs write documents
//! that match the JSON Schema `setrows-bisect schema KIND` emits, `report` reads all three back,
//! and the terminal, `--report` and the comment show the same markdown.

mod gitcommit;

use assert_cmd::Command;
use gitcommit::commit_all;
use serde_json::Value;
use std::path::Path;

const MATRIX: &str = r#"
[probe]
kind = "script"
script = 'test "$(cat "$SRC/state")" = good'
[launch.plain]
[params.p]
args = []
[matrix]
backend = ["hip"]
gfx = ["gfx1151"]
wave_size = [32]
launch = ["plain"]
params = ["p"]
"#;

fn history(dir: &Path, n: usize, first_bad: usize) -> Vec<String> {
    let repo = git2::Repository::init(dir).unwrap();
    std::fs::create_dir_all(dir.join("src/ggml-hip")).unwrap();
    std::fs::write(dir.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)\n").unwrap();
    std::fs::write(
        dir.join("src/ggml-hip/CMakeLists.txt"),
        "if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n",
    )
    .unwrap();
    (0..n)
        .map(|i| {
            let state = if i >= first_bad { "bad" } else { "good" };
            std::fs::write(dir.join("state"), format!("{state}\n")).unwrap();
            std::fs::write(dir.join("n"), format!("{i}\n")).unwrap();
            commit_all(&repo, &format!("c{i}: set_rows @someone #{i}"))
        })
        .collect()
}

fn bin(d: &Path) -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.current_dir(d)
        .env("SETROWS_WORK_DIR", d.join("work"))
        .env_remove("GITHUB_STEP_SUMMARY");
    c
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The document's top level against the emitted schema: its `schema` tag is the const, every
/// required key is present, and no key is one the schema does not know.
fn check(d: &Path, kind: &str, doc: &Value) {
    let out = bin(d).args(["schema", kind]).assert().success();
    let schema: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(schema["$id"], format!("setrows-bisect/{kind}/1"));
    assert_eq!(
        doc["schema"], schema["properties"]["schema"]["const"],
        "{kind}"
    );
    let props = schema["properties"].as_object().unwrap();
    for key in schema["required"].as_array().unwrap() {
        let key = key.as_str().unwrap();
        assert!(
            doc.get(key).is_some(),
            "{kind}: required {key} missing in {doc}"
        );
    }
    for key in doc.as_object().unwrap().keys() {
        assert!(
            props.contains_key(key),
            "{kind}: {key} is not in the schema"
        );
    }
}

#[test]
fn every_writer_matches_its_schema_and_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let shas = history(&d.join("repo"), 12, 7);
    std::fs::write(d.join("matrix.toml"), MATRIX).unwrap();

    let out = bin(d)
        .args([
            "bisect", "--good", &shas[0], "--bad", &shas[11], "--repo", "repo",
        ])
        .args(["--script", r#"test "$(cat "$SRC/state")" = good"#])
        .args(["--json", "b.json", "--report", "b.md"])
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let b = read(&d.join("b.json"));
    assert_eq!(b["first_bad"], shas[7]);
    check(d, "bisect", &b);
    assert!(b["store_runs"]["runs"]
        .as_array()
        .is_some_and(|r| !r.is_empty()));
    let report_md = std::fs::read_to_string(d.join("b.md")).unwrap();
    assert_eq!(
        stdout.trim_end(),
        report_md.trim_end(),
        "terminal and --report"
    );
    assert!(
        report_md.contains(&format!(
            "**First bad commit:** `{}` c7: `set_rows @someone #7`",
            &shas[7][..12]
        )),
        "{report_md}"
    );

    // A plan (`--dry-run --json FILE`) against `schema plan`: nothing ran, the same checks.
    bin(d)
        .args([
            "bisect", "--good", &shas[0], "--bad", &shas[11], "--repo", "repo",
        ])
        .args(["--script", "true", "--dry-run", "--json", "plan.json"])
        .assert()
        .code(0);
    let plan = read(&d.join("plan.json"));
    check(d, "plan", &plan);
    assert_eq!(
        plan["reproducer"],
        Value::Null,
        "a script has no reproducer"
    );

    bin(d)
        .args([
            "matrix", "--engine", "none", "--repo", "repo", "--rev", &shas[0], "--rev", &shas[11],
        ])
        .assert()
        .success();
    let m = read(&d.join("matrix-results/matrix-results.json"));
    check(d, "matrix", &m);
    assert_eq!(m["cells"].as_array().unwrap().len(), 2);

    bin(d)
        .args([
            "bisect-config",
            "--engine",
            "none",
            "--repo",
            "repo",
            "--rev",
            &shas[11],
        ])
        .args(["--axis", "arg:--steps", "--values", "1,2"])
        .assert()
        .code(1);
    let c = read(&d.join("matrix-results/bisect-config.json"));
    check(d, "bisect-config", &c);
    assert_eq!(c["conclusion"]["kind"], "bad_endpoint");

    // `report` reads all three; its comment body holds the same bisect markdown as the terminal.
    let out = bin(d)
        .args([
            "report",
            "--results",
            "b.json",
            "matrix-results/matrix-results.json",
        ])
        .arg("matrix-results/bisect-config.json")
        .assert()
        .success();
    let body = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    // The same text; only the picture differs (mermaid there, a text drawing here).
    let (head, rest) = report_md
        .split_once("### Probes over the range")
        .expect("a timeline");
    let tail = &rest[rest.find("| # | commit |").expect("probe table")..];
    assert!(
        body.contains(head) && body.contains(tail.trim_end()) && body.contains("```mermaid"),
        "comment differs from the terminal:\n{body}"
    );
    assert!(
        body.contains("## setrows-bisect: configuration matrix"),
        "{body}"
    );
    assert!(
        body.contains("## setrows-bisect: configuration bisection `arg:--steps`"),
        "{body}"
    );
    assert!(body.contains("nothing to bisect on this ladder"), "{body}");
}
