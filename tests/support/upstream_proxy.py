"""A tiny HTTP proxy for tests of mitmproxy's `upstream:` mode: CONNECT tunnels and absolute-form
requests, each recorded (method, target, headers) and passed on to the server it names."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit


class RecordingProxy:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def targets(self, method: str) -> list[str]:
        return [t for m, t, _ in self.seen if m == method]

    def close(self) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                got = conn.recv(65536)
                if not got:
                    return
                head += got
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
            self.seen.append((method, target, headers))
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                server = socket.create_connection((host.strip("[]"), int(port)))
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                u = urlsplit(target)
                server = socket.create_connection((u.hostname, u.port or 80))
                path = u.path + (f"?{u.query}" if u.query else "")
                kept = [ln for ln in lines[1:] if not ln.lower().startswith("proxy-")]
                server.sendall(f"{method} {path} {version}\r\n".encode("latin-1")
                               + "\r\n".join(kept).encode("latin-1") + b"\r\n\r\n")
            if rest:
                server.sendall(rest)
            threading.Thread(target=_pipe, args=(server, conn), daemon=True).start()
            _pipe(conn, server)
        except OSError:
            conn.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

