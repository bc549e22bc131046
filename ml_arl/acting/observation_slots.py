"""Where a trajectory's observations are written as they arrive, and how they reach the trainer.

An ``AgentProcessor`` writes each agent's observation rows straight into a *slot*: for every
observation spec, ``rows`` (time horizon + 1) rows of float32, the last one for the observation
that follows the trajectory. A trajectory's ``obs`` and ``next_obs`` are views of its slot, so
nothing is stacked when it is cut. Slots come in pools (``SlotPool``: n slots in one buffer, a
flag byte per slot saying whether it is taken).

In a worker process (``SharedFiles``) a pool's buffer is a file in shared memory (/dev/shm where
there is one), mapped by the worker and by the main process. A view of a shared slot pickles as
where it lies (``_SharedView.__reduce_ex__``), not as its bytes; unpickled in the main process it
is a view of the same memory (``_attach``). So an observation is copied once by the worker, into
its slot, and once more by the trainer, when it gathers its batch (PPO's ``np.concatenate``, SAC's
replay buffer), where pickling copied it twice more and stacking once. The main process frees a
slot when the last view of it is gone (a finalizer on the slot's base array clears its flag); the
worker takes only slots whose flag is clear. A pool that is full makes the processor open another
(twice as many slots) up to ``cap_bytes`` per behavior; past that, and in processes that ship
nothing (the in-process and Ray managers), slots are on the heap, freed the same way, and a
trajectory much shorter than its slot is copied out of it so the slot is free at once.

Files: the main process names them (``prefix``: its pid, the worker id, the worker's start count),
maps and unlinks each on first sight, and unlinks what is left of a worker's once it is gone
(``forget``); a worker whose main process vanished unlinks its own; a new run unlinks files of
main processes that no longer exist (``remove_stale``). This module must not import torch.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import math
import mmap
import os
import re
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

logger = logging.getLogger(__name__)

FREE, TAKEN = 0, 1
ALIGN = 64
FILE_PREFIX = "ml_arl-obs-"
DTYPE = np.dtype(np.float32)

Buffer = Union[mmap.mmap, bytearray]


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def slot_layout(shapes: Sequence[tuple[int, ...]], rows: int) -> tuple[list[int], int]:
    """Each spec's offset inside a slot, and the slot's size in bytes (each part 64-byte aligned)."""
    offsets, size = [], 0
    for shape in shapes:
        offsets.append(size)
        size += _aligned(rows * math.prod(shape) * DTYPE.itemsize)
    return offsets, max(size, ALIGN)


class SlotPool:
    """``n_slots`` slots of ``rows`` rows per spec in one buffer: ``flags`` (a byte per slot) first,
    then the slots. ``blocks[k]`` is spec k over every slot, [n_slots, rows, *shape], for writing."""

    def __init__(self, shapes: Sequence[tuple[int, ...]], rows: int, n_slots: int, buffer: Buffer, path: str = ""):
        self.shapes = [tuple(s) for s in shapes]
        self.rows = rows
        self.n_slots = n_slots
        self.path = path  # the shared file's name; "" for a heap pool
        self.offsets, self.slot_bytes = slot_layout(self.shapes, rows)
        self.header = _aligned(n_slots)
        self.buffer = buffer
        self.flags = np.frombuffer(buffer, np.uint8, n_slots, 0)
        self.blocks = [
            np.ndarray((n_slots, rows, *shape), DTYPE, buffer, self.header + off,
                       (self.slot_bytes, math.prod(shape) * DTYPE.itemsize, *_strides(shape)))
            for shape, off in zip(self.shapes, self.offsets)
        ]
        self.address = self.flags.ctypes.data
        self._bases: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
        self._cursor = 0

    @staticmethod
    def size_of(shapes: Sequence[tuple[int, ...]], rows: int, n_slots: int) -> int:
        return _aligned(n_slots) + n_slots * slot_layout(shapes, rows)[1]

    @property
    def shared(self) -> bool:
        return bool(self.path)

    def take(self) -> Optional[int]:
        """A free slot, now taken; None when every slot is."""
        free = np.flatnonzero(self.flags[self._cursor:] == FREE)
        if not len(free):
            free = np.flatnonzero(self.flags[: self._cursor] == FREE)
            if not len(free):
                return None
            slot = int(free[0])
        else:
            slot = self._cursor + int(free[0])
        self.flags[slot] = TAKEN
        self._cursor = (slot + 1) % self.n_slots
        return slot

    def release(self, slot: int) -> None:
        """The processor dropped the slot before anything was shipped from it."""
        self.flags[slot] = FREE

    def views(self, slot: int, length: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """A trajectory of ``length`` steps in ``slot``: its observations [length, *shape] and the
        rows after them, per spec. Views of a shared slot pickle as where they lie; views of a heap
        slot free it when the last of them is gone."""
        if self.shared:
            obs = [block[slot].view(_SharedView) for block in self.blocks]
            for o in obs:
                o._pool = self
        else:
            base = self._base(slot)
            obs = [base[off : off + self.rows * math.prod(shape) * DTYPE.itemsize].view(DTYPE).reshape(self.rows, *shape)
                   for shape, off in zip(self.shapes, self.offsets)]
        return [o[:length] for o in obs], [o[length] for o in obs]

    def _base(self, slot: int) -> np.ndarray:
        base = self._bases.get(slot)
        if base is None:
            base = np.frombuffer(self.buffer, np.uint8, self.slot_bytes, self.header + slot * self.slot_bytes)
            weakref.finalize(base, _clear, self.flags, slot).atexit = False
            self._bases[slot] = base
        return base

    def descriptor(self, arr: np.ndarray) -> Optional[tuple[Any, ...]]:
        """Where ``arr`` lies in this shared pool (for ``_attach``), or None if it is not a contiguous part of one slot."""
        start = arr.__array_interface__["data"][0] - self.address - self.header
        slot, offset = divmod(start, self.slot_bytes)
        if start < 0 or slot >= self.n_slots or not arr.flags.c_contiguous or offset + arr.nbytes > self.slot_bytes:
            return None
        return self.path, self.n_slots, self.slot_bytes, int(slot), int(offset), tuple(arr.shape)


def write_rows(writes: list[tuple[SlotPool, int, int, int]], obs: list[np.ndarray]) -> None:
    """Each observation row once, from the environment's arrays into its slot: one assignment
    per pool and spec (from the environment's own arrays when every agent of the step writes
    one row there, in order)."""
    pools, slots, rows, index = zip(*writes)
    pool = pools[0]
    if pools.count(pool) != len(pools):  # agents whose slots are in different pools (one filled up): row by row
        for pool, slot, row, i in writes:
            for block, o in zip(pool.blocks, obs):
                block[slot, row] = o[i]
        return
    whole = len(index) == len(obs[0]) and index == tuple(range(len(index)))
    for block, o in zip(pool.blocks, obs):
        block[slots, rows] = o if whole else np.asarray(o)[list(index)]


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], DTYPE.itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _clear(flags: np.ndarray, slot: int) -> None:
    flags[slot] = FREE


class _SharedView(np.ndarray):
    """A view of a shared slot in the worker: pickles as (file, slot, offset, shape)."""

    _pool: Optional[SlotPool] = None

    def __array_finalize__(self, obj: Any) -> None:
        self._pool = getattr(obj, "_pool", None)

    def __reduce_ex__(self, protocol: Any) -> Any:  # noqa: ANN401 - pickle's own signature
        where = self._pool.descriptor(self) if self._pool is not None else None
        if where is None:  # not (any longer) a plain part of a slot: its bytes, as any array
            return np.array(self).__reduce_ex__(protocol)
        return _attach, where

    def __reduce__(self) -> Any:  # noqa: ANN401
        return self.__reduce_ex__(2)


# ---------------------------------------------------------------------------- the main process
class _Mapped:
    def __init__(self, mm: mmap.mmap, n_slots: int, slot_bytes: int):
        self.mm = mm
        self.header = _aligned(n_slots)
        self.slot_bytes = slot_bytes
        self.flags = np.frombuffer(mm, np.uint8, n_slots, 0)
        self.bases: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


_lock = threading.Lock()
_mapped: dict[str, _Mapped] = {}


def _attach(path: str, n_slots: int, slot_bytes: int, slot: int, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    """Unpickling a shared view: the same memory, mapped here; the slot is freed when the last view
    of it in this process is gone."""
    with _lock:
        mapped = _mapped.get(path)
        if mapped is None:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                raise RuntimeError(f"{path}: a worker's observations are gone (its shared file was removed)") from None
            try:
                mm = mmap.mmap(fd, 0)
            finally:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # mapped on both sides: the name is no longer needed
            mapped = _mapped[path] = _Mapped(mm, n_slots, slot_bytes)
        base = mapped.bases.get(slot)
        if base is None:
            base = np.frombuffer(mapped.mm, np.uint8, mapped.slot_bytes, mapped.header + slot * mapped.slot_bytes)
            weakref.finalize(base, _clear, mapped.flags, slot).atexit = False
            mapped.bases[slot] = base
    count = math.prod(shape)
    return base[offset : offset + count * DTYPE.itemsize].view(DTYPE).reshape(shape)


def shared_dir() -> str:
    """Where the files go: /dev/shm where it exists (memory), else the temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def worker_prefix(worker_id: int, start: int) -> str:
    """The name every shared file of this worker's start begins with."""
    return os.path.join(shared_dir(), f"{FILE_PREFIX}{os.getpid()}-{worker_id}-{start}-")


