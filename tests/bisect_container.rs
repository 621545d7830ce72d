//! `bisect --engine podman --image IMAGE`: a real bisection whose build and test steps run in
//! the CPU build image (`scripts/setup.d/30-podman.sh` builds it and prints `CONTAINERS_CONF` and
//! `SETROWS_TEST_IMAGE`). Without podman and the image these tests fail under `CI=true`.

#[path = "container_common/mod.rs"]
mod container_common;

use container_common::*;
use std::path::Path;
use std::process::Command;

fn bisect(repo: &Path, shas: &[String], work: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(repo)
        .args(["--good", &shas[0], "--bad", &shas[shas.len() - 1]])
        .args(["--build", BUILD, "--script", TEST])
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(work.with_extension("json"))
        .args(extra)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bisect_in_podman_finds_the_planted_commit() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 12, 7);
    let work = d.path().join("work");
    let image = image_a();
    let (code, stderr) = bisect(
        &repo,
        &shas,
        &work,
        &["--engine", "podman", "--image", &image],
    );
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(v["first_bad"], shas[7], "{v}");
    // The hand-reproduce lines name the image the steps ran in (they run on the host).
    let hint = v["reproduce"].as_str().unwrap_or_default();
    assert!(
        hint.starts_with(&format!("# the bisect ran these steps in {image} (podman")),
        "{hint}"
    );
    // The stats log ccache wrote inside the container (under the mounted build dir) is read
    // on the host: the first build, with a cold cache, counted its misses.
    let probes = v["probes"].as_array().unwrap();
    assert!(
        probes.iter().all(|p| p["ccache"]["state"] == "used"),
        "{v:#}"
    );
    assert!(probes[0]["ccache"]["misses"].as_u64() > Some(0), "{v:#}");
    // Every stored run says where it ran: podman, this image, its digest.
    let mut runs = 0;
    for key in std::fs::read_dir(work.join("results")).unwrap() {
        for run in std::fs::read_dir(key.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(run.unwrap().path()).unwrap();
            let r: serde_json::Value = serde_json::from_str(&text).unwrap();
            let p = &r["report"]["provenance"];
            assert_eq!(p["engine"], "podman", "{r}");
            assert_eq!(p["image"], image.as_str(), "{r}");
            assert!(
                p["image_digest"].as_str().unwrap().starts_with("sha256:"),
                "{r}"
            );
            runs += 1;
        }
    }
    assert_eq!(runs, v["probes"].as_array().unwrap().len());

    // The same bisect on the host is a different prober: nothing stored in the container is
    // taken for a host result.
    let (code, stderr) = bisect(&repo, &shas, &work, &[]);
    assert_eq!(code, 0, "{stderr}");
    let host: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(host["first_bad"], shas[7]);
    assert!(host["probes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["cached"] == false));
}

#[test]
fn a_missing_image_is_an_infrastructure_error() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 3, 2);
    let (code, stderr) = bisect(
        &repo,
        &shas,
        &d.path().join("work"),
        &[
            "--engine",
            "podman",
            "--image",
            "localhost/setrows-no-such-image:none",
        ],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("setrows-no-such-image"), "{stderr}");
}

#[test]
fn engine_and_image_without_each_other_are_usage_errors() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 3, 2);
    for extra in [
        &["--image", "localhost/setrows-cpu:bookworm"][..],
        &["--engine", "podman"][..],
        &["--engine", "auto"][..],
    ] {
        let (code, stderr) = bisect(&repo, &shas, &d.path().join("work"), extra);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{extra:?}: {stderr}");
        assert!(
            stderr.contains("--image") && stderr.contains("--engine"),
            "{stderr}"
        );
    }
}

/// Every stored run of `work` (its report's provenance).
fn stored_provenance(work: &Path) -> Vec<serde_json::Value> {
    let mut v = Vec::new();
    for key in std::fs::read_dir(work.join("results")).unwrap() {
        for run in std::fs::read_dir(key.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(run.unwrap().path()).unwrap();
            let r: serde_json::Value = serde_json::from_str(&text).unwrap();
            v.push(r["report"]["provenance"].clone());
        }
    }
    v
}

