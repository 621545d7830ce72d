#!/usr/bin/env python3
"""A stand-in for the GitHub REST API on 127.0.0.1, for scripts/fault-injection.sh.

Serves what `setrows-bisect report --post` / `bisect --post-to` need (GET /user, list/create/
edit issue comments) and injects one error: the first --count matching requests (every one when
--count is -1) get --status, with Retry-After when --retry-after is given. --on picks which
requests are hit: all, comments (the issue's comment list/create), post (creates/edits only).

Every request is appended to --log as one JSON line (method, path, the Authorization header,
the status sent, the request body) so the suite can count retries and grep bodies.
The chosen port is written to --port-file once listening.
"""
import argparse
import json
import re
import threading
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--status", type=int, default=0, help="error status to inject (0: none)")
    ap.add_argument("--count", type=int, default=-1, help="how many requests fail (-1: all)")
    ap.add_argument("--retry-after", default=None)
    ap.add_argument("--message", default=None, help="GitHub's message for the error")
    ap.add_argument("--on", choices=["all", "comments", "post"], default="all")
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()

    lock = threading.RLock()
    state = {"failed": 0, "comments": [], "next_id": 1000}

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
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
            path = self.path.split("?")[0]
            with lock:
                inject = (
                    args.status
                    and self._hit(method)
                    and (args.count < 0 or state["failed"] < args.count)
                )
                if inject:
                    state["failed"] += 1
                status = args.status if inject else None
            self._rec = {
                "method": method,
                "path": self.path,
                "auth_header": self.headers.get("Authorization") or "",
                "body": body,
            }
            if inject:
                hdrs = []
                if args.retry_after is not None:
                    hdrs.append(("Retry-After", args.retry_after))
                obj = {"message": args.message or MESSAGES.get(status, "error"),
                       "documentation_url": "https://docs.github.com/rest"}
                if status == 422:
                    obj["errors"] = [{"resource": "IssueComment", "code": "custom",
                                      "message": "body is too long"}]
                return self._send(status, obj, hdrs)
            if method == "GET" and path == "/user":
                return self._send(200, {"login": "fi-bot", "id": 1})
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/(\d+)/comments", path)
            if m and method == "GET":
                with lock:
                    return self._send(200, list(state["comments"]))
            if m and method == "POST":
                try:
                    text = json.loads(body).get("body", "")
                except Exception:
                    return self._send(400, {"message": "Problems parsing JSON"})
                with lock:
                    cid = state["next_id"]
                    state["next_id"] += 1
                    c = {"id": cid, "body": text, "user": {"login": "fi-bot"},
                         "html_url": f"https://github.invalid/{m.group(1)}/{m.group(2)}/issues/{m.group(3)}#issuecomment-{cid}"}
                    state["comments"].append(c)
                return self._send(201, c)
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/comments/(\d+)", path)
            if m and method == "PATCH":
                text = json.loads(body).get("body", "")
                with lock:
                    for c in state["comments"]:
                        if str(c["id"]) == m.group(3):
                            c["body"] = text
                            return self._send(200, c)
                return self._send(404, {"message": "Not Found"})
            return self._send(404, {"message": "Not Found"})

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
