#!/usr/bin/python3
"""The report in a real browser: tiny copy, induction, text and modular runs, each report opened
from a file:// URL in one headless Chromium, driven over the DevTools protocol (a pipe, Python's
standard library alone). Each page runs its self-check (#selfcheck: every section drawn, no chart
empty, no JavaScript error, a token hover recolours the attention view) and the test reads the
result, the page's DOM and its open time, then keeps a screenshot of the page (and one of its
attention view) in SCREENSHOT_DIR. A page of the Python package's notebook views (gradlab.vis,
when built beside GRADLAB) must draw each view without a JavaScript error. The run directory's name and the text prompt are hostile
strings that must reach the page as text, never as markup.

    report_browser_test.py GRADLAB SCREENSHOT_DIR

Exits 77 (CTest's skip) with "skipped" when no Chromium is installed (scripts/bootstrap.sh
installs it; CI has it)."""

import base64
import fcntl
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

BROWSERS = ["chromium-headless-shell", "chromium"]
HOSTILE_RUN = "copy <!--<script>\"'&\u2028"
HOSTILE_PROMPT = "</script><!--\""
# The sections every page must draw; a modular run adds its Fourier section.
DRAWN = ["model_card", "curves", "attention", "head_scores", "ablation", "logit_lens", "dla"]
WIDTH = 1200


def browser():
    for name in BROWSERS:
        found = shutil.which(name)
        if not found and os.path.exists(f"/usr/lib/chromium/{name}"):
            found = f"/usr/lib/chromium/{name}"
        if found:
            return found
    return None


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(args)}\n{result.stderr}")
    return result.stdout


def at_fds_3_and_4(reads, writes):
    """In the child: the pipe ends at fds 3 and 4, where --remote-debugging-pipe looks, moved
    above 10 first so that neither overwrites the other; only they (and stdio) outlive exec."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (reads, writes)]
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)
    for fd in high:
        os.close(fd)


class DevTools:
    """One headless Chromium and one page of it, over --remote-debugging-pipe: the browser reads
    NUL-terminated JSON commands on its fd 3 and writes replies and events on its fd 4."""

    def __init__(self, path):
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # No session bus here: without it, Chromium waits for one at every start. One renderer
        # for every page and no background fetches: 0.5 CPU-s less over the test.
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:")
        self.process = subprocess.Popen(
            [path, "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update",
             "--disable-site-isolation-trials", "--renderer-process-limit=1",
             f"--window-size={WIDTH},900", "about:blank"],
            close_fds=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: at_fds_3_and_4(to_browser, from_browser))
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def _message(self, deadline):
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        text, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(text)

    def call(self, method, session=False, timeout=60, **params):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == event:
                    return self.events.pop(i)
            self.events.append(self._message(deadline))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", session=True, expression=expression,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def screenshot(self, path, clip):
        data = self.call("Page.captureScreenshot", session=True, format="png",
                         captureBeyondViewport=True, clip=dict(clip, scale=1))["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)


def check_page(tools, name, page, shots, failures):
    size = os.path.getsize(page)
    tools.open(f"file://{page}#selfcheck")
    text = tools.evaluate("(document.getElementById('gradlab-selfcheck') || {}).textContent")
    if not text:
        failures.append(f"{name}: no self-check result in the page (the script did not run)")
        return
    check = json.loads(text)
    print(f"{name}: {size / 1e6:.2f} MB, open in {check['opened_ms']} ms (drawn in "
          f"{check['render_ms']} ms); sections {check['drawn']}, missing {check['missing']}")
    if not check["ok"]:
        failures.append(f"{name}: {check['problems']}")
    for section in DRAWN + (["fourier"] if name == "modular" else []):
        if section not in check["drawn"]:
            failures.append(f"{name}: section {section} not drawn")
    dom = tools.evaluate("document.documentElement.outerHTML")
    # The hostile strings are text in the page: escaped in the DOM, never elements.
    if name == "copy" and "copy &lt;!--&lt;script&gt;\"'&amp;" not in dom:
        failures.append(f"{name}: the run's name is not shown as text")
    if name == "text" and ">&lt;</span>" not in dom:
        failures.append(f"{name}: the prompt's tokens are not shown as text")
    if dom.count("<script") != 2:
        failures.append(f"{name}: {dom.count('<script')} script elements, not 2")
    # The page as drawn, the self-check's hover on the attention view included.
    height = tools.evaluate("document.documentElement.scrollHeight")
    tools.screenshot(os.path.join(shots, f"{name}.png"),
                     {"x": 0, "y": 0, "width": WIDTH, "height": min(height, 6000)})
    box = tools.evaluate("(() => { const r = document.getElementById('section-attention')"
                         ".getBoundingClientRect(); return {x: r.x, y: r.y + scrollY, "
                         "width: r.width, height: r.height}; })()")
    tools.screenshot(os.path.join(shots, f"{name}-attention.png"), box)


def notebook_page(gradlab, run_dir, scratch):
    """A page of the three notebook views of the build's Python package (gradlab.vis), each
    inlining the bundle, as a notebook shows them; None when the package is not built."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(gradlab)), "python"))
    try:
        vis = importlib.import_module("gradlab.vis")
    except ImportError:
        return None
    tokens = ["<s>", HOSTILE_PROMPT, "a", "b"]
    pattern = [[[1.0 if k == q else 0.0 for k in range(4)] for q in range(4)]] * 2
    views = [vis.attention(tokens, pattern), vis.heatmap([[1, -2], [0.5, 3]], ["x0", "x1"],
                                                         ["y0", HOSTILE_PROMPT], title="t"),
             vis.curves(run_dir)]
    page = os.path.join(scratch, "notebook.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write("<!DOCTYPE html><html><head><meta charset='utf-8'><script>window.viewErrors = [];"
                "addEventListener('error', (e) => viewErrors.push(String(e.message)));</script>"
                "</head><body>" + "".join(v._repr_html_() for v in views) + "</body></html>")
    return page