def forget(prefix: str) -> None:
    """A worker is gone: unlink its files this process has not mapped, and stop mapping new views
    of the ones it has (views still alive keep their memory)."""
    for path in glob.glob(glob.escape(prefix) + "*"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    with _lock:
        for path in [p for p in _mapped if p.startswith(prefix)]:
            del _mapped[path]


STALE_AFTER_S = 60.0  # a live run maps (and unlinks) a worker's file within moments of its creation


def remove_stale(directory: Optional[str] = None) -> None:
    """Unlink the files of main processes that no longer exist (a run killed with SIGKILL), once
    they are a minute old (a process of another pid namespace sharing the directory keeps its own)."""
    pattern = re.compile(re.escape(FILE_PREFIX) + r"(\d+)-")
    now = time.time()
    for path in glob.glob(os.path.join(directory or shared_dir(), FILE_PREFIX + "*")):
        match = pattern.match(os.path.basename(path))
        if match is None:
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                if now - os.stat(path).st_mtime > STALE_AFTER_S:
                    os.unlink(path)
        except PermissionError:
            pass  # another user's live process


# ---------------------------------------------------------------------------- the worker
_owned: list[str] = []  # the prefixes of this process's SharedFiles (a worker's)


def remove_owned() -> None:
    """Unlink every file this process made that is still there: its main process is gone (the
    worker's lifeline watchdog calls this before it takes the worker's process group down)."""
    for prefix in _owned:
        forget(prefix)


class SharedFiles:
    """A worker's shared files: named ``prefix`` + a count, at most ``cap_bytes`` per behavior."""

    def __init__(self, prefix: str, cap_bytes: int):
        self.prefix = prefix
        self.cap_bytes = cap_bytes
        self._count = 0
        _owned.append(prefix)

    def create(self, size: int) -> Optional[tuple[mmap.mmap, str]]:
        """A mapped file of ``size`` bytes, or None where there is no room for it."""
        directory = os.path.dirname(self.prefix)
        try:
            st = os.statvfs(directory)
            if st.f_bavail * st.f_frsize < 2 * size:
                return None
            path = f"{self.prefix}{self._count}"
            self._count += 1
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as err:
            logger.debug("no shared file for observations (%s); they travel pickled", err)
            return None
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, size)  # room now, or ENOSPC now (never SIGBUS on a write later)
            else:
                os.ftruncate(fd, size)
            return mmap.mmap(fd, size), path
        except OSError as err:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            logger.debug("no shared file for observations (%s); they travel pickled", err)
            return None
        finally:
            os.close(fd)

    def remove_all(self) -> None:
        forget(self.prefix)


