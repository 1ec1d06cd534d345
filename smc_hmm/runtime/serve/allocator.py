"""A serving process's allocator: glibc tuned so that what peers make it allocate does not
stay resident (:func:`bound_allocator`, called by ``Server.serve_forever``)."""

from __future__ import annotations

import ctypes

__all__ = ["ARENAS", "BIG_BUFFER_BYTES", "bound_allocator"]

#: glibc's mallopt parameters; the size from which a serving process maps buffers, and
#: the allocation arenas its threads share
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8
BIG_BUFFER_BYTES = 256 * 1024
ARENAS = 2


def bound_allocator() -> bool:
    """Keep what peers make a serving process allocate from staying resident (glibc).

    Peers decide how many large buffers a server holds (frames up to the session's
    limit, read chunks, decoded payloads), and glibc's default moves its mmap threshold
    up to the largest block freed so far, so such bursts are later carved from the
    session threads' arenas and stay resident after the sessions end; and every new
    thread may open an arena of its own (up to eight per core), each keeping its
    high-water mark.  A fixed threshold of 256 KiB returns large buffers to the system as
    soon as they are freed, and two arenas shared by every thread keep the rest compact
    (threads of one Python process mostly take turns anyway).  True if both were set
    (False off glibc: nothing changes).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mapped = mallopt(_M_MMAP_THRESHOLD, BIG_BUFFER_BYTES)
    shared = mallopt(_M_ARENA_MAX, ARENAS)
    return bool(mapped and shared)
