//! HTTP details of talking to GitHub, kept pure so they are tested without a server: which
//! responses are rate limits and how long to wait, what error each status means, and where the
//! next page of a listing is.

use super::GithubError;
use http::{HeaderMap, StatusCode, Uri};
use std::time::Duration;

/// `--api-url` as the client will use it; checked before any probe runs, so a typo is found in
/// the first second rather than after hours of probing.
pub fn api_base(api_url: &str) -> Result<Uri, GithubError> {
    let bad = || GithubError::InvalidApiUrl(api_url.to_string());
    let base: Uri = api_url.trim_end_matches('/').parse().map_err(|_| bad())?;
    if !matches!(base.scheme_str(), Some("http" | "https")) || base.authority().is_none() {
        return Err(bad());
    }
    Ok(base)
}

/// What a request is for, to name it in errors.
pub(crate) struct Ctx<'a> {
    pub what: &'a str,
    pub target: &'a str,
}

/// Exponential backoff for server and transport errors: 1 s, 2 s, 4 s, ... 16 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64 << attempt.min(5))
}

/// GitHub's `message`, or the start of the body; one line, short, escaped of nothing sensitive
/// (responses never echo our Authorization header).
pub(crate) fn error_message(text: &str) -> String {
    let msg = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.trim().to_string());
    let one_line: String = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(300).collect()
}

/// `Retry-After` as RFC 9110 allows it: delay-seconds, or an HTTP date (the wait is until then,
/// zero when it is past). Anything else is ignored.
pub(crate) fn retry_after(
    headers: &HeaderMap,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<i64>() {
        return Some(Duration::from_secs(secs.max(0) as u64));
    }
    // IMF-fixdate ("Wed, 21 Oct 2015 07:28:00 GMT") is RFC 2822 with the zone spelled GMT.
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let wait = (at.with_timezone(&chrono::Utc) - now).num_seconds().max(0);
    Some(Duration::from_secs(wait as u64))
}

/// Is this a rate limit (or a 503 that says when to come back), and how long does GitHub ask us
/// to wait? Primary: `x-ratelimit-remaining: 0` (wait until `x-ratelimit-reset`). Secondary:
/// `retry-after`, or a 403/429 whose message says so (GitHub: wait at least a minute).
pub(crate) fn rate_limit(
    status: StatusCode,
    headers: &HeaderMap,
    message: &str,
) -> Option<(&'static str, Duration)> {
    if status == StatusCode::SERVICE_UNAVAILABLE {
        // Without Retry-After a 503 is a server error like any other (backoff).
        return retry_after(headers, chrono::Utc::now()).map(|w| ("service unavailable", w));
    }
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let num = |name: &str| -> Option<i64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if let Some(wait) = retry_after(headers, chrono::Utc::now()) {
        return Some(("secondary rate limit", wait));
    }
    if num("x-ratelimit-remaining") == Some(0) {
        let now = chrono::Utc::now().timestamp();
        let wait = num("x-ratelimit-reset").map_or(60, |r| (r - now).clamp(1, i64::MAX));
        return Some(("primary rate limit", Duration::from_secs(wait as u64)));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || message.to_lowercase().contains("rate limit") {
        return Some(("secondary rate limit", Duration::from_secs(60)));
    }
    None
}

pub(crate) fn classify(
    status: StatusCode,
    message: &str,
    text: &str,
    ctx: &Ctx<'_>,
) -> GithubError {
    let what = ctx.what.to_string();
    match status.as_u16() {
        401 => GithubError::Unauthorized {
            what,
            message: message.to_string(),
        },
        // GitHub's words for a comment on a locked issue; no permission would change it.
        403 if message.contains("issue is locked") => GithubError::Locked {
            what,
            message: message.to_string(),
        },
        403 if message.contains("Resource not accessible by integration") => {
            GithubError::ReadOnlyToken { what }
        }
        403 => GithubError::Forbidden {
            what,
            message: message.to_string(),
        },
        404 => GithubError::NotFound {
            what,
            target: ctx.target.to_string(),
        },
        // A transferred issue answers 301 with where it went (`url` in the body); following it
        // would post somewhere the user never named, so the user decides.
        301 | 308 => GithubError::Moved {
            what,
            target: ctx.target.to_string(),
            status: status.as_u16(),
            to: serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("url")?.as_str().map(String::from))
                .filter(|u| u.starts_with("https://") && !u.contains(char::is_whitespace))
                .map(|u| format!(" to {}", u.chars().take(200).collect::<String>()))
                .unwrap_or_default(),
        },
        410 => GithubError::Gone {
            what,
            target: ctx.target.to_string(),
        },
        422 => {
            let details = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("errors").cloned())
                .map(|e| {
                    let s: String = e.to_string().chars().take(300).collect();
                    format!("; {s}")
                })
                .unwrap_or_default();
            GithubError::Unprocessable {
                what,
                message: message.to_string(),
                details,
            }
        }
        s => GithubError::Http {
            what,
            status: s,
            message: message.to_string(),
        },
    }
}