class Slots:
    """One processor's slots: shared pools while they fit under the cap, else heap pools."""

    FIRST_SLOTS = 8

    def __init__(self, shapes: Sequence[tuple[int, ...]], rows: int, files: Optional[SharedFiles] = None):
        self.shapes = [tuple(s) for s in shapes]
        self.rows = rows
        self.files = files
        self.pools: list[SlotPool] = []
        self.shared_bytes = 0

    def take(self, hint: int = 0) -> tuple[SlotPool, int]:
        """A free slot; ``hint``: how many agents may want one at once (the first pool's size)."""
        for shared in (True, False):  # shared slots first: a heap slot is pickled
            for pool in self.pools:
                if pool.shared == shared:
                    slot = pool.take()
                    if slot is not None:
                        return pool, slot
        pool = self._new_pool(max(self.FIRST_SLOTS, 2 * hint, 2 * (self.pools[-1].n_slots if self.pools else 0)))
        self.pools.append(pool)
        slot = pool.take()
        assert slot is not None
        return pool, slot

    def _new_pool(self, n_slots: int) -> SlotPool:
        if self.files is not None:
            size = SlotPool.size_of(self.shapes, self.rows, n_slots)
            room = self.files.cap_bytes - self.shared_bytes
            if size > room:  # as many slots as the cap leaves room for
                n_slots = (room - ALIGN) // (slot_layout(self.shapes, self.rows)[1] + 1)
                size = SlotPool.size_of(self.shapes, self.rows, n_slots)
            made = self.files.create(size) if n_slots >= 1 else None
            if made is not None:
                self.shared_bytes += size
                return SlotPool(self.shapes, self.rows, n_slots, made[0], made[1])
        heap_slots = max(self.FIRST_SLOTS, n_slots if self.files is None else self.FIRST_SLOTS)
        self.pools = [p for p in self.pools if p.shared or (p.flags != FREE).any()]  # drop heap pools nothing uses
        return SlotPool(self.shapes, self.rows, heap_slots, bytearray(SlotPool.size_of(self.shapes, self.rows, heap_slots)))
