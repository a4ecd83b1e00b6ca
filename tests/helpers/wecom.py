"""A stand-in for WeCom's (Enterprise WeChat's) API on 127.0.0.1, for Alertmanager's
wechat_configs: the two calls it makes, with the checks and errors of the real service.

- `GET /cgi-bin/gettoken?corpid=&corpsecret=` hands out a fresh token for the right pair and
  errcode 40001 (invalid credential) for any other;
- `POST /cgi-bin/message/send?access_token=` records the message for a valid token; the
  `expire_at`-th message (1 = the first) is refused once with errcode 42001 (token expired) and
  its token dropped, which the token's holder must answer by fetching a new one; unknown tokens
  get 40014. Errors come, as from WeCom, with HTTP 200 and `errcode`/`errmsg`.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EXPIRED = 42001
INVALID_CREDENTIAL = 40001
INVALID_TOKEN = 40014


class WeCom:
    def __init__(self, corp_id: str, secret: str, expire_at: int = 1) -> None:
        self.corp_id, self.secret, self.expire_at = corp_id, secret, expire_at
        self.sends = 0
        self.lock = threading.Lock()
        self.tokens: set[str] = set()
        self.issued = 0
        self.expired_once = False
        self.refused: list[tuple[str, int]] = []  # (call, errcode) answered with an error
        self.messages: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/cgi-bin/"

    def __enter__(self) -> WeCom:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def contents(self) -> list[str]:
        with self.lock:
            return [m.get("markdown", m.get("text", {})).get("content", "") for m in self.messages]

    def gettoken(self, query: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            if query.get("corpid") != self.corp_id or query.get("corpsecret") != self.secret:
                self.refused.append(("gettoken", INVALID_CREDENTIAL))
                return {"errcode": INVALID_CREDENTIAL, "errmsg": "invalid credential"}
            self.issued += 1
            token = f"token-{self.issued}"
            self.tokens.add(token)
            return {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}

    def send(self, query: dict[str, str], message: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            token = query.get("access_token", "")
            self.sends += 1
            if token not in self.tokens:
                self.refused.append(("message/send", INVALID_TOKEN))
                return {"errcode": INVALID_TOKEN, "errmsg": "invalid access_token"}
            if not self.expired_once and self.sends >= self.expire_at:
                self.expired_once = True
                self.tokens.discard(token)
                self.refused.append(("message/send", EXPIRED))
                return {"errcode": EXPIRED, "errmsg": "access_token expired"}
            self.messages.append(message)
            return {"errcode": 0, "errmsg": "ok", "invaliduser": ""}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        wecom = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(200)  # WeCom answers errors with 200 and an errcode
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _parts(self) -> tuple[str, dict[str, str]]:
                url = urllib.parse.urlsplit(self.path)
                return url.path, dict(urllib.parse.parse_qsl(url.query))

            def do_GET(self) -> None:
                path, query = self._parts()
                if path != "/cgi-bin/gettoken":
                    self.send_error(404)
                    return
                self._reply(wecom.gettoken(query))

            def do_POST(self) -> None:
                path, query = self._parts()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if path != "/cgi-bin/message/send":
                    self.send_error(404)
                    return
                self._reply(wecom.send(query, json.loads(body)))

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
