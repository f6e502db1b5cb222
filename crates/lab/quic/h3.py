"""HTTP/3 server and client for the lab's `quic` workload, on aioquic (a real QUIC stack).

  h3.py serve --listen 0.0.0.0:9443
      Serves GET /<n> with n bytes of the lab's body (below) until killed; a fresh
      self-signed certificate each start (the client does not verify it: the workload
      measures transport, not PKI).
  h3.py get --server IP:PORT --size N [--bind IP] [--socks IP:PORT]
      Downloads /<N> in a new QUIC connection (the time includes its handshake), bound to
      a path's address or through a SOCKS5 UDP relay (RFC 1928 section 7), checks the
      body's SHA-256 and prints one JSON object: bytes, completion_ms, sha256_ok.

The body is a deterministic pseudo-random byte stream (a 1 MiB block from a fixed seed,
repeated), so the client knows its hash without it being sent and a QUIC stack that
compresses nothing gains nothing from zeros.
"""

import argparse
import asyncio
import hashlib
import ipaddress
import json
import os
import random
import select
import socket
import ssl
import struct
import sys
import tempfile
import time

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted

BLOCK = random.Random(24).randbytes(1 << 20)


def body(n):
    """The first n bytes of the lab's body."""
    whole, rest = divmod(n, len(BLOCK))
    return BLOCK * whole + BLOCK[:rest]


def expected_sha256(n):
    h = hashlib.sha256()
    whole, rest = divmod(n, len(BLOCK))
    for _ in range(whole):
        h.update(BLOCK)
    h.update(BLOCK[:rest])
    return h.hexdigest()


