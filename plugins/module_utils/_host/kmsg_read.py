# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read ``/dev/kmsg`` (or a file in its record format) to its current end without blocking.

Shared by burn-in (around each tier) and fleet_audit (since the last audit).  Each ``read`` of ``/dev/kmsg``
returns one record; ``EAGAIN`` means the end; ``EPIPE`` means the record under the reader was overwritten in the
ring buffer, and the next read continues at the oldest one left (Documentation/ABI/testing/dev-kmsg).
"""

from __future__ import annotations

import errno
import os


def read_kmsg(path: str = "/dev/kmsg") -> str:
    """The text of every record ``path`` holds now, one per line.  Raises :class:`OSError` when unreadable."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks = []
    try:
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:  # EPIPE: record overwritten while reading; keep going
                if exc.errno == errno.EPIPE:
                    continue
                raise
            if not data:
                break
            chunks.append(data.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return "".join(c if c.endswith("\n") else c + "\n" for c in chunks)
