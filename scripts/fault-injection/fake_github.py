#!/usr/bin/env python3
"""A stand-in for the GitHub REST API on 127.0.0.1, for scripts/fault-injection.sh and the
workflow harness (tests/github_actions_run.rs).

Serves what `setrows-bisect report --post` / `bisect --post-to` / `--resume-from-issue` call:
GET /user, get an issue (the token check before a run), list issue comments (paginated), create
a comment, edit a comment.

What GitHub enforces for those calls, enforced here:
- Tokens (with --tokens FILE; without it every token is a personal token of `fi-bot` that may
  do everything, as the fault-injection suite expects). FILE is a JSON object, re-read on every
  request so a test may add tokens while the server runs:
      {"<token>": {"kind": "installation" | "user", "login": "...",
                   "repos": ["owner/name", ...],          # absent: every repository
                   "permissions": {"issues": "write"}}}   # installation tokens only
  An unknown token gets 401 "Bad credentials". Every repository is public, so any valid token
  may read comments anywhere. Writing (create/edit) needs the repository among `repos` and, for
  an installation token (a workflow's GITHUB_TOKEN), `issues: write`; otherwise 403 with
  GitHub's message: "Resource not accessible by integration" for an installation token,
  "Resource not accessible by personal access token" for a fine-grained one.
  `GET /user` answers a user token with its login and refuses an installation token with 403
  "Resource not accessible by integration" (GitHub: an app token is not a user).
  A comment's author is its token's login (`github-actions[bot]` for installation tokens; an
  installation token with "posts_as" posts as that login instead, as another app's token does).
- Pagination: `per_page` (default 30, at most 100) and `page`; a `Link` header with absolute
  `rel="next"` / `rel="last"` URLs by repository id (`/repositories/<id>/issues/<n>/comments`),
  as GitHub sends them. --filler N puts N comments by someone else on every issue first.
- Rate limits, as GitHub's REST docs describe them: every answer carries `x-ratelimit-limit`,
  `-remaining`, `-used`, `-reset` and `-resource: core`. --primary-limit N: a token's N+1th
  request in the hour gets 403 "API rate limit exceeded ..." with `x-ratelimit-remaining: 0`
  (wait until `x-ratelimit-reset`). --content-limit N/SECONDS: more than N content-creating
  requests (create/edit) by one token within SECONDS get the secondary limit: status
  --content-limit-status (403 or 429), "You have exceeded a secondary rate limit ...", and
  `retry-after` with the seconds until the window has room again.

And one injected error, for the fault-injection suite: the first --count matching requests
(every one when --count is -1) get --status, with Retry-After when --retry-after is given.
--on picks which requests are hit: all, comments (the issue's comment list/create), post
(creates/edits only).

Every request is appended to --log as one JSON line (method, path, the Authorization header,
the status sent, the request body, the login of the token when --tokens is given) so a suite can
count retries and grep bodies. The chosen port is written to --port-file once listening.
"""
import argparse
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MESSAGES = {
    401: "Bad credentials",
    403: "Must have admin rights to Repository.",
    404: "Not Found",
    422: "Validation Failed",
    429: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
    500: "Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
DOCS = {
    "user": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
    "list": "https://docs.github.com/rest/issues/comments#list-issue-comments",
    "create": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
    "edit": "https://docs.github.com/rest/issues/comments#update-an-issue-comment",
}
SECONDARY = ("You have exceeded a secondary rate limit and have been temporarily blocked from "
             "content creation. Please retry your request again later.")
# GitHub's primary limits per hour: a workflow's GITHUB_TOKEN 1,000, a user token 5,000.
HOURLY = {"installation": 1000, "user": 5000}
ACTIONS_BOT = "github-actions[bot]"


def repo_id(owner, repo):
    return zlib.crc32(f"{owner.lower()}/{repo.lower()}".encode()) % 10**8 + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--status", type=int, default=0, help="error status to inject (0: none)")
    ap.add_argument("--count", type=int, default=-1, help="how many requests fail (-1: all)")
    ap.add_argument("--retry-after", default=None)
    ap.add_argument("--message", default=None, help="GitHub's message for the error")
    ap.add_argument("--on", choices=["all", "comments", "post"], default="all")
    ap.add_argument("--tokens", default=None, help="JSON file of the tokens GitHub knows")
    ap.add_argument("--filler", type=int, default=0, help="comments by someone else per issue")
    ap.add_argument("--primary-limit", type=int, default=0, help="requests per token per hour")
    ap.add_argument("--content-limit", default=None, help="N/SECONDS content-creating requests")
    ap.add_argument("--content-limit-status", type=int, choices=[403, 429], default=403)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    content = None
    if args.content_limit:
        n, secs = args.content_limit.split("/")
        content = (int(n), float(secs))

    lock = threading.RLock()
    state = {
        "failed": 0,
        "issues": {},  # (owner, repo, number) -> [comment]
        "next_id": 1000,
        "used": {},  # token -> requests this hour
        "writes": {},  # token -> [times of content-creating requests]
        "hour": int(time.time()) + 3600,
    }

    def token_spec(token):
        """(spec, error): spec of a known token, or the 401 to answer."""
        if args.tokens is None:
            return {"kind": "user", "login": "fi-bot"}, None
        try:
            with open(args.tokens) as f:
                known = json.load(f)
        except FileNotFoundError:
            known = {}
        spec = known.get(token)
        if spec is None:
            return None, "Bad credentials"
        return spec, None

    def comments_of(owner, repo, number):
        key = (owner.lower(), repo.lower(), number)
        if key not in state["issues"]:
            filler = []
            for _ in range(args.filler):
                state["next_id"] += 1
                filler.append({"id": state["next_id"], "body": "+1, same fault here",
                               "user": {"login": "someone-else", "type": "User"},
                               "html_url": "https://github.invalid/x"})
            state["issues"][key] = filler
        return state["issues"][key]

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _hit(self, method):
            path = self.path.split("?")[0]
            if args.on == "all":
                return True
            if args.on == "comments":
                return re.search(r"/issues/\d+/comments$", path) is not None
            return method in ("POST", "PATCH")

        def _send(self, status, obj, headers=()):
            rec = dict(self._rec, status=status)
            with lock, open(args.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in list(self._limits) + list(headers):
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status, message, doc, headers=()):
            return self._send(status, {"message": message, "documentation_url": doc,
                                       "status": str(status)}, headers)

        def _handle(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
            path = self.path.split("?")[0]
            query = dict(p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p)
            auth = self.headers.get("Authorization") or ""
            token = auth.split(" ", 1)[1] if " " in auth else ""
            self._rec = {"method": method, "path": self.path, "auth_header": auth, "body": body}
            self._limits = []
            with lock:
                inject = (
                    args.status
                    and self._hit(method)
                    and (args.count < 0 or state["failed"] < args.count)
                )
                if inject:
                    state["failed"] += 1
            if inject:
                hdrs = []
                if args.retry_after is not None:
                    hdrs.append(("Retry-After", args.retry_after))
                obj = {"message": args.message or MESSAGES.get(args.status, "error"),
                       "documentation_url": "https://docs.github.com/rest"}
                if args.status == 422:
                    obj["errors"] = [{"resource": "IssueComment", "code": "custom",
                                      "message": "body is too long"}]
                return self._send(args.status, obj, hdrs)

            spec, err = token_spec(token)
            if err:
                return self._error(401, err, "https://docs.github.com/rest")
            self._rec["login"] = spec.get("login", "")
            kind = spec.get("kind", "user")
            login = ACTIONS_BOT if kind == "installation" else spec["login"]
            author = spec.get("posts_as", login) if kind == "installation" else login
            writing = method in ("POST", "PATCH")
            now = time.time()
            with lock:
                if now >= state["hour"]:
                    state["hour"], state["used"] = int(now) + 3600, {}
                limit = HOURLY[kind]
                used = state["used"].get(token, 0) + 1
                state["used"][token] = used
                cap = args.primary_limit or limit
                self._limits = [("x-ratelimit-limit", str(limit)),
                                ("x-ratelimit-remaining", str(max(cap - used, 0))),
                                ("x-ratelimit-used", str(used)),
                                ("x-ratelimit-reset", str(state["hour"])),
                                ("x-ratelimit-resource", "core")]
                if used > cap:
                    who = "installation ID 1" if kind == "installation" else "user ID 1"
                    return self._error(403, f"API rate limit exceeded for {who}.",
                                       "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api")
                if writing and content:
                    times = [t for t in state["writes"].get(token, []) if t > now - content[1]]
                    if len(times) >= content[0]:
                        wait = max(1, int(times[0] + content[1] - now + 0.999))
                        state["writes"][token] = times
                        return self._error(args.content_limit_status, SECONDARY,
                                           "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
                                           [("retry-after", str(wait))])
                    times.append(now)
                    state["writes"][token] = times

            def refusal(owner, repo):
                """GitHub's 403 message when this token may not write there, else None."""
                repos = spec.get("repos")
                scoped = repos is None or f"{owner}/{repo}".lower() in [r.lower() for r in repos]
                perm_ok = kind != "installation" or spec.get("permissions", {}).get("issues") == "write"
                if scoped and perm_ok:
                    return None
                what = "integration" if kind == "installation" else "personal access token"
                return f"Resource not accessible by {what}"

            if method == "GET" and path == "/user":
                if kind == "installation":
                    return self._error(403, "Resource not accessible by integration", DOCS["user"])
                return self._send(200, {"login": login, "id": 1, "type": "User"})
            issue = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/(\d+)", path)
            if issue and method == "GET":
                # Every issue exists and every repository is public: any valid token reads it
                # (what a posting command asks first, to check its token).
                o, r, n = issue.group(1), issue.group(2), int(issue.group(3))
                return self._send(200, {"number": n, "title": f"issue {n}", "state": "open",
                                        "locked": False,
                                        "html_url": f"https://github.invalid/{o}/{r}/issues/{n}"})
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/(\d+)/comments", path)
            byid = re.fullmatch(r"/repositories/(\d+)/issues/(\d+)/comments", path)
            if byid and method == "GET":
                with lock:
                    found = [k for k in state["issues"]
                             if str(repo_id(k[0], k[1])) == byid.group(1) and str(k[2]) == byid.group(2)]
                if not found:
                    return self._error(404, "Not Found", DOCS["list"])
                m_owner, m_repo, m_num = found[0]
            elif m:
                m_owner, m_repo, m_num = m.group(1), m.group(2), int(m.group(3))
            if (m or byid) and method == "GET":
                try:
                    per_page = min(max(int(query.get("per_page", 30)), 1), 100)
                    page = max(int(query.get("page", 1)), 1)
                except ValueError:
                    return self._error(422, "Validation Failed", DOCS["list"])
                with lock:
                    all_c = list(comments_of(m_owner, m_repo, m_num))
                last = max((len(all_c) + per_page - 1) // per_page, 1)
                items = all_c[(page - 1) * per_page: page * per_page]
                hdrs = []
                if page < last:
                    host = self.headers.get("Host")
                    base = (f"http://{host}/repositories/{repo_id(m_owner, m_repo)}"
                            f"/issues/{m_num}/comments?per_page={per_page}")
                    hdrs.append(("Link", f'<{base}&page={page + 1}>; rel="next", '
                                         f'<{base}&page={last}>; rel="last"'))
                return self._send(200, items, hdrs)
            if m and method == "POST":
                denied = refusal(m_owner, m_repo)
                if denied:
                    return self._error(403, denied, DOCS["create"])
                try:
                    text = json.loads(body).get("body", "")
                except Exception:
                    return self._send(400, {"message": "Problems parsing JSON"})
                if len(text) > 65536:
                    return self._send(422, {"message": "Validation Failed", "errors": [
                        {"resource": "IssueComment", "code": "custom", "field": "body",
                         "message": "body is too long (maximum is 65536 characters)"}]})
                with lock:
                    state["next_id"] += 1
                    cid = state["next_id"]
                    c = {"id": cid, "body": text, "user": {"login": author, "type": "User"},
                         "html_url": f"https://github.invalid/{m_owner}/{m_repo}/issues/{m_num}#issuecomment-{cid}"}
                    comments_of(m_owner, m_repo, m_num).append(c)
                return self._send(201, c)
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/comments/(\d+)", path)
            if m and method == "PATCH":
                denied = refusal(m.group(1), m.group(2))
                if denied:
                    return self._error(403, denied, DOCS["edit"])
                text = json.loads(body).get("body", "")
                with lock:
                    for (o, r, _), cs in state["issues"].items():
                        if (o, r) != (m.group(1).lower(), m.group(2).lower()):
                            continue
                        for c in cs:
                            if str(c["id"]) == m.group(3):
                                c["body"] = text
                                return self._send(200, c)
                return self._error(404, "Not Found", DOCS["edit"])
            return self._error(404, "Not Found", "https://docs.github.com/rest")

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

        def do_PATCH(self):
            self._handle("PATCH")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.replace(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
