"""Peer tools the benchmarks compare against, installed from Debian's packages when missing."""

import shutil
import subprocess
import sys


def ensure(program: str, package: str) -> str:
    """The path of `program`; installs `package` with apt-get (and says so) when it is missing."""
    found = shutil.which(program)
    if found:
        return found
    print(f"bench: {program} is missing; installing {package} (apt-get install -y {package})", flush=True)
    r = subprocess.run(["apt-get", "install", "-y", package], capture_output=True, text=True)
    found = shutil.which(program)
    if not found:
        sys.exit(f"bench: could not install {package} (apt-get exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return found
