"""One aiohttp event loop serving many BMCs, one listening socket (address or port) each.

The BMC a request is for is found from the local address the connection arrived on
(``sockname``), so thousands of BMCs share one application and one handler.  Linux
routes all of 127.0.0.0/8 to ``lo`` without ``ip addr add``, so any 127.x.y.z can be bound.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

from aiohttp import web

LOG = logging.getLogger("symphony_emulator")


class EmulatorServer:
    """Routes connections by local (address, port) to objects with ``handle()`` (BMC, CaptureBMC)."""

    def __init__(self, ssl_context=None):
        self.ssl_context = ssl_context
        self.targets = {}
        self._runner = None
        self._sites = []

    async def _setup(self):
        if self._runner is None:
            # aiohttp's low-level server: no router or middlewares, one handler for every BMC
            server = web.Server(self._handler, access_log=None)

            def make_request(message, payload, protocol, writer, task):
                # firmware images arrive by multipart push: allow bodies up to 512 MiB
                return web.BaseRequest(message, payload, protocol, writer, task, server._loop,
                                       client_max_size=512 * 1024 * 1024)
            server.request_factory = make_request
            self._runner = web.ServerRunner(server, handle_signals=False)
            await self._runner.setup()

    async def add(self, target, host, port):
        """Listen on ``host:port`` (port 0: any free port) for ``target``; returns the bound port."""
        await self._setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, "cannot bind %s:%s for %s: %s"
                          % (host, port, getattr(target, "hostname", "?"), exc.strerror))
        sock.listen(256)
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock, ssl_context=self.ssl_context, backlog=256)
        await site.start()
        self._sites.append(site)
        self.targets[(host, bound)] = target
        return bound

    async def close(self):
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._sites = []

    async def _handler(self, request):
        transport = request.transport
        sockname = transport.get_extra_info("sockname") if transport is not None else None
        target = self.targets.get(tuple(sockname[:2])) if sockname else None
        if target is None:
            return web.Response(status=404, text="no BMC on this address")
        body = await request.read() if request.can_read_body else b""
        reply = target.handle(request.method, request.path, request.query_string, request.headers, body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.abort:
            _reset(request.transport)
            raise web.HTTPServiceUnavailable()   # never sent: the connection is already gone
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)


def _reset(transport):
    """Drop the connection with a TCP RST (SO_LINGER 0), as a crashing BMC does."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


def free_port(host="127.0.0.1"):
    """A port nothing listens on right now (for BMCs that must refuse connections)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