/// The `rel="next"` link as a route relative to the API base. A link to any other origin is
/// refused: following it would either send the token elsewhere or silently drop it.
pub(crate) fn next_link(headers: &HeaderMap, base: &Uri) -> Result<Option<String>, String> {
    let Some(link) = headers.get("link").and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    for part in link.split(',') {
        let mut pieces = part.split(';');
        let url = pieces
            .next()
            .unwrap_or("")
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>');
        if !pieces.any(|p| p.trim() == "rel=\"next\"") {
            continue;
        }
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("unparseable pagination link {url:?}"))?;
        if uri.authority() != base.authority() || uri.scheme() != base.scheme() {
            return Err(format!(
                "pagination link {url:?} leaves the API at {base}; not following it"
            ));
        }
        return Ok(uri.path_and_query().map(|pq| pq.as_str().to_string()));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hm(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn rate_limit_kinds() {
        let f = StatusCode::FORBIDDEN;
        assert_eq!(
            rate_limit(f, &hm(&[("retry-after", "7")]), "").unwrap().1,
            Duration::from_secs(7)
        );
        let reset = (chrono::Utc::now().timestamp() + 120).to_string();
        let (kind, wait) = rate_limit(
            f,
            &hm(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", &reset),
            ]),
            "API rate limit exceeded",
        )
        .unwrap();
        assert_eq!(kind, "primary rate limit");
        assert!(wait <= Duration::from_secs(120) && wait >= Duration::from_secs(100));
        assert!(rate_limit(f, &hm(&[("x-ratelimit-remaining", "12")]), "Forbidden").is_none());
        assert!(rate_limit(
            f,
            &HeaderMap::new(),
            "You have exceeded a secondary rate limit"
        )
        .is_some());
        assert!(rate_limit(StatusCode::NOT_FOUND, &hm(&[("retry-after", "1")]), "").is_none());
    }

    #[test]
    fn retry_after_as_seconds_or_http_date() {
        let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:27:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let at = |v: &str| retry_after(&hm(&[("retry-after", v)]), now);
        assert_eq!(at("7"), Some(Duration::from_secs(7)));
        assert_eq!(at("-3"), Some(Duration::ZERO));
        assert_eq!(
            at("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            at("Wed, 21 Oct 2015 07:00:00 GMT"),
            Some(Duration::ZERO),
            "past"
        );
        assert_eq!(at("soon"), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
        // Through rate_limit: a date on 429/403, and a 503 that names a wait.
        let future = (chrono::Utc::now() + chrono::Duration::seconds(90)).to_rfc2822();
        let future = future.replace("+0000", "GMT");
        let (kind, wait) = rate_limit(
            StatusCode::TOO_MANY_REQUESTS,
            &hm(&[("retry-after", &future)]),
            "",
        )
        .unwrap();
        assert_eq!(kind, "secondary rate limit");
        assert!(
            wait >= Duration::from_secs(85) && wait <= Duration::from_secs(90),
            "{wait:?}"
        );
        let (kind, wait) = rate_limit(
            StatusCode::SERVICE_UNAVAILABLE,
            &hm(&[("retry-after", "5")]),
            "",
        )
        .unwrap();
        assert_eq!(
            (kind, wait),
            ("service unavailable", Duration::from_secs(5))
        );
        let (_, wait) = rate_limit(
            StatusCode::SERVICE_UNAVAILABLE,
            &hm(&[("retry-after", &future)]),
            "",
        )
        .unwrap();
        assert!(wait >= Duration::from_secs(85), "{wait:?}");
        assert!(rate_limit(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), "").is_none());
        assert!(rate_limit(StatusCode::BAD_GATEWAY, &hm(&[("retry-after", "5")]), "").is_none());
    }

    #[test]
    fn next_links_stay_on_the_api_origin() {
        let base: Uri = "http://127.0.0.1:8080".parse().unwrap();
        let h = hm(&[(
            "link",
            "<http://127.0.0.1:8080/repositories/9/issues/1/comments?per_page=100&page=3>; rel=\"next\", <http://127.0.0.1:8080/x?page=9>; rel=\"last\"",
        )]);
        assert_eq!(
            next_link(&h, &base).unwrap().as_deref(),
            Some("/repositories/9/issues/1/comments?per_page=100&page=3")
        );
        let h = hm(&[("link", "<https://evil.example/x?page=2>; rel=\"next\"")]);
        assert!(next_link(&h, &base).is_err());
        let h = hm(&[("link", "<http://127.0.0.1:8080/x?page=1>; rel=\"prev\"")]);
        assert_eq!(next_link(&h, &base).unwrap(), None);
    }
}
