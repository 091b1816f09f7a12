"""The wheel's native parts besides the agent (setuptools-rust builds that, pyproject.toml):
what a user's build needs to instrument a program (docs/observe.md, "Installed with xtalk").

- `xtalk/_data/lib/libxtalk_preload.so`: the syscall-probe preload library, compiled here;
- `xtalk/_probe`: the Python probes (`xtalk.probe`), probe.h compiled as an extension module;
- `xtalk/_data/include/xtalk/probe.h`, `xtalk/_data/examples/`, `xtalk/_data/pkgconfig/
  xtalk-probe.pc`: copied into the wheel. An editable install (`make setup`) links them to the
  checkout instead, so an edit of the header is seen at once.

`xtalk.installed` finds them; `xtalk probe --cflags/--libs/--preload` prints them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.extension import Extension

ROOT = Path(__file__).resolve().parent
# Relative to the pkg-config file itself, so that the wheel can be installed anywhere.
PC = """prefix=${pcfiledir}/..
includedir=${prefix}/include
preload=${prefix}/lib/libxtalk_preload.so

Name: xtalk-probe
Description: xtalk probes for your own program (header-only; preload = the syscall probes)
Version: %s
Cflags: -I${includedir} -pthread
Libs: -pthread
"""


def _version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return next(line.split('"')[1] for line in text.splitlines() if line.startswith("version"))


def _write_build_info(package: Path) -> None:
    """xtalk/_build_info.py in a wheel: the commit it was built from (provenance.build_commit),
    asked of xtalk's own checkout only; "unknown" from an sdist or a tree without git."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_xtalk_provenance", ROOT / "src" / "xtalk" / "provenance.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    commit = mod.source_commit(ROOT) or "unknown"
    (package / "_build_info.py").write_text(f'"""Written by setup.py when the wheel was built."""\n\nCOMMIT = {commit!r}\n')


class BuildPy(build_py):
    """Adds the header, the examples and the pkg-config file under xtalk/_data."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            data = ROOT / "src" / "xtalk" / "_data"
            data.mkdir(exist_ok=True)
            for name, target in (("include", "../../../include"), ("examples", "../../../examples")):
                link = data / name
                if not link.is_symlink():
                    if link.exists():
                        shutil.rmtree(link)
                    os.symlink(target, link)
        else:
            data = Path(self.build_lib) / "xtalk" / "_data"
            _write_build_info(Path(self.build_lib) / "xtalk")
            shutil.copytree(ROOT / "include", data / "include", dirs_exist_ok=True)
            shutil.copytree(ROOT / "examples", data / "examples", dirs_exist_ok=True)
        (data / "pkgconfig").mkdir(parents=True, exist_ok=True)
        (data / "pkgconfig" / "xtalk-probe.pc").write_text(PC % _version())


class BuildExt(build_ext):
    """Builds the extension module, then the preload library: a plain shared library (no
    Python in it, its name fixed), which setuptools' own Library type would not make."""

    def run(self):
        super().run()
        lib = (ROOT / "src" if self.inplace else Path(self.build_lib)) / "xtalk" / "_data" / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        objects = self.compiler.compile(["preload/xtalk_preload.c"], output_dir=self.build_temp,
                                        include_dirs=["include"], extra_postargs=["-O2", "-fPIC"])
        self.compiler.link_shared_object(objects, str(lib / "libxtalk_preload.so"), libraries=["dl"])


setup(
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    ext_modules=[
        Extension("xtalk._probe", ["bindings/python/xtalk_probe_module.c"], include_dirs=["include"],
                  extra_compile_args=["-O2"]),
    ],
)
