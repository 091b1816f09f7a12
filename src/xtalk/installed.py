"""Where the files a user's build needs were installed: the probe header, the preload library
(syscall probes), the pkg-config file and the examples. `pip install .` puts them in the
package under `_data/`; an editable install (`make setup`) links `_data/include` and
`_data/examples` to the checkout (setup.py). `xtalk probe` and `xtalk examples` print them.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError

DATA = Path(__file__).resolve().parent / "_data"


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise UsageError(f"{what} is not installed ({path} missing): install xtalk with `pip install .` "
                         "or run `make setup` in the checkout")
    return path


def include_dir() -> Path:
    """The directory to add to the compiler's include path (`#include <xtalk/probe.h>`)."""
    return _need(DATA / "include" / "xtalk" / "probe.h", "the probe header").parents[1]


def preload_library() -> Path:
    """The syscall-probe library, for a command victim's `preload`."""
    return _need(DATA / "lib" / "libxtalk_preload.so", "the preload library")


def pkgconfig_dir() -> Path:
    """The directory holding xtalk-probe.pc, for PKG_CONFIG_PATH."""
    return _need(DATA / "pkgconfig" / "xtalk-probe.pc", "the pkg-config file").parent


def examples_dir() -> Path:
    """The examples (experiment files, instrumented programs) shipped with xtalk."""
    return _need(DATA / "examples", "the examples")


def cflags() -> str:
    """Compiler flags for a program that includes <xtalk/probe.h>."""
    return f"-I{include_dir()} -pthread"


def libs() -> str:
    """Linker flags for it (the header needs only threads: pthread_atfork)."""
    return "-pthread"
