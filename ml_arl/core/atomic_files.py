"""Files written whole or not at all: a temporary file in the same folder, fsync, os.replace, then
an fsync of the folder. A reader, or a run killed at any moment, sees the old file or the new one,
never a part; what a killed write may leave is a ``.tmp-*`` file (``TEMP_PREFIX``), which
``remove_stale_temp_files`` clears on --resume. An OSError (disk full, read-only folder) becomes a
ResultsWriteError naming the path, and the old file stays as it was. Torch-free: used before torch
is imported (results_dir) as well as for checkpoints.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from typing import Any, Optional

import yaml

from ml_arl.core.exceptions import ResultsWriteError, RunDirectoryError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


TEMP_PREFIX = ".tmp-"  # atomic_write's temporary files; a killed run may leave some (removed on --resume)


RESULTS_ADVICE = (
    "the files saved before are intact. Free disk space or make the results folder writable (or pick another "
    "--results-dir), then continue with --resume"
)


REMOVED_ADVICE = "nothing more of this run can be saved; start it again (with --force, or another --run-id)"


_WATCHED: dict[str, tuple[str, str, tuple[int, int]]] = {}  # realpath -> (folder as named, a file in it, its (dev, ino))


def watch_folder(folder: str, witness: str, ident: tuple[int, int]) -> None:
    """Writes into ``folder`` (a run's, held by this process) check first that it is still there:
    ``witness``, a file in it, must still be the file ``ident`` (st_dev, st_ino) names."""
    _WATCHED[os.path.realpath(folder)] = (folder, witness, ident)


def unwatch_folder(folder: str) -> None:
    _WATCHED.pop(os.path.realpath(folder), None)


def forget_watched() -> None:
    _WATCHED.clear()


def removed_folder(path: str) -> Optional[str]:
    """The watched folder that ``path`` is in, if it was removed (or replaced) since it was watched."""
    if not _WATCHED:
        return None
    full = os.path.realpath(path)
    for key, (folder, witness, ident) in list(_WATCHED.items()):
        if full == key or full.startswith(key + os.sep):
            try:
                st = os.stat(witness, follow_symlinks=False)
            except OSError:
                return folder
            if (st.st_dev, st.st_ino) != ident:
                return folder
    return None


def removed_error(path: str, folder: str, run: bool = True) -> ResultsWriteError:
    what = "the run folder" if run else "the folder"
    return ResultsWriteError(f"{path}: cannot write: {what} {folder} was removed while the run was writing to it; {REMOVED_ADVICE}")


def _missing_folder(path: str) -> Optional[str]:
    """The outermost missing folder above ``path`` (below one that exists), if any."""
    folder = os.path.dirname(os.path.abspath(path))
    missing: Optional[str] = None
    while folder and not os.path.isdir(folder):
        missing = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if missing is None:
        return None
    rel = os.path.relpath(missing)
    return missing if rel.startswith(os.pardir) else rel


def write_error(path: str, err: OSError, advice: str = RESULTS_ADVICE) -> ResultsWriteError:
    """The one-line error for a file of the run that could not be written; ``advice`` says what to do.
    A folder that vanished under the run (ENOENT) is said as that, not as a full disk."""
    if err.errno == errno.ENOENT:
        removed = removed_folder(path)
        if removed is not None:
            return removed_error(path, removed)
        missing = _missing_folder(path)
        if missing is not None:
            return removed_error(path, missing, run=False)
    reason = err.strerror or str(err) or type(err).__name__
    return ResultsWriteError(f"{path}: cannot write ({reason}); {advice}")


def _fsync_dir(folder: str) -> None:
    """Make a rename in ``folder`` durable; best effort (not every file system can fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write ``path`` through a temporary file in its folder (fsync, then os.replace): a reader, or a
    run killed at any moment, sees the old file or the new one, never a part. An OSError (disk full,
    read-only folder) becomes a ResultsWriteError naming ``path``; the old file is left as it was."""
    folder = os.path.dirname(os.path.abspath(path))
    removed = removed_folder(path)
    if removed is not None:  # not made again: the run's folder is gone (or another run's now)
        raise removed_error(path, removed)
    tmp: Optional[str] = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            os.fchmod(f.fileno(), _FILE_MODE)  # mkstemp makes 0600; results are ordinary files
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(folder)
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass  # a read-only folder: --resume removes it later


class AtomicFile:
    """A binary file written over time and put in place whole: ``file`` is a temporary file next to
    ``path`` (named with TEMP_PREFIX) until ``commit()`` fsyncs it and renames it to ``path``;
    ``discard()`` removes it. A reader never sees a part of it. OSErrors of opening and committing
    become a ResultsWriteError naming ``path`` with ``advice``; writes to ``file`` are the caller's."""

    def __init__(self, path: str, advice: str = RESULTS_ADVICE):
        self.path = path
        self.advice = advice
        self._folder = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(self._folder, exist_ok=True)
            fd, self.temp_path = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self._folder)
        except OSError as err:
            raise write_error(path, err, advice) from None
        self.file = os.fdopen(fd, "w+b")
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; results are ordinary files

    def commit(self) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temp_path, self.path)
        except OSError as err:
            self.discard()
            raise write_error(self.path, err, self.advice) from None
        _fsync_dir(self._folder)

    def discard(self) -> None:
        """Close and remove the temporary file (best effort: a read-only folder keeps it)."""
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.remove(self.temp_path)
        except OSError:
            pass


def write_bytes(path: str, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def copy_file_atomic(src: str, dst: str) -> None:
    try:
        with open(src, "rb") as f:
            data = f.read()
    except OSError as err:
        raise write_error(dst, err) from None
    write_bytes(dst, data)


def write_json(path: str, data: Any) -> None:
    text = json.dumps(data, indent=4)  # serialized first: only the write itself can fail half-way
    atomic_write(path, lambda f: f.write(text), "w")


def read_json_object(path: str, what: str) -> Optional[dict[str, Any]]:
    """A JSON object a run wrote with ``write_json`` (None if the file does not exist). A file that
    cannot be read or is not an object is a RunDirectoryError naming ``what`` it should be."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise RunDirectoryError(f"{path}: cannot read the {what} ({err}); --resume needs it intact") from None
    if not isinstance(data, dict):
        raise RunDirectoryError(f"{path}: not a {what} file; --resume needs it intact")
    return data


def write_yaml(path: str, data: Any) -> None:
    text = yaml.safe_dump(data, sort_keys=False)
    atomic_write(path, lambda f: f.write(text), "w")


def remove_stale_temp_files(root: str) -> list[str]:
    """Remove the temporary files of atomic writes that a killed run left under ``root``
    (never a real file of the run: those are only ever replaced whole). Returns their paths."""
    removed: list[str] = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.startswith(TEMP_PREFIX):
                path = os.path.join(folder, name)
                try:
                    os.remove(path)
                except FileNotFoundError:
                    continue
                except OSError as err:
                    raise write_error(path, err) from None
                removed.append(path)
    return removed
