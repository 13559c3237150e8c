#!/usr/bin/python3
"""The report in a real browser: tiny copy, induction, text and modular runs, each report opened
in headless Chromium from a file:// URL with the page's self-check (#selfcheck: every section
drawn, no chart empty, no JavaScript error, a token hover recolours the attention view), and a
screenshot of each kept in SCREENSHOT_DIR. The run directory's name and the text prompt are
hostile strings that must reach the page as text, never as markup.

    report_browser_test.py GRADLAB SCREENSHOT_DIR

Exits 77 (CTest's skip) with "skipped" when no Chromium is installed (scripts/bootstrap.sh
installs it; CI has it)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BROWSERS = ["chromium-headless-shell", "chromium"]
HOSTILE_RUN = "copy <!--<script>\"'&\u2028"
HOSTILE_PROMPT = "</script><!--\""


def browser():
    for name in BROWSERS:
        path = shutil.which(name) or (f"/usr/lib/chromium/{name}" if os.path.exists(f"/usr/lib/chromium/{name}") else None)
        if path:
            return path
    return None


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(args)}\n{result.stderr}")
    return result.stdout


def chromium(path, *args):
    # No session bus here: without this, Chromium waits for one at every start.
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:")
    return subprocess.run([path, "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=60, env=env).stdout


def main():
    gradlab, shots = sys.argv[1], sys.argv[2]
    path = browser()
    if not path:
        print("skipped: no chromium-headless-shell or chromium (scripts/bootstrap.sh installs it)")
        return 77
    os.makedirs(shots, exist_ok=True)
    tiny = ["--steps", "10", "--eval-every", "5", "--d-model", "32", "--threads", "1"]
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        text = os.path.join(scratch, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(("The quick brown fox </script><!-- \"quotes\" & 'apostrophes' jumps over "
                     "the lazy dog.\n") * 6)
        runs = {
            "copy": (HOSTILE_RUN, ["--eval-size", "32"], []),
            "induction": ("induction", ["--task", "induction", "--eval-size", "32"], []),
            "text": ("text", ["--task", "text", "--data", text, "--context", "16", "--eval-size",
                              "4", "--batch-size", "8"], ["--prompt", HOSTILE_PROMPT]),
            "modular": ("modular", ["--task", "modular", "--modulus", "23"], []),
        }
        for name, (directory, flags, report_flags) in runs.items():
            run_dir = os.path.join(scratch, directory)
            run(gradlab, "train", "--out", run_dir, *tiny, *flags)
            run(gradlab, "report", run_dir, *report_flags)
            page = os.path.join(run_dir, "report.html")
            size = os.path.getsize(page)
            started = time.monotonic()
            dom = chromium(path, "--dump-dom", f"file://{page}#selfcheck")
            seconds = time.monotonic() - started
            found = re.search(r'<pre id="gradlab-selfcheck">(.*?)</pre>', dom)
            if not found:
                failures.append(f"{name}: no self-check result in the page (the script did not run)")
                continue
            check = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
            print(f"{name}: {size / 1e6:.2f} MB, drawn in {check['render_ms']} ms, browser "
                  f"{seconds:.1f} s; sections {check['drawn']}, missing {check['missing']}")
            if not check["ok"]:
                failures.append(f"{name}: {check['problems']}")
            for section in ["model_card", "curves", "attention", "head_scores", "ablation",
                            "logit_lens", "dla"]:
                if section not in check["drawn"]:
                    failures.append(f"{name}: section {section} not drawn")
            # The hostile strings are text in the page: escaped in the DOM, never elements.
            if name == "copy" and "copy &lt;!--&lt;script&gt;\"'&amp;" not in dom:
                failures.append(f"{name}: the run's name is not shown as text")
            if name == "text" and ">&lt;</span>" not in dom:
                failures.append(f"{name}: the prompt's tokens are not shown as text")
            if dom.count("<script") != 2:
                failures.append(f"{name}: {dom.count('<script')} script elements, not 2")
            chromium(path, "--virtual-time-budget=3000", "--window-size=1200,2400", f"--screenshot={os.path.join(shots, name + '.png')}",
                     f"file://{page}")
            if not os.path.exists(os.path.join(shots, name + ".png")):
                failures.append(f"{name}: no screenshot")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
