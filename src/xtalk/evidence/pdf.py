"""index.pdf: index.html printed by headless Chromium. Chromium writes into a private
temporary directory of ours; the bytes then go into the bundle through safepath."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str | None:
    """The headless browser's path, or None."""
    return next((p for p in map(shutil.which, NAMES) if p), None)


def print_pdf(html_file: Path, timeout: float = 120) -> tuple[bytes | None, str]:
    """(the PDF's bytes, "") or (None, why not, in one line)."""
    exe = browser()
    if exe is None:
        return None, "no PDF: Chromium is not installed (apt-get install chromium); index.html is the evidence"
    with tempfile.TemporaryDirectory(prefix="xtalk-evidence-pdf-") as tmp:  # mode 0700
        out = Path(tmp) / "index.pdf"
        cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
               "--disable-dev-shm-usage", f"--user-data-dir={tmp}/profile", "--no-pdf-header-footer",
               f"--print-to-pdf={out}", html_file.resolve().as_uri()]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, f"no PDF: {exe} did not finish in {timeout:.0f} s"
        if not out.is_file() or out.stat().st_size == 0:
            tail = (r.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"no PDF: {exe} exited {r.returncode}: {tail}"
        return out.read_bytes(), ""
