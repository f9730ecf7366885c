"""The web console's HTTP side, sans-I/O: which request of a gateway connection is a plain
page request, and the response it gets (no trio here; ``actors/fanout/gateway_http.py`` reads
and writes the bytes).

The gateway listens for websocket upgrades; with the console on, the same port also answers
plain ``GET`` / ``HEAD`` requests for the console's few static files (``claude_trio/console/``,
shipped in the wheel). Everything else - an upgrade, a request that is not complete or not
understood - goes to the websocket handshake exactly as before, which answers it as it always
did.

Every response carries a strict policy: ``Content-Security-Policy`` allows scripts, styles and
connections to the page's own origin only (no inline script, no ``eval``, no frames, no
plugins, no form posts elsewhere), ``X-Frame-Options: DENY`` and ``frame-ancestors 'none'``
(the page cannot be framed, so no clickjacking of its buttons), ``nosniff``, no referrer, and
``no-store`` (the page holds a token in memory only). The token never reaches the server in a
page request: the URL ``serve`` prints carries it in the fragment, which browsers do not send.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = [
    "CONSOLE_FILES",
    "CONTENT_SECURITY_POLICY",
    "MAX_HEAD_BYTES",
    "PageRequest",
    "console_origins",
    "is_page_request",
    "page_response",
    "parse_head",
]

#: The longest request head the console reads (h11's own default limit).
MAX_HEAD_BYTES = 16 * 1024

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

#: The console's files: URL path -> (file name in ``claude_trio/console/``, content type).
CONSOLE_FILES: Mapping[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/render.js": ("render.js", "text/javascript; charset=utf-8"),
    "/wire.js": ("wire.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}

_SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}


@attrs.frozen(kw_only=True)
class PageRequest:
    """The parts of a request head the console looks at (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]


def parse_head(head: bytes) -> PageRequest | None:
    """The request in ``head`` (the bytes up to and including the blank line), or None when
    it is not a well-formed HTTP/1.1 request head (the websocket handshake answers those)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return PageRequest(method=parts[0], path=parts[1], headers=headers)


def is_page_request(request: PageRequest) -> bool:
    """Whether the console answers ``request``: anything but a websocket upgrade."""
    upgrade = request.headers.get("upgrade", "").lower()
    return "websocket" not in upgrade


def page_response(request: PageRequest, files: Mapping[str, bytes]) -> bytes:
    """The whole response (head and body) to a page request; ``files`` maps each name of
    :data:`CONSOLE_FILES` to its bytes. The query string is ignored; nothing but the listed
    paths is ever read."""
    path = request.path.split("?", 1)[0].split("#", 1)[0]
    if request.method not in ("GET", "HEAD"):
        return _response(
            405, "text/plain; charset=utf-8", b"only GET\n", request, ("Allow", "GET, HEAD")
        )
    known = CONSOLE_FILES.get(path)
    if known is None:
        return _response(404, "text/plain; charset=utf-8", b"not found\n", request)
    name, content_type = known
    return _response(200, content_type, files[name], request)


def _response(
    status: int,
    content_type: str,
    body: bytes,
    request: PageRequest,
    *extra: tuple[str, str],
) -> bytes:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        *_SECURITY_HEADERS,
        *extra,
        ("Connection", "close"),
    ]
    head = f"HTTP/1.1 {status} {_REASONS[status]}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers
    )
    return head.encode("latin-1") + b"\r\n" + (b"" if request.method == "HEAD" else body)


def console_origins(host: str, port: int) -> frozenset[str]:
    """The origins a page served on ``host:port`` has (what its websocket's ``Origin`` header
    says): ``http://host:port``, and for a loopback listener its usual spellings too."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    origins = {f"http://{shown}:{port}"}
    if host in ("127.0.0.1", "localhost", "::1", "[::1]"):
        origins |= {f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"}
    return frozenset(origins)
