"""request_server.py SECONDS RATE

A light request/response service on 127.0.0.1: a threaded TCP server answering small requests (a little CPU each)
and one client process sending RATE requests per second for SECONDS, each waiting for its answer. Healthy: mostly
asleep, short bursts of CPU. Prints {"pid", "requests", "seconds"} when done.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import socket
import socketserver
import sys
import threading
import time


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            digest = hashlib.sha256(line * 200).hexdigest()
            self.wfile.write(digest.encode() + b"\n")


def client(port: int, seconds: float, rate: float, done: multiprocessing.Queue[int]) -> None:
    count = 0
    with socket.create_connection(("127.0.0.1", port)) as connection, connection.makefile("rwb") as stream:
        started = time.monotonic()
        while time.monotonic() < started + seconds:
            stream.write(b"request %d\n" % count)
            stream.flush()
            if not stream.readline():
                break
            count += 1
            time.sleep(1 / rate)
    done.put(count)


def main(seconds: str, rate: str) -> None:
    started = time.monotonic()
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        done: multiprocessing.Queue[int] = multiprocessing.Queue()
        sender = multiprocessing.get_context("fork").Process(
            target=client, args=(server.server_address[1], float(seconds), float(rate), done)
        )
        sender.start()
        requests = done.get()
        sender.join()
        server.shutdown()
    print(json.dumps({"pid": os.getpid(), "requests": requests, "seconds": time.monotonic() - started}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
