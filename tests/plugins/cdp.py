"""Just enough of the Chrome DevTools Protocol to drive Debian's headless Chromium from a test:
start it, open a page, evaluate JavaScript, type, wait, take screenshots. Uses the ``websockets``
package that Airflow already depends on, so the browser test needs no driver download."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-allow-origins=*",
         # offline, as most deployments are: no host but loopback resolves, so a page that needs a CDN shows it
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with a fresh profile, and one page in it."""

    def __init__(self, binary: str, profile: Path, log: Path, *, width: int = 1440, height: int = 1000):
        profile.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start (exit {self.proc.returncode}); see {log}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        base = f"http://127.0.0.1:{port}"
        pages = json.loads(urllib.request.urlopen(f"{base}/json/list", timeout=10).read())
        page = next(p for p in pages if p.get("type") == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=10)
        self._ids = itertools.count(1)
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def send(self, method: str, timeout: float = 30, **params):
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def wait_for(self, expression: str, what: str, timeout: float = 60):
        """Poll ``expression`` until it is truthy; its value is returned."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.evaluate(expression)
            except RuntimeError as exc:  # the page is navigating (no document.body yet): not an answer
                last = f"error: {exc}"
                time.sleep(0.25)
                continue
            if last:
                return last
            time.sleep(0.25)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value {last!r}); "
                             f"page at {self.evaluate('location.href')}")

    def type_into(self, selector: str, text: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", text=text)

    MODIFIERS = {"alt": 1, "ctrl": 2, "meta": 4, "shift": 8}

    def click(self, x: float, y: float, *, button: str = "left", modifiers: tuple[str, ...] = ()) -> None:
        """A real mouse click at page coordinates (CSS pixels of the top window): the pointer moves
        there, the button goes down and up. Unlike ``element.click()`` in a script, the browser
        treats it as a person's click (user activation, sandbox rules, modifier keys, auxclick)."""
        mods = sum(self.MODIFIERS[m] for m in modifiers)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y, modifiers=mods)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button=button, buttons=0 if kind == "mouseReleased" else
                      {"left": 1, "right": 2, "middle": 4}[button], clickCount=1, modifiers=mods)

    def center_of(self, selector: str, *, frame: str | None = None) -> tuple[float, float]:
        """The middle of the first element ``selector`` matches, in top-window coordinates, scrolled
        into view first; with ``frame`` (a selector of an iframe in the top document) the element
        is looked up in that frame's document and its box is offset by the frame's."""
        doc = f"document.querySelector({json.dumps(frame)}).contentDocument" if frame else "document"
        offset = (f"(() => {{ const f = document.querySelector({json.dumps(frame)}), r = f.getBoundingClientRect();"
                  f" return [r.left + f.clientLeft, r.top + f.clientTop]; }})()") if frame else "[0, 0]"
        box = self.evaluate(f"""(() => {{ const e = {doc}.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center', inline: 'center'}});
            const r = e.getClientRects()[0] || e.getBoundingClientRect(); const [fx, fy] = {offset};
            return [fx + r.left + r.width / 2, fy + r.top + r.height / 2]; }})()""")
        if box is None:
            raise AssertionError(f"no element {selector!r} to click" + (f" in {frame}" if frame else ""))
        return box[0], box[1]

    def targets(self) -> list[dict]:
        """Every page (tab) the browser has open."""
        return [t for t in self.send("Target.getTargets")["targetInfos"] if t.get("type") == "page"]

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            stop_group(self.proc)
            self._log.close()


def stop_group(proc: subprocess.Popen, timeout: float = 20) -> None:
    """End a process started with ``start_new_session=True`` and every child it started."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # children that outlived their parent
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
