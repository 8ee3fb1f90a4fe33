"""File paths as text, read as :class:`pathlib.Path` reads them, without importing :mod:`pathlib`.

A Claude Code hook process opens the store on every call, and :mod:`pathlib` (with the :mod:`urllib.parse` and
:mod:`ipaddress` it imports) cost that process about a twelfth of its call. So the store's and the hook's paths on
that way are plain text: :func:`path_text` is ``str(Path(path))`` (repeated and trailing slashes, and ``.`` parts,
dropped; ``..`` kept), and each other function is the ``Path`` method of the same name on that text, the same value
or the same error. POSIX paths are read here; on another system, and for any path whose error ``Path`` words
itself (an empty name, an error :mod:`pathlib`'s checks do not ignore), :mod:`pathlib` answers.
``tests/guard/test_store_path_text.py`` holds each equal to ``Path``'s.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_POSIX = os.sep == "/" and os.altsep is None
_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
"""The errors :mod:`pathlib`'s ``exists``, ``is_dir`` and ``is_file`` read as "no such file"."""


def _path(path: str | os.PathLike[str]) -> Path:
    """``pathlib.Path(path)``, imported here: where this module's own reading does not answer."""
    from pathlib import Path  # noqa: PLC0415 - see the module's docstring

    return Path(path)


def _split(text: str) -> tuple[str, list[str]]:
    """A POSIX path's root (``""``, ``"/"``, or ``"//"``: exactly two leading slashes are kept) and its parts."""
    stripped = text.lstrip("/")
    slashes = len(text) - len(stripped)
    root = "" if not slashes else "//" if slashes == 2 else "/"
    return root, [part for part in stripped.split("/") if part and part != "."]


def path_text(path: str | os.PathLike[str]) -> str:
    """``str(Path(path))``."""
    text = os.fspath(path)
    if not _POSIX or not isinstance(text, str):
        return str(_path(path))
    root, parts = _split(text)
    return root + "/".join(parts) or "."


def joined(path: str, *names: str) -> str:
    """``str(Path(path, *names))`` (``path`` as :func:`path_text` gives it, each name relative)."""
    text = path_text(path)
    for name in names:
        text = path_text(text + name if text.endswith("/") else f"{text}/{name}")
    return text


def parent_of(path: str) -> str:
    """``str(Path(path).parent)``."""
    if not _POSIX:
        return str(_path(path).parent)
    root, parts = _split(path_text(path))
    if not parts:
        return root or "."
    return root + "/".join(parts[:-1]) or "."


def name_of(path: str) -> str:
    """``Path(path).name``."""
    if not _POSIX:
        return _path(path).name
    parts = _split(path_text(path))[1]
    return parts[-1] if parts else ""


def _suffix_at(name: str) -> int:
    """Where ``name``'s suffix starts (``Path.suffix``: its last dot, neither first nor last), else -1."""
    at = name.rfind(".")
    return at if 0 < at < len(name) - 1 else -1


def stem_and_suffix(path: str) -> tuple[str, str]:
    """``(Path(path).stem, Path(path).suffix)``."""
    name = name_of(path)
    at = _suffix_at(name)
    return (name[:at], name[at:]) if at >= 0 else (name, "")


def with_name(path: str, name: str) -> str:
    """``str(Path(path).with_name(name))``: ``Path``'s own error for a path without a name or a name that is none."""
    if not _POSIX or not name_of(path) or not name or "/" in name or name == ".":
        return str(_path(path).with_name(name))
    return joined(parent_of(path), name)


def without_suffix(path: str) -> str:
    """``str(Path(path).with_suffix(""))``."""
    if not _POSIX or not name_of(path):
        return str(_path(path).with_suffix(""))
    root, parts = _split(path_text(path))
    return root + "/".join([*parts[:-1], stem_and_suffix(path)[0]])  # the stem as it is, unchecked, as Path has it


def _mode(path: str, method: str) -> int | bool | None:
    """The file mode at ``path``; None where there is no file (as ``Path`` reads the error); for another error,
    the ``Path`` method's own answer (its error, on this Python)."""
    try:
        return os.stat(path).st_mode
    except ValueError:
        return None
    except OSError as error:
        if error.errno in _IGNORED or getattr(error, "winerror", None) in (21, 1921):
            return None
        answer: bool = getattr(_path(path), method)()
        return answer


def exists(path: str) -> bool:
    """``Path(path).exists()``."""
    mode = _mode(path, "exists")
    return mode if isinstance(mode, bool) else mode is not None


def is_dir(path: str) -> bool:
    """``Path(path).is_dir()``."""
    mode = _mode(path, "is_dir")
    return mode if isinstance(mode, bool) else mode is not None and stat.S_ISDIR(mode)


def is_file(path: str) -> bool:
    """``Path(path).is_file()``."""
    mode = _mode(path, "is_file")
    return mode if isinstance(mode, bool) else mode is not None and stat.S_ISREG(mode)


def make_dirs(path: str) -> None:
    """``Path(path).mkdir(parents=True, exist_ok=True)``."""
    path = path_text(path)
    try:
        os.mkdir(path)
    except FileNotFoundError:
        parent = parent_of(path)
        if parent == path_text(path):
            raise
        make_dirs(parent)
        try:
            os.mkdir(path)
        except OSError:
            if not is_dir(path):
                raise
    except OSError:
        if not is_dir(path):
            raise
