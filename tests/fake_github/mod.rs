//! The GitHub API stand-in (scripts/fault-injection/fake_github.py) on loopback, as the
//! workflow-harness tests run it: one launcher and one reader of its request log, so every test
//! that posts through the workflows checks the same record of what GitHub was asked.
//! Each test crate uses part of it.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The stand-in, killed on drop.
pub struct FakeGithub {
    child: std::process::Child,
    log: PathBuf,
    pub url: String,
}

impl FakeGithub {
    /// The stand-in, enforcing the tokens the harness registers in `tokens` as GitHub would;
    /// `extra` are fake_github.py's own options (e.g. a page size).
    pub fn start(dir: &Path, tokens: &Path, extra: &[&str]) -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let (log, port_file) = (dir.join("api.log"), dir.join("api.port"));
        let child = std::process::Command::new("python3")
            .arg(root.join("scripts/fault-injection/fake_github.py"))
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--tokens")
            .arg(tokens)
            .args(extra)
            .spawn()
            .expect("python3 runs the GitHub API stand-in");
        let t = Instant::now();
        while !port_file.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "fake GitHub did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let port = std::fs::read_to_string(&port_file).unwrap();
        FakeGithub {
            child,
            log,
            url: format!("http://127.0.0.1:{}", port.trim()),
        }
    }

    /// Every request, as the stand-in logged it (method, path, status, login, body).
    fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// (method, path, status, login of the token) of every request.
    pub fn answers(&self) -> Vec<(String, String, u64, String)> {
        self.entries()
            .iter()
            .map(|v| {
                (
                    v["method"].as_str().unwrap().to_string(),
                    v["path"].as_str().unwrap().to_string(),
                    v["status"].as_u64().unwrap(),
                    v["login"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// (method, path, body) of every request.
    pub fn requests(&self) -> Vec<(String, String, String)> {
        self.entries()
            .iter()
            .map(|v| {
                (
                    v["method"].as_str().unwrap().to_string(),
                    v["path"].as_str().unwrap().to_string(),
                    v["body"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// Comments created (201) on the results issue, harness/results#7.
    pub fn creates(&self) -> usize {
        self.answers()
            .iter()
            .filter(|(m, p, s, _)| m == "POST" && p.contains("/issues/7/comments") && *s == 201)
            .count()
    }

    /// Comments edited (200).
    pub fn edits(&self) -> usize {
        self.answers()
            .iter()
            .filter(|(m, p, s, _)| m == "PATCH" && p.contains("/issues/comments/") && *s == 200)
            .count()
    }

    /// The text of every comment created on harness/results#7 or edited, oldest first.
    pub fn comment_bodies(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|v| {
                let (m, p) = (
                    v["method"].as_str().unwrap_or(""),
                    v["path"].as_str().unwrap_or(""),
                );
                (m == "POST" && p.contains("/issues/7/comments"))
                    || (m == "PATCH" && p.contains("/issues/comments/"))
            })
            .filter_map(|v| {
                let b = v["body"].as_str()?;
                serde_json::from_str::<Value>(b).ok()?["body"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect()
    }
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
