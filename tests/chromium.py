"""Headless Chromium for the report tests: find or install it, load a page, read what the
page's console said, check its figures, take a screenshot.

A minimal DevTools-protocol client over ``--remote-debugging-pipe`` (fd 3: commands in,
fd 4: replies and events out, NUL-separated JSON), standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome-headless-shell")


def find() -> str | None:
    for n in NAMES:
        p = shutil.which(n)
        if p:
            return p
    return None


def ensure() -> tuple[str | None, str]:
    """(path to Chromium, '') or (None, why it cannot be had). Installs the distribution's
    package with apt-get when running as root on a machine that has apt-get."""
    p = find()
    if p:
        return p, ""
    if os.geteuid() != 0:
        return None, "Chromium is not installed and installing it needs root (apt-get install chromium)"
    if not shutil.which("apt-get"):
        return None, "Chromium is not installed and this machine has no apt-get to install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], capture_output=True,
                           text=True, timeout=900, env=env)
        if r.returncode != 0:  # stale package lists: refresh once, then retry
            subprocess.run(["apt-get", "update"], capture_output=True, timeout=300, env=env)
            r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], capture_output=True,
                               text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"installing Chromium failed: {e}"
    p = find()
    return (p, "") if p else (None, f"apt-get install chromium failed: {r.stderr.strip().splitlines()[-1:]}")


class Browser:
    """One headless Chromium process driven over the DevTools pipe."""

    def __init__(self, exe: str, width: int = 1280, height: int = 1800):
        self._cmd_r, self._cmd_w = os.pipe()
        self._res_r, self._res_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="xtalk-chromium-")
        cmd_r, res_w = self._cmd_r, self._res_w
        log = open(Path(self._profile) / "stderr.log", "wb")  # Chromium is chatty (dbus); kept for failures

        def wire():  # in the child: the pipe ends on the descriptors Chromium expects
            a, b = os.dup(cmd_r), os.dup(res_w)  # out of the way first: either may be 3 or 4
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe", "--no-first-run",
             "--disable-extensions", "--disable-dev-shm-usage", f"--window-size={width},{height}",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=wire,
            close_fds=False)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        self.width, self.height = width, height

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30.0) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def open(self, url: str, timeout: float = 60.0) -> str:
        """Navigate a fresh tab to ``url``, wait for its load event; returns the session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=s)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                        "deviceScaleFactor": 1, "mobile": False}, session=s)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=s)
        self.wait_event("Page.loadEventFired", timeout)
        return s

    def evaluate(self, session: str, expression: str):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session=session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate: {r['exceptionDetails']}")
        return r["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (failed loads) so far."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m.get("method") == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"exception: {d.get('text', '')} {d.get('exception', {}).get('description', '')}".strip())
            elif m.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def screenshot(self, session: str, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone; kill it below
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._cmd_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: Evaluated in the page: every figure and whether it rendered.
FIGURE_CHECK = """
(() => {
  const imgs = Array.from(document.querySelectorAll('img')).map(i => ({
    alt: i.alt, ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, h: i.naturalHeight}));
  const svgs = Array.from(document.querySelectorAll('svg')).map(s => {
    const r = s.getBoundingClientRect(); return {ok: r.width > 0 && r.height > 0}; });
  return {imgs, svgs, figures: document.querySelectorAll('figure').length,
          status: document.body.getAttribute('data-figures-ok'),
          sections: Array.from(document.querySelectorAll('section h2')).map(h => h.textContent)};
})()
"""
