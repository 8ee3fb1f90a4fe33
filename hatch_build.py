"""The wheel's build hook: leaves the package pure Python, or compiles the guard's core with mypyc when asked.

Configured in ``pyproject.toml`` under ``[tool.hatch.build.targets.wheel.hooks.custom]``:
``compile`` and ``interpreted`` are globs (relative to the project root, ``*`` stays within one
folder) of the modules mypyc compiles and of those it leaves alone, so a new module in a compiled
folder is compiled without a list edit. ``compile-requires`` is what the compile needs in the build
environment, besides the package's own dependencies (mypy reads their types).

Which build a wheel gets (black's way: source builds are pure Python unless asked, released wheels
are compiled by cibuildwheel, whose settings in ``pyproject.toml`` set the switch):

- By default: the pure-Python package, in seconds, and the build environment needs no mypy.
- ``OTEL_REPEAT_GUARD_COMPILE=1``: the compiled modules as C extensions beside their ``.py`` sources
  (tracebacks and ``inspect`` still find the text), and a platform-specific wheel tag. The compile
  takes three to five minutes on 2 cores.
- ``OTEL_REPEAT_GUARD_REQUIRE_COMPILED=1`` (``make`` sets it for the compiled test build, and the
  release build sets it): asks for the compile too, and a compile that fails is an error.
- Asked to compile, with no working C compiler (and Python headers) or a failed compile: the
  pure-Python package, with a warning and the compiler's output.
- ``OTEL_REPEAT_GUARD_PURE=1``: the pure-Python package, whatever else is set (but for
  ``OTEL_REPEAT_GUARD_REQUIRE_COMPILED``, which contradicts it: an error).

An editable install is always pure Python. ``otel_repeat_guard.build_mode()`` tells which one runs.

The compile runs in a temporary copy of the package, never in the source tree: an extension module
left beside a ``.py`` file would win the import in the editable install, which must stay pure.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COMPILE_ENV = "OTEL_REPEAT_GUARD_COMPILE"
PURE_ENV = "OTEL_REPEAT_GUARD_PURE"
REQUIRE_ENV = "OTEL_REPEAT_GUARD_REQUIRE_COMPILED"
PACKAGE = "otel_repeat_guard"
GROUP = f"{PACKAGE}._core"
"""mypyc's shared library: ``otel_repeat_guard/_core__mypyc.*.so``, inside the package, not beside it."""

_PROBE_C = """\
#include <Python.h>
static struct PyModuleDef probe = {PyModuleDef_HEAD_INIT, "_probe", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&probe); }
"""

_PROBE_SETUP = """\
from setuptools import Extension, setup
setup(name="probe", py_modules=[], packages=[], ext_modules=[Extension("_probe", ["probe.c"])])
"""

_MYPYC_SETUP = """\
import json, sys
from setuptools import setup
from mypyc.build import mypycify

paths, mypy_args, group = json.loads(sys.argv.pop(1))
extensions = mypycify([*mypy_args, *paths], opt_level="3", group_name=group)
if sys.platform != "win32":  # one shared library: its own calls go direct (no PLT), so the compiler may inline
    for extension in extensions:  # them; only the modules' init functions stay exported (PyMODINIT_FUNC)
        extension.extra_compile_args = [*extension.extra_compile_args, "-fvisibility=hidden"]
setup(name="otel-repeat-guard-core", py_modules=[], packages=[], ext_modules=extensions)
"""


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def compile_requested() -> bool:
    """Whether the environment asks for the compiled build: the pure-Python package is the default."""
    if _flag(PURE_ENV):
        if _flag(REQUIRE_ENV):
            raise ValueError(f"{PURE_ENV} and {REQUIRE_ENV} are both set: unset one of them")
        return False
    return _flag(COMPILE_ENV) or _flag(REQUIRE_ENV)


