"""The outbox's intake: where ``Outbox.enqueue`` puts a write before SQLite has it, so that the caller's thread never
lets go of Python's GIL. Every SQLite call and every system call does, and getting the GIL back waits for whichever
thread took it meanwhile, up to the interpreter's switch interval (5 ms): with the node's sender threads busy, an
``enqueue`` that committed to SQLite itself took over a millisecond about once in 25 calls.

The intake is a file mapped into memory (``mmap``, shared): a write is copied into the mapping, which is the kernel's
page cache of the file, so it survives a crash of the process as soon as the copy ends, with no system call. The
outbox moves the records into SQLite off the caller's thread (``take`` then ``taken``); opening the outbox after a
crash moves those that were still here.

Layout: records one after another from offset 0, each a 4-byte little-endian length and that many bytes (UTF-8
JSON); a length of 0 ends them. The body is copied before its length, so a record torn by a crash in the middle of
the copy (its ``enqueue`` never returned) reads as the end. Once every record is in SQLite, the used part is zeroed
and the next record goes at 0 again; opening it zeroes what
follows the last whole record. ``append`` answers False when the record does not fit: the outbox then drains
the intake on the caller's thread, that once."""

from __future__ import annotations

import mmap
import os
import struct
import threading
from typing import List, Tuple

_LEN = struct.Struct("<I")
DEFAULT_SIZE = 4 << 20


class Intake:
    def __init__(self, path: str, size: int = DEFAULT_SIZE):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # sparse: pages are given as records reach them
            self._size = os.fstat(fd).st_size
            self._mm = mmap.mmap(fd, self._size)
        finally:
            os.close(fd)
        self._lock = threading.Lock()
        self._drained = 0  # the records before this offset are in SQLite
        self._end = 0  # where the next record goes
        while self._end + _LEN.size <= self._size:
            (n,) = _LEN.unpack_from(self._mm, self._end)
            if n == 0 or self._end + _LEN.size + n > self._size:
                break
            self._end += _LEN.size + n
        # A record torn by a crash leaves its body past the end: zeroed, so that no later record's length slot
        # lands on it.
        if self._mm[self._end :].rstrip(b"\0"):
            self._mm[self._end :] = bytes(self._size - self._end)

    def append(self, body: bytes) -> bool:
        """Copies one record in; False when it does not fit (nothing is copied then)."""
        with self._lock:
            at = self._end
            end = at + _LEN.size + len(body)
            if end + _LEN.size > self._size:
                return False
            self._mm[at + _LEN.size : end] = body
            self._mm[at : at + _LEN.size] = _LEN.pack(len(body))
            self._end = end
            return True

    def take(self) -> Tuple[List[bytes], int]:
        """The records not yet in SQLite, and the mark to pass to ``taken`` once they are."""
        with self._lock:
            start, end = self._drained, self._end
        out: List[bytes] = []
        at = start
        while at < end:
            (n,) = _LEN.unpack_from(self._mm, at)
            out.append(self._mm[at + _LEN.size : at + _LEN.size + n])
            at += _LEN.size + n
        return out, end

    def taken(self, mark: int) -> None:
        """The records before ``mark`` are in SQLite; when no other came meanwhile, the intake starts over."""
        with self._lock:
            self._drained = max(self._drained, mark)
            if self._drained == self._end and self._end:
                self._mm[0 : self._end] = bytes(self._end)
                self._drained = self._end = 0

    def pending(self) -> bool:
        with self._lock:
            return self._end > self._drained

    def close(self) -> None:
        self._mm.close()