def host_port(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def self_signed(dirname):
    """A throwaway certificate and key (PEM files in dirname)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import datetime

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mpflex-lab")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(dirname, "cert.pem")
    key_path = os.path.join(dirname, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


def serve(listen):
    from aioquic.asyncio import QuicConnectionProtocol
    from aioquic.asyncio import serve as quic_serve

    class Http3(QuicConnectionProtocol):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.h3 = H3Connection(self._quic)

        def quic_event_received(self, event):
            for e in self.h3.handle_event(event):
                if not isinstance(e, HeadersReceived):
                    continue
                path = dict(e.headers).get(b":path", b"/0")
                try:
                    n = int(path.lstrip(b"/"))
                except ValueError:
                    n = -1
                if not 0 <= n <= 1 << 32:
                    self.h3.send_headers(e.stream_id, [(b":status", b"404")], end_stream=True)
                else:
                    self.h3.send_headers(
                        e.stream_id,
                        [(b":status", b"200"), (b"content-length", str(n).encode())],
                    )
                    self.h3.send_data(e.stream_id, body(n), end_stream=True)
                self.transmit()

    host, port = host_port(listen)
    tmp = tempfile.mkdtemp(prefix="mpflex-lab-h3-")
    config = QuicConfiguration(
        is_client=False,
        alpn_protocols=H3_ALPN,
        congestion_control_algorithm="cubic",
        max_datagram_frame_size=65536,
    )
    config.load_cert_chain(*self_signed(tmp))

    async def main():
        await quic_serve(host, port, configuration=config, create_protocol=Http3)
        await asyncio.Future()

    asyncio.run(main())


class Socks5Udp:
    """A UDP association through a SOCKS5 proxy: datagrams to and from one server."""

    def __init__(self, proxy, server):
        self.ctl = socket.create_connection(proxy, timeout=10)
        self.ctl.sendall(b"\x05\x01\x00")
        if self.ctl.recv(2) != b"\x05\x00":
            raise SystemExit("h3.py: SOCKS5 greeting refused")
        self.ctl.sendall(b"\x05\x03\x00\x01" + bytes(6))
        rep = self._read(4)
        if rep[1] != 0:
            raise SystemExit(f"h3.py: SOCKS5 UDP ASSOCIATE refused ({rep[1]})")
        if rep[3] == 1:
            ip = socket.inet_ntop(socket.AF_INET, self._read(4))
        elif rep[3] == 4:
            ip = socket.inet_ntop(socket.AF_INET6, self._read(16))
        else:
            raise SystemExit(f"h3.py: SOCKS5 reply address type {rep[3]}")
        (port,) = struct.unpack("!H", self._read(2))
        if ipaddress.ip_address(ip).is_unspecified:
            ip = proxy[0]
        self.relay = (ip, port)
        addr = ipaddress.ip_address(server[0])
        atyp = b"\x01" if addr.version == 4 else b"\x04"
        self.header = b"\x00\x00\x00" + atyp + addr.packed + struct.pack("!H", server[1])
        family = socket.AF_INET if ":" not in ip else socket.AF_INET6
        self.sock = socket.socket(family, socket.SOCK_DGRAM)

    def _read(self, n):
        b = b""
        while len(b) < n:
            k = self.ctl.recv(n - len(b))
            if not k:
                raise SystemExit("h3.py: SOCKS5 proxy closed the connection")
            b += k
        return b

    def send(self, data):
        self.sock.sendto(self.header + data, self.relay)

    def recv(self):
        d = self.sock.recv(65535)
        skip = {1: 10, 4: 22}.get(d[3]) if len(d) > 3 else None
        if skip is None:
            return None
        return d[skip:]


class Direct:
    def __init__(self, server, bind):
        family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        if bind:
            self.sock.bind((bind, 0))
        self.server = server

    def send(self, data):
        self.sock.sendto(data, self.server)

    def recv(self):
        return self.sock.recv(65535)


def get(server, size, bind, socks, timeout):
    server = host_port(server)
    io = Socks5Udp(host_port(socks), server) if socks else Direct(server, bind)
    io.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        verify_mode=ssl.CERT_NONE,
        congestion_control_algorithm="cubic",
    )
    start = time.time()
    quic = QuicConnection(configuration=config)
    quic.connect(server, now=start)
    h3 = H3Connection(quic)
    sha = hashlib.sha256()
    got = 0
    stream = None
    done = False
    status = None
    deadline = start + timeout
    while not done:
        now = time.time()
        if now > deadline:
            raise SystemExit(f"h3.py: {got} of {size} bytes after {timeout} s")
        for data, _ in quic.datagrams_to_send(now=now):
            io.send(data)
        t = quic.get_timer()
        wait = max(0.0, min(t - now if t is not None else 1.0, 1.0))
        r, _, _ = select.select([io.sock], [], [], wait)
        now = time.time()
        if r:
            # Everything that is there, then one flush.
            io.sock.setblocking(False)
            try:
                while True:
                    d = io.recv()
                    if d:
                        quic.receive_datagram(d, server, now=now)
            except BlockingIOError:
                pass
            io.sock.setblocking(True)
        if t is not None and now >= t:
            quic.handle_timer(now=now)
        while (event := quic.next_event()) is not None:
            if isinstance(event, HandshakeCompleted) and stream is None:
                stream = quic.get_next_available_stream_id()
                h3.send_headers(
                    stream,
                    [
                        (b":method", b"GET"),
                        (b":scheme", b"https"),
                        (b":authority", b"mpflex-lab"),
                        (b":path", f"/{size}".encode()),
                    ],
                    end_stream=True,
                )
            if isinstance(event, ConnectionTerminated):
                raise SystemExit(f"h3.py: connection closed: {event.reason_phrase or event.error_code}")
            for e in h3.handle_event(event):
                if isinstance(e, HeadersReceived):
                    status = dict(e.headers).get(b":status")
                elif isinstance(e, DataReceived):
                    sha.update(e.data)
                    got += len(e.data)
                    if e.stream_ended:
                        done = True
    ms = (time.time() - start) * 1000.0
    quic.close()
    for data, _ in quic.datagrams_to_send(now=time.time()):
        io.send(data)
    print(
        json.dumps(
            {
                "bytes": got,
                "completion_ms": ms,
                "status": int(status or 0),
                "sha256_ok": got == size and sha.hexdigest() == expected_sha256(size),
            }
        )
    )


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    g = sub.add_parser("get")
    g.add_argument("--server", required=True)
    g.add_argument("--size", type=int, required=True)
    g.add_argument("--bind")
    g.add_argument("--socks")
    g.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args()
    if a.cmd == "serve":
        serve(a.listen)
    else:
        get(a.server, a.size, a.bind, a.socks, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