def compiled_modules(root: str | Path, config: dict[str, Any]) -> list[str]:
    """The files (relative, ``/``-separated) that mypyc compiles: ``compile`` less ``interpreted``."""

    def expand(key: str) -> set[str]:
        patterns = config.get(key, [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise TypeError(f"option `{key}` of the mypyc build hook must be a list of globs")
        return {
            path.replace(os.sep, "/")
            for pattern in patterns
            for path in glob.glob(pattern, root_dir=root)
            if path.endswith(".py")
        }

    return sorted(expand("compile") - expand("interpreted"))


class CompileFailed(Exception):
    """The C compiler or mypyc gave up: the wheel is built pure, unless the compiled one is required."""


class MypycBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        if not compile_requested():
            return []
        requires = self.config.get("compile-requires", [])
        return [*requires, *self.metadata.core.dependencies]

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._workdir: str | None = None
        if self.target_name != "wheel" or version == "editable":
            return
        if not compile_requested():
            reason = f"{PURE_ENV} is set" if _flag(PURE_ENV) else f"set {COMPILE_ENV}=1 to compile the core with mypyc"
            self.app.display_info(f"otel-repeat-guard: building the pure-Python package ({reason})")
            return
        self.app.display_info("otel-repeat-guard: compiling the core with mypyc (three to five minutes on 2 cores)")
        modules = compiled_modules(self.root, self.config)
        if not modules:
            raise ValueError("the mypyc build hook's `compile` globs match no module")
        self._workdir = tempfile.mkdtemp(prefix="otel-repeat-guard-mypyc-")
        try:
            self._probe_compiler()
            extensions = self._compile(modules)
        except CompileFailed as failure:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            if _flag(REQUIRE_ENV):
                message = f"otel-repeat-guard: the compiled build failed ({REQUIRE_ENV} is set)\n{failure}"
                raise RuntimeError(message) from failure
            self.app.display_warning(f"otel-repeat-guard: building the pure-Python package: {failure}")
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["force_include"].update(extensions)
        self.app.display_info(f"otel-repeat-guard: compiled {len(modules)} modules with mypyc")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_workdir", None):
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _run(self, args: list[str], cwd: Path, what: str) -> None:
        try:
            done = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        except OSError as error:
            raise CompileFailed(f"{what}: {error}") from error
        if done.returncode:
            output = done.stdout.decode("utf-8", "replace").strip()
            tail = "\n".join(output.splitlines()[-40:])
            raise CompileFailed(f"{what} (exit {done.returncode}):\n{tail}")

    def _probe_compiler(self) -> None:
        """A one-line C extension, built the way the real one is: compiler, Python headers and linker."""
        assert self._workdir
        probe = Path(self._workdir, "probe")
        probe.mkdir()
        (probe / "probe.c").write_text(_PROBE_C, encoding="utf-8")
        (probe / "setup.py").write_text(_PROBE_SETUP, encoding="utf-8")
        self._run([sys.executable, "setup.py", "build_ext", "--inplace"], probe, "no working C compiler")

    def _compile(self, modules: list[str]) -> dict[str, str]:
        """The compiled modules as {built file: its path in the wheel}."""
        assert self._workdir
        source = Path(self._workdir, "src")
        # The whole package, so mypy sees every module the compiled ones import.
        shutil.copytree(
            Path(self.root, PACKAGE), source / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
        )
        (source / "setup.py").write_text(_MYPYC_SETUP, encoding="utf-8")
        lib = Path(self._workdir, "lib")
        mypy_args = [
            "--config-file",
            str(Path(self.root, "pyproject.toml")),
            "--cache-dir",
            str(Path(self._workdir, "mypy-cache")),
            # The modules left interpreted are followed for their types, their own errors left to
            # `make typecheck`: wiring.py's lazy import of the OTLP exporter is not installed here.
            "--follow-imports=silent",
        ]
        spec = json.dumps([modules, mypy_args, GROUP])
        self._run(
            [
                sys.executable,
                "setup.py",
                spec,
                "build_ext",
                "--build-lib",
                str(lib),
                "--build-temp",
                str(Path(self._workdir, "tmp")),
            ],
            source,
            "mypyc",
        )
        built = {
            str(path): path.relative_to(lib).as_posix()
            for path in lib.rglob("*")
            if path.is_file() and path.suffix in (".so", ".pyd")
        }
        if not built:
            raise CompileFailed("mypyc built no extension module")
        return built
