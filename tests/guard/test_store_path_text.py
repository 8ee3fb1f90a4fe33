"""The Claude Code hook's paths read without pathlib (``otel_repeat_guard.store.path_text``): each the same value, or
the same error, as ``pathlib.Path``'s."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_repeat_guard.store import path_text

ODD_PATHS = [
    "",
    ".",
    "..",
    "/",
    "//",
    "///",
    "////x",
    "//x/y",
    "///x",
    "a",
    "a/",
    "a//b/./c/",
    "./a",
    "a/..",
    "../a/b.db",
    "/tmp/x.db",
    "x.tar.gz",
    ".hidden",
    "a/.hidden",
    "a/b.",
    "a/..db",
    "a/...",
    "/./.",
    "repeat-guard.db",
    "C:\\x\\y.db",
    "a/b c/é.db",
]
paths = st.one_of(st.sampled_from(ODD_PATHS), st.text(alphabet="/.ab\\é ", max_size=12))


def _same(ours: object, theirs: object) -> None:
    assert ours == theirs


def _error_or_value(call: object, *args: object) -> object:
    try:
        return call(*args)  # type: ignore[operator]
    except ValueError as error:
        return ("ValueError", str(error))


@given(paths, st.lists(st.text(alphabet="ab.é", min_size=1, max_size=4), max_size=3))
def test_each_path_reads_as_pathlib_reads_it(text: str, names: list[str]) -> None:
    path = Path(text)
    assert path_text.path_text(text) == str(path)
    assert path_text.path_text(path) == str(path)
    assert path_text.parent_of(text) == str(path.parent)
    assert path_text.name_of(text) == path.name
    assert path_text.stem_and_suffix(text) == (path.stem, path.suffix)
    assert path_text.joined(text, *names) == str(path.joinpath(*names))
    assert _error_or_value(path_text.without_suffix, text) == _error_or_value(lambda: str(path.with_suffix("")))
    for name in ("x.chains.db", "", ".", "a/b"):
        assert _error_or_value(path_text.with_name, text, name) == _error_or_value(
            lambda n: str(path.with_name(n)), name
        )


def test_a_file_a_folder_and_nothing_read_as_pathlib_reads_them(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    for name in ("file", "folder", "pipe", "missing", "file/under-a-file", "folder/", "nul\0byte"):
        path = tmp_path / name
        text = f"{tmp_path}/{name}"
        assert (path_text.exists(text), path_text.is_dir(text), path_text.is_file(text)) == (
            path.exists(),
            path.is_dir(),
            path.is_file(),
        ), name


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_a_folder_it_may_not_search_raises_as_pathlib_does(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(0)
    try:
        for method in ("exists", "is_dir", "is_file"):
            try:
                theirs: object = getattr(closed / "x.db", method)()
            except OSError as error:
                theirs = type(error)
            try:
                ours: object = getattr(path_text, method)(f"{closed}/x.db")
            except OSError as error:
                ours = type(error)
            assert ours == theirs, method
    finally:
        closed.chmod(stat.S_IRWXU)


def test_folders_are_made_as_pathlib_makes_them(tmp_path: Path) -> None:
    path_text.make_dirs(f"{tmp_path}/a//b/./c/")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    path_text.make_dirs(f"{tmp_path}/a/b/c")  # there already
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        path_text.make_dirs(f"{tmp_path}/file")
    with pytest.raises(FileExistsError) as theirs:
        (tmp_path / "file").mkdir(parents=True, exist_ok=True)
    with pytest.raises(NotADirectoryError) as ours:
        path_text.make_dirs(f"{tmp_path}/file/under")
    with pytest.raises(NotADirectoryError) as pathlib_error:
        (tmp_path / "file" / "under").mkdir(parents=True, exist_ok=True)
    assert str(ours.value) == str(pathlib_error.value)
    assert theirs.value.errno is not None
