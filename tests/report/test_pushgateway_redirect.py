"""--pushgateway over plain HTTP against real servers on this machine (issue 62): a gateway that redirects
to another host gets the push failed, naming where it pointed; the password never goes there (urllib copied
the Authorization header onto every redirect before)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pav.reporting import pushgateway
from pav.secrets.basic_auth import BasicAuth


@contextmanager
def server(address: str, answer: tuple[int, dict[str, str]], seen: list[dict[str, str]]) -> Iterator[str]:
    """An HTTP server on address that records each request's headers and answers every one alike."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            code, headers = answer
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            body = b'{"status": "success", "data": []}'
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer((address, 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_redirect_to_another_host_fails_the_push_and_never_carries_the_password() -> None:
    auth = BasicAuth("pav", "s3cret-pw", "PAV_PUSHGATEWAY_AUTH")
    elsewhere: list[dict[str, str]] = []
    gateway: list[dict[str, str]] = []
    with server("127.0.0.2", (200, {}), elsewhere) as other:
        moved = (307, {"Location": f"{other}/api/v1/metrics"})
        with server("127.0.0.1", moved, gateway) as url:
            ok, said = pushgateway.push(url, "sim", [], auth)
    assert not ok
    assert gateway and gateway[0]["authorization"] == auth.header()  # the gateway itself was asked with it
    assert not [h for h in elsewhere if "authorization" in h], elsewhere
    assert elsewhere == []  # not followed at all
    assert "HTTP 307" in said and f"the gateway redirects to {other}/api/v1/metrics" in said, said
