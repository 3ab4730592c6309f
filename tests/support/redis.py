"""A real redis-server (or valkey-server) for the tests of a fleet's shared memory: started on a
free port with no persistence, stopped by the test. Debian's `redis-server` package; .ci/run
installs it. `REDIS` is None when neither is installed (the tests skip, saying so)."""

from __future__ import annotations

import shutil
import socket

from devtools.process import ToolProcess

REDIS = shutil.which("redis-server") or shutil.which("valkey-server")
MISSING = "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server; .ci/run installs it)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer(ToolProcess):
    def __init__(self, port: int = 0) -> None:
        self.port = port or free_port()
        assert REDIS is not None, MISSING
        super().__init__([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"],
                         name="redis-server")
        self.wait_for(r"Ready to accept connections", timeout=20)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def restart(self) -> None:
        """Started again on the same port (empty: nothing is persisted)."""
        self.stop()
        self.__init__(self.port)