def check_notebook(tools, page, failures):
    tools.open(f"file://{page}")
    check = tools.evaluate("({errors: viewErrors, views: [...document.querySelectorAll("
                           "'.gradlab')].map((v) => [...v.querySelectorAll('canvas')]"
                           ".filter((c) => c.width > 0).length), tokens: [...document."
                           "querySelectorAll('.gradlab .token')].map((t) => t.textContent)})")
    print(f"notebook views: charts per view {check['views']}, errors {check['errors']}")
    if check["errors"] or len(check["views"]) != 3 or 0 in check["views"]:
        failures.append(f"notebook views: {check}")
    if HOSTILE_PROMPT not in check["tokens"]:
        failures.append("notebook views: the hostile token is not shown as text")


def main():
    gradlab, shots = sys.argv[1], sys.argv[2]
    path = browser()
    if not path:
        print("skipped: no chromium-headless-shell or chromium (scripts/bootstrap.sh installs it)")
        return 77
    os.makedirs(shots, exist_ok=True)
    tiny = ["--steps", "4", "--eval-every", "2", "--d-model", "16", "--d-ff", "32",
            "--batch-size", "8", "--threads", "1"]
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        text = os.path.join(scratch, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(("The quick brown fox </script><!-- \"quotes\" & 'apostrophes' jumps over "
                     "the lazy dog.\n") * 6)
        runs = {
            "copy": (HOSTILE_RUN, ["--eval-size", "8"], []),
            "induction": ("induction", ["--task", "induction", "--eval-size", "8"], []),
            "text": ("text", ["--task", "text", "--data", text, "--context", "16", "--eval-size",
                              "4"], ["--prompt", HOSTILE_PROMPT]),
            "modular": ("modular", ["--task", "modular", "--modulus", "23", "--eval-size", "8"],
                        []),
        }
        pages = {}
        for name, (directory, flags, report_flags) in runs.items():
            run_dir = os.path.join(scratch, directory)
            run(gradlab, "train", "--out", run_dir, *tiny, *flags)
            run(gradlab, "report", run_dir, *report_flags)
            pages[name] = os.path.join(run_dir, "report.html")
        tools = DevTools(path)
        try:
            for name, page in pages.items():
                check_page(tools, name, page, shots, failures)
            notebook = notebook_page(gradlab, os.path.join(scratch, "induction"), scratch)
            if notebook:
                check_notebook(tools, notebook, failures)
        finally:
            tools.close()
    cpu = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))
    print(f"CPU time of the test (gradlab, Chromium and this script): {cpu:.1f} s")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
