"""The cluster dashboard's time to first chart in Chromium, for one or two checkouts at once.

Each checkout gets a scratch SQLite database (the demo scenario and 24 hours of per-minute
usage samples, as bench/dashboard.py seeds them) and its own `manage.py serve --no-traffic`.
One headless Chromium then loads /dashboard/ as admin, alternating between the servers, so
both see the same machine load. Per load it reads Navigation Timing (response end, DOM
content loaded, load event) and the moment the first plotly chart had drawn: a
MutationObserver injected before the page's own scripts notes when the first trace is in
the DOM and takes the next animation frame's time, so the figure needs nothing from the code
under test. "cold" loads use a fresh browser context (empty cache); "warm" loads reuse one.

    .venv/bin/python bench/first_chart.py [--loads 15] [--before ../main-checkout]

Prints medians per checkout and the ratio before / after.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import isolated, isolated_code  # noqa: E402

CHROMIUM = "/usr/bin/chromium"

SEED = """
import sys
sys.path.insert(0, '.')
from bench.dashboard import setup, seed
setup(sys.argv[1])
print(seed(0))
"""

# Before any of the page's scripts: note when the first plotly trace is drawn.
OBSERVE = """
(() => {
  const seen = () => document.querySelector('.js-plotly-plot .main-svg .trace');
  const observer = new MutationObserver(() => {
    if (window.__firstChart || !seen()) return;
    window.__firstChart = -1;
    observer.disconnect();
    requestAnimationFrame(() => { window.__firstChart = performance.now(); });
  });
  observer.observe(document, { childList: true, subtree: true });
})();
"""

READ = """
() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {
    first_chart: window.__firstChart,
    response_end: nav.responseEnd,
    dom_content_loaded: nav.domContentLoadedEventEnd,
    load: nav.loadEventEnd,
  };
}
"""


def free_port() -> int:
    """A port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One checkout's console on a scratch database."""

    def __init__(self, checkout: Path, label: str) -> None:
        self.checkout = checkout
        self.label = label
        self.dir = tempfile.mkdtemp(prefix=f"first-chart-{label}-")
        self.port = free_port()
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "console.settings.local",
            "SQLITE_PATH": str(Path(self.dir) / "db.sqlite3"),
            "TIDEPOOL_PURE_CORE": "1",
        }
        self.env.pop("TIDEPOOL_DEBUG", None)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where it answers."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Seed, serve, and wait until the login page answers."""
        subprocess.run(
            isolated_code(SEED, self.env["SQLITE_PATH"]),
            cwd=self.checkout,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        command = isolated("manage.py", "serve", "--port", str(self.port), "--no-traffic")
        self.process = subprocess.Popen(
            command, cwd=self.checkout, env=self.env, stdout=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/login/", timeout=2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        """End the server this script started."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def login(browser: Any, server: Server) -> Any:
    """A storage state signed in as admin on that server."""
    from console.demo import PASSWORDS

    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORDS["admin"])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    state = context.storage_state()
    context.close()
    return state


def load(context: Any, server: Server) -> dict[str, float]:
    """One load of the dashboard; its timings in ms from navigation start."""
    page = context.new_page()
    page.add_init_script(OBSERVE)
    page.goto(f"{server.url}/dashboard/")
    page.wait_for_function("window.__firstChart > 0", timeout=30_000)
    timings: dict[str, float] = page.evaluate(READ)
    page.close()
    return timings


def main() -> None:
    """Serve each checkout, load its dashboard N times each way, print medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=15)
    parser.add_argument("--before", type=Path, help="another checkout (e.g. of main)")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")
    import django

    django.setup()  # for the demo's passwords
    servers = [Server(REPO, "after")]
    if args.before:
        servers.insert(0, Server(args.before.resolve(), "before"))
    from playwright.sync_api import sync_playwright

    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    try:
        for server in servers:
            server.start()
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            states = {s.label: login(browser, s) for s in servers}
            warm = {s.label: browser.new_context(storage_state=states[s.label]) for s in servers}
            for s in servers:
                load(warm[s.label], s)  # fill the warm context's cache
                results[s.label] = {"cold": [], "warm": []}
            for _ in range(args.loads):
                for s in servers:
                    cold = browser.new_context(storage_state=states[s.label])
                    results[s.label]["cold"].append(load(cold, s))
                    cold.close()
                    results[s.label]["warm"].append(load(warm[s.label], s))
            browser.close()
    finally:
        for server in servers:
            server.stop()

    summary: dict[str, Any] = {"loads": args.loads}
    for label, ways in results.items():
        summary[label] = {
            way: {key: round(statistics.median(r[key] for r in runs)) for key in runs[0]}
            for way, runs in ways.items()
        }
    if "before" in summary:
        before, after = summary["before"], summary["after"]
        summary["ratio_before_over_after"] = {
            way: round(before[way]["first_chart"] / after[way]["first_chart"], 2)
            for way in ("cold", "warm")
        }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
