"""A small proxy on a Unix socket in front of the real Docker engine, for the tests of a slow
engine and of an engine that goes away: the runner talks only to the proxy (DOCKER_HOST), so
the proxy can answer container creation late, or vanish, while the shared engine behind it
runs on untouched.

Requests are read one at a time (the docker SDK sends each with a Content-Length and waits for
its answer); a request the proxy does not parse (a chunked upload, a connection upgrade) turns
that connection into a plain pipe.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

ENGINE = "/var/run/docker.sock"


class EngineProxy:
    def __init__(self, path: Path, upstream: str = ENGINE, slow_marker: bytes | None = None,
                 delay_s: float | None = None):
        self.path = path
        self.upstream = upstream
        # A create whose body holds slow_marker is answered delay_s late (the engine makes the
        # container at once, the answer is late), or never reaches the engine (delay_s None).
        self.slow_marker = slow_marker
        self.delay_s = delay_s
        self.delayed: list[str] = []       # the request lines of the delayed creates
        self.requests: list[str] = []      # request lines seen
        self._server: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def start(self) -> EngineProxy:
        self.path.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def kill(self) -> None:
        """The engine goes away: nothing listens any more, every connection drops."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self) -> None:
        while self._server is not None:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.upstream)
            with self._lock:
                self._sockets += [client, engine]
            pending = {"delay": 0.0}
            threading.Thread(target=self._requests, args=(client, engine, pending),
                             daemon=True).start()
            threading.Thread(target=self._answers, args=(engine, client, pending),
                             daemon=True).start()

    def _requests(self, client: socket.socket, engine: socket.socket, pending: dict) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, rest = buffer.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:])}
                if "content-length" not in headers and (
                        "transfer-encoding" in headers or "upgrade" in headers):
                    engine.sendall(buffer)          # not parsed: a plain pipe from here on
                    self._pipe(client, engine)
                    return
                length = int(headers.get("content-length", "0"))
                while len(rest) < length:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    rest += chunk
                body, buffer = rest[:length], rest[length:]
                self.requests.append(lines[0])
                if self.slow_marker and "/containers/create" in lines[0] \
                        and self.slow_marker in body:
                    self.delayed.append(lines[0])
                    if self.delay_s is None:
                        return                      # swallowed: the engine never hears of it
                    pending["delay"] = self.delay_s
                engine.sendall(head + b"\r\n\r\n" + body)
        except OSError:
            return

    def _answers(self, engine: socket.socket, client: socket.socket, pending: dict) -> None:
        try:
            while True:
                chunk = engine.recv(65536)
                if not chunk:
                    break
                if pending["delay"]:
                    time.sleep(pending["delay"])    # the engine answers late
                    pending["delay"] = 0.0
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (client, engine):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    return
                target.sendall(chunk)
        except OSError:
            return
