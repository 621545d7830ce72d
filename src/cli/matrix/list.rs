//! The GitHub Actions job matrix `matrix --list --format github` prints: the configurations
//! grouped by image.

use crate::core::matrix::Config;
use serde_json::json;

/// One GitHub Actions job per image, in first-appearance order.
pub fn github_matrix(configs: &[&Config]) -> serde_json::Value {
    let mut groups: Vec<(String, Vec<&Config>)> = Vec::new();
    for c in configs {
        let image = c.image.clone().unwrap_or_else(|| "host".into());
        match groups.iter_mut().find(|(i, _)| *i == image) {
            Some((_, v)) => v.push(c),
            None => groups.push((image, vec![c])),
        }
    }
    let include: Vec<_> = groups
        .iter()
        .map(|(image, cs)| {
            let first = cs[0];
            let version = first
                .values
                .get("rocm")
                .or(first.values.get("cuda"))
                .map(|v| v.to_string())
                .unwrap_or_default();
            let name = match version.as_str() {
                "" => first.backend.as_str().to_string(),
                v => format!("{}-{v}", first.backend.as_str()),
            };
            json!({
                "name": name, "backend": first.backend, "version": version, "image": image,
                "ids": cs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(","),
            })
        })
        .collect();
    json!({ "include": include })
}
