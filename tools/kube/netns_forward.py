"""Forward TCP from a port inside a network namespace to a port on this namespace's loopback.

The real node (tools/kube/up --real-node) lives in a network namespace of its own, so that its
bridge, pod addresses and routes never touch the host's. Its kubelet and CoreDNS must still reach
the API server, which listens on the host's 127.0.0.1 only. A veth pair would add an interface to
the host's namespace; instead this process opens its listening socket inside the node's namespace
(a socket keeps the namespace it was made in) and then returns to its own, where it connects to
the target for each client and copies bytes both ways.

    python3 netns_forward.py NETNS-PATH LISTEN-HOST:PORT TARGET-HOST:PORT
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in(netns: str, host: str, port: int) -> socket.socket:
    """A listening socket bound to ``host:port`` inside the namespace at ``netns``."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        _setns(target)
        try:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((host, port))
            server.listen(64)
        finally:
            _setns(home)
    finally:
        os.close(home)
        os.close(target)
    return server


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends; pass the end on (half-close), or, on an
    error, close both directions so the other pump ends too."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (dst, src):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _serve(client: socket.socket, target: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError as exc:
        print(f"netns_forward: connect {target[0]}:{target[1]}: {exc}", file=sys.stderr)
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        sys.exit(f"netns_forward: {text!r} is not HOST:PORT")
    return host, int(port)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    netns, listen, target = argv[0], _address(argv[1]), _address(argv[2])
    server = listen_in(netns, *listen)
    while True:
        client, _ = server.accept()
        threading.Thread(target=_serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
