//! The real binary running matrices and configuration bisections in podman containers over a
//! generated repository (see container_common for the setup these need).

mod container_common;

use assert_cmd::Command;
use container_common::*;
use serde_json::Value;
use std::path::Path;

fn bin(work: &Path) -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.env("SETROWS_WORK_DIR", work).env_remove("GITHUB_TOKEN");
    c
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_matrix_over_two_images_and_two_revisions() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 6, 3);
    let m = matrix_file(
        d.path(),
        &format!(
            "[matrix]\nbackend = [\"cpu\"]\nimage = [\"{}\", \"{}\"]\n",
            image_a(),
            image_b()
        ),
    );
    let out = d.path().join("out");
    let assert = bin(&d.path().join("work"))
        .args(["matrix", "--engine", "podman", "--matrix"])
        .arg(&m)
        .arg("--repo")
        .arg(&repo)
        .args(["--rev", &shas[1], "--rev", &shas[5], "--out"])
        .arg(&out)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let r = read_json(&out.join("matrix-results.json"));
    let configs = r["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    let id_of = |image: &str| {
        configs
            .iter()
            .find(|c| c["image"] == image)
            .map(|c| c["id"].as_str().unwrap().to_string())
            .unwrap()
    };
    let outcome = |image: &str, sha: &str| -> String {
        let id = id_of(image);
        r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["config"] == id.as_str() && c["sha"] == sha)
            .map(|c| c["outcome"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(outcome(&image_a(), &shas[1]), "pass");
    assert_eq!(outcome(&image_a(), &shas[5]), "wrong_result");
    assert_eq!(outcome(&image_b(), &shas[1]), "wrong_result");
    assert_eq!(outcome(&image_b(), &shas[5]), "wrong_result");
    for cell in r["cells"].as_array().unwrap() {
        let p = &cell["provenance"];
        assert!(
            p["image_digest"].as_str().unwrap().starts_with("sha256:"),
            "{cell}"
        );
        assert!(p["kernel"].is_string(), "{cell}");
        assert!(Path::new(cell["log"].as_str().unwrap()).is_file());
    }
    let md = std::fs::read_to_string(out.join("matrix-results.md")).unwrap();
    assert_eq!(md, stdout);
    assert!(md.contains(&format!("| `{}` |", id_of(&image_b()))), "{md}");
    assert!(
        md.contains("❌ wrong_result") && md.contains("### Provenance"),
        "{md}"
    );
}

#[test]
fn a_missing_image_is_reported_as_infrastructure_not_a_verdict() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    make_repo(&repo, 2, 1);
    let m = matrix_file(
        d.path(),
        "[matrix]\nbackend = [\"cpu\"]\nimage = [\"localhost/setrows-no-such-image:x\"]\n",
    );
    let out = d.path().join("out");
    let assert = bin(&d.path().join("work"))
        .args([
            "matrix",
            "--engine",
            "podman",
            "--retries",
            "1",
            "--rev",
            "HEAD",
            "--matrix",
        ])
        .arg(&m)
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(3);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("infrastructure"), "{stderr}");
    let r = read_json(&out.join("matrix-results.json"));
    let cell = &r["cells"][0];
    assert_eq!(cell["outcome"], "infra_error");
    assert_eq!(
        cell["attempts"], 0,
        "a missing image is not retried (issue 37 item 4)"
    );
    assert!(
        cell["signature"]
            .as_str()
            .unwrap()
            .contains("localhost/setrows-no-such-image:x"),
        "{cell}"
    );
}

#[test]
fn bisect_config_finds_the_first_failing_image() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    make_repo(&repo, 3, 99);
    let m = matrix_file(d.path(), "[matrix]\nbackend = [\"cpu\"]\n");
    let out = d.path().join("out");
    let ladder = format!("{},{},{}", image_a(), image_a(), image_b());
    bin(&d.path().join("work"))
        .args([
            "bisect-config",
            "--engine",
            "podman",
            "--axis",
            "image",
            "--values",
            &ladder,
        ])
        .arg("--matrix")
        .arg(&m)
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(0);
    let r = read_json(&out.join("bisect-config.json"));
    assert_eq!(r["first_failing"], image_b().as_str());
    assert_eq!(r["first_failing_config"]["image"], image_b().as_str());
}

#[test]
fn two_levels_first_failing_value_then_first_bad_commit_inside_it() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    // The program fails from revision 7 on, and only at level >= 5.
    let shas = make_repo(&repo, 12, 7);
    let m = matrix_file(
        d.path(),
        &format!(
            "[matrix]\nbackend = [\"cpu\"]\nimage = [\"{}\"]\n",
            image_a()
        ),
    );
    let out = d.path().join("out");
    bin(&d.path().join("work"))
        .args([
            "bisect-config",
            "--engine",
            "podman",
            "--axis",
            "arg:--level",
        ])
        .args(["--values", "0,2,4,5,6,9", "--good-rev", &shas[0]])
        .arg("--matrix")
        .arg(&m)
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(0);
    let r = read_json(&out.join("bisect-config.json"));
    assert_eq!(r["first_failing"], "5");
    assert_eq!(r["commit_bisect"]["first_bad"], shas[7].as_str(), "{r:#}");
    let md = std::fs::read_to_string(out.join("bisect-config.md")).unwrap();
    assert!(md.contains("First bad commit in configuration"), "{md}");
}

/// Ctrl-C kills the client's process group; the container (owned by conmon) would keep running,
/// so the interrupt handler removes it before the tool exits.
#[test]
fn an_interrupted_matrix_leaves_no_container_behind() {
    let Some(engine) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    make_repo(&repo, 1, 9);
    let m = d.path().join("m.toml");
    std::fs::write(
        &m,
        format!(
            "[probe]\nkind = \"script\"\nscript = \"sleep 600\"\n[matrix]\nbackend = [\"cpu\"]\nimage = [\"{}\"]\n",
            image_a()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .args(["matrix", "--engine", "podman", "--rev", "HEAD", "--matrix"])
        .arg(&m)
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(d.path().join("out"))
        .env("SETROWS_WORK_DIR", d.path().join("work"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let name_prefix = format!("setrows-{}-", child.id());
    let running = || -> Vec<String> {
        let out = std::process::Command::new(&engine.program)
            .args(["ps", "-a", "--format", "{{.Names}}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|n| n.starts_with(&name_prefix))
            .map(String::from)
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while running().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the test container never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        running(),
        Vec::<String>::new(),
        "containers outlived the interrupt"
    );
}
