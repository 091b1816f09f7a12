"""xtalk.analysis re-exports functions, but never under the name of one of its submodules:
``from xtalk.analysis import slowdown`` must give the module whatever was imported before."""

import importlib
import pkgutil
import subprocess
import sys
import types

import xtalk.analysis as A


def test_no_reexport_shadows_a_submodule():
    subs = {m.name for m in pkgutil.iter_modules(A.__path__)}
    clash = subs & set(A.__all__)
    assert not clash, f"xtalk.analysis re-exports {sorted(clash)}, which are also its submodules"
    for name in subs:
        importlib.import_module(f"xtalk.analysis.{name}")
        assert isinstance(getattr(A, name), types.ModuleType), name


def test_submodule_names_are_modules_in_a_fresh_interpreter():
    # Import order decided which one won when a function shadowed its module: check the
    # package alone, before any submodule was imported by hand.
    code = ("import types, xtalk.analysis as A\n"
            "from xtalk.analysis import slowdown, periodicity, pwcet\n"
            "assert all(isinstance(m, types.ModuleType) for m in (slowdown, periodicity, pwcet))\n")
    subprocess.run([sys.executable, "-c", code], check=True)
