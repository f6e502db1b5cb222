#!/usr/bin/env python3
"""Test origin: GET /bytes/<n> streams n bytes of a fixed pseudo-random pattern,
GET /sha256/<n> returns the pattern's sha256, GET /small returns the first 10 KB of the
pattern (time-to-first-byte probes), POST /upload returns "<sha256> <length>".
The pattern's period (1 MiB + 7) matches no frame or record size."""
import hashlib
import random
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PERIOD = (1 << 20) + 7
BLOCK = random.Random(1234).randbytes(PERIOD)
DOUBLE = memoryview(BLOCK + BLOCK)


def pattern_chunks(n, step=256 * 1024):
    off = 0
    while off < n:
        k = min(step, n - off)
        start = off % PERIOD
        yield DOUBLE[start:start + k]
        off += k


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts == ["small"]:
            parts = ["bytes", "10240"]
        if len(parts) == 2 and parts[0] in ("bytes", "sha256") and parts[1].isdigit():
            n = int(parts[1])
            if parts[0] == "sha256":
                h = hashlib.sha256()
                for c in pattern_chunks(n, 1 << 20):
                    h.update(c)
                body = h.hexdigest().encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            try:
                for c in pattern_chunks(n):
                    self.wfile.write(c)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self.send_error(404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        h = hashlib.sha256()
        got = 0
        while got < n:
            c = self.rfile.read(min(1 << 20, n - got))
            if not c:
                break
            h.update(c)
            got += len(c)
        body = f"{h.hexdigest()} {got}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    addr = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8080
    if ":" in addr:
        ThreadingHTTPServer.address_family = socket.AF_INET6
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 4096
    srv = ThreadingHTTPServer((addr, port), Handler)
    print("ready", flush=True)
    srv.serve_forever()