#[test]
fn a_config_bisect_runs_in_the_configurations_image_and_flags_reuse_its_runs() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 12, 7);
    let work = d.path().join("work");
    let image = image_a();
    let m = matrix_file(
        d.path(),
        &format!("[matrix]\nbackend = [\"cpu\"]\nimage = [\"{image}\"]\n"),
    );
    let parsed =
        setrows_bisect::core::matrix::parse("m", &std::fs::read_to_string(&m).unwrap()).unwrap();
    let id = parsed.configs[0].id.clone();
    // --config alone: the configuration's image (engine auto), probe and timeout.
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&repo)
        .args([
            "--good", &shas[0], "--bad", &shas[11], "--config", &id, "--matrix",
        ])
        .arg(&m)
        .arg("--work-dir")
        .arg(&work)
        .arg("--json")
        .arg(work.with_extension("json"))
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(v["first_bad"], shas[7], "{v}");
    assert_eq!(v["configuration"]["id"], id.as_str(), "{v}");
    assert_eq!(v["configuration"]["image"], image.as_str(), "{v}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("**Configuration:** `{id}`")),
        "{stdout}"
    );
    let stored = stored_provenance(&work);
    assert_eq!(stored.len(), v["probes"].as_array().unwrap().len());
    for p in &stored {
        assert_eq!(p["configuration"], id.as_str(), "{p}");
        assert_eq!(p["engine"], "podman", "{p}");
        assert!(
            p["image_digest"].as_str().unwrap().starts_with("sha256:"),
            "{p}"
        );
    }

    // The same configuration as explicit flags: every probe answered from the store.
    let (code, stderr) = bisect(
        &repo,
        &shas,
        &work,
        &["--engine", "podman", "--image", &image, "--timeout", "120"],
    );
    assert_eq!(code, 0, "{stderr}");
    let f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(f["first_bad"], shas[7], "{f}");
    let probes = f["probes"].as_array().unwrap();
    assert!(!probes.is_empty());
    assert!(probes.iter().all(|p| p["cached"] == true), "{f}");
    assert_eq!(f["executed"], 0, "{f}");
    assert_eq!(stored_provenance(&work).len(), stored.len(), "no new runs");

    // Another configuration (a launch variable) shares nothing.
    let (code, stderr) = bisect(
        &repo,
        &shas,
        &work,
        &[
            "--engine",
            "podman",
            "--image",
            &image,
            "--timeout",
            "120",
            "--launch-env",
            "X=1",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.with_extension("json")).unwrap())
            .unwrap();
    assert!(
        g["probes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["cached"] == false),
        "{g}"
    );
}

/// An engine that cannot start any container (here runc refusing an rlimit past the kernel's
/// maximum, the failure podman shows on this kind of host without the setup script's
/// CONTAINERS_CONF) is reported as such, with the engine's own error: not as a work dir the
/// container cannot write, which only a started container can find out.
#[test]
fn an_engine_that_cannot_start_a_container_says_so_in_its_own_words() {
    let Some(_) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 3, 2);
    let conf = d.path().join("containers.conf");
    std::fs::write(
        &conf,
        "[containers]\ndefault_ulimits = [\"nofile=2000000000:2000000000\"]\n[engine]\nruntime = \"runc\"\n",
    )
    .unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&repo)
        .args(["--good", &shas[0], "--bad", &shas[2]])
        .args(["--build", BUILD, "--script", TEST])
        .arg("--work-dir")
        .arg(d.path().join("work"))
        .args(["--engine", "podman", "--image", &image_a()])
        .env("CONTAINERS_CONF", &conf)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("could not start a container"), "{stderr}");
    assert!(
        stderr.contains("rlimit"),
        "the engine's own error: {stderr}"
    );
    assert!(!stderr.contains("not writable"), "{stderr}");
}
