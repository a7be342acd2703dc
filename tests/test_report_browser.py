"""Every report kind opened in a real browser: headless Chromium (Debian's ``chromium``, which
``.ci/run`` installs when it is missing) loads each plan report (dense, structured,
projection, local) and each results report (dense with a ledger, structured, projection,
local) from disk, offline, and the test fails on any console error, uncaught exception or
failed load, on any image the browser could not decode, and unless the results report has
exactly one panel per table, in the release's order, and every answer in the document.

The browser is driven over the Chrome DevTools Protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), with the standard library
only. Skipped, saying so, where no Chromium is installed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from factorize.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run installs "
                             "it): the reports are not checked in a browser here")

SCHEMA = {"format": "factorize-domain-schema", "version": 1, "description": "test people",
          "attributes": [{"name": "age", "kind": "integer", "min": 17, "max": 29},
                         {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
                         {"name": "race", "kind": "categorical", "values": ["White", "Black", "Other"]}]}
WORKLOAD = ('vstack(marginals[age,sex,race]:2,kron(prefix[age],identity[sex],total[race]),'
            'table("race by sex",kron(total[age],identity[sex],identity[race])))')
#: What the page reports about itself once loaded (evaluated in the page by the test).
PROBE = """JSON.stringify({
  images: document.images.length,
  broken: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length,
  panels: Array.from(document.querySelectorAll('figure.panel')).map(f => f.dataset.table),
  panelImages: Array.from(document.querySelectorAll('figure.panel img')).filter(i => i.naturalWidth > 0).length,
  answerRows: Array.from(document.querySelectorAll('details table tr')).length
    - document.querySelectorAll('details table').length,
  title: document.title})"""


class Chromium:
    """Headless Chromium driven over the DevTools Protocol on a pipe (module docstring)."""

    def __init__(self, profile: Path) -> None:
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # the protocol's descriptors 3 and 4 (bash: dash's redirections take one digit only)
        shell = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}'
        self.proc = subprocess.Popen(
            ["bash", "-c", shell, str(CHROMIUM), "--headless", "--remote-debugging-pipe",
             "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-quic",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser, from_browser), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        """Send a command and return its result (events that arrive meanwhile are kept)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._write, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._message(timeout)
            if m.get("id") == self._next:
                assert "error" not in m, f"{method}: {m['error']}"
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> None:
        """Until the event ``method`` of ``session`` has arrived."""
        end = time.monotonic() + timeout
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._message(end - time.monotonic()))

    def _message(self, timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = end - time.monotonic()
            ready, _, _ = select.select([self._read], [], [], max(left, 0.0))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def open(self, path: Path, screenshot: bool = False) -> tuple[dict[str, Any], list[str]]:
        """Load ``path`` in a new tab: (what :data:`PROBE` reports — with ``screenshot``, also
        the page's pixels, ``"pixels"`` —, every console error, exception and failed load logged
        while it loaded)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.events = [e for e in self.events if e.get("sessionId") != session]
        self.send("Page.navigate", {"url": path.as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", session)
        probe = json.loads(self.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                     session=session)["result"]["value"])
        if screenshot:
            import matplotlib.image

            shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                             session=session)["data"]
            probe["pixels"] = matplotlib.image.imread(io.BytesIO(base64.b64decode(shot)), format="png")
        errors = []
        for e in self.events:
            if e.get("sessionId") != session:
                continue
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                errors.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(f"console.{p['type']}: {p.get('args')}")
            elif e.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        self.send("Target.closeTarget", {"targetId": target})
        return probe, errors

    def close(self) -> None:
        with contextlib.suppress(TimeoutError, RuntimeError, OSError):
            self.send("Browser.close", timeout=10.0)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._write)
        os.close(self._read)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plans of every kind and their releases, made by the command line as a user makes them:
    a dense and a structured plan of named tables over a schema (a CDF by sex, a named table)
    — the dense one released for real and charged to a ledger —, a projection plan over codes,
    a local plan with simulated messages."""
    d = tmp_path_factory.mktemp("reports")
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    rng = np.random.default_rng(0)
    sexes, races = SCHEMA["attributes"][1]["values"], SCHEMA["attributes"][2]["values"]
    (d / "people.csv").write_text("age,sex,race\n" + "".join(
        f"{rng.integers(17, 30)},{sexes[rng.integers(2)]},{races[rng.integers(3)]}\n" for _ in range(400)))
    (d / "bits.csv").write_text("a,b,c,d\n" + "".join(
        ",".join(str(x) for x in rng.integers(0, 2, 4)) + "\n" for _ in range(300)))
    s = str(d)
    for args in (
        ["plan", "--workload", WORKLOAD, "--domain", f"{s}/schema.json", "--privacy", "rho=0.5",
         "--strategy", "dense", "--out", f"{s}/dense.plan"],
        ["plan", "--workload", WORKLOAD, "--domain", f"{s}/schema.json", "--privacy", "rho=0.5",
         "--strategy", "union", "--out", f"{s}/structured.plan"],
        ["plan", "--workload", "marginals:2x2x2x2:2", "--domain", "a=2,b=2,c=2,d=2", "--privacy",
         "epsilon=1,delta=1e-6", "--mechanism", "covariance", "--neighbouring", "replace",
         "--public-n", "300", "--out", f"{s}/projection.plan"],
        ["local", "plan", "--workload", "marginals[sex,race]:2", "--domain", f"{s}/schema.json",
         "--attributes", "sex,race", "--privacy", "epsilon=1", "--n", "400", "--out", f"{s}/local.lplan"],
        ["budget", "create", f"{s}/L.db", "--new", "--dataset", "people", "--budget", "rho=2"],
        ["run", f"{s}/dense.plan", "--data", f"{s}/people.csv", "--out", f"{s}/dense.csv",
         "--ledger", f"{s}/L.db", "--dataset", "people"],
        ["run", f"{s}/structured.plan", "--data", f"{s}/people.csv", "--out", f"{s}/structured.parquet",
         "--seed", "1"],
        ["run", f"{s}/projection.plan", "--data", f"{s}/bits.csv", "--out", f"{s}/projection.json",
         "--seed", "2"],
        ["local", "simulate", f"{s}/local.lplan", "--data", f"{s}/people.csv", "--ignore-extra-columns",
         "--out", f"{s}/messages.parquet", "--seed", "3"],
        ["local", "aggregate", f"{s}/local.lplan", "--messages", f"{s}/messages.parquet",
         "--out", f"{s}/local.csv"],
    ):
        assert main(args) == 0, args
    return d


def test_every_plan_report_loads_cleanly_in_chromium(browser: Chromium, folder: Path) -> None:
    for plan in ("dense.plan", "structured.plan", "projection.plan", "local.lplan"):
        out = folder / f"{plan.split('.')[0]}_plan.html"
        assert main(["report", str(folder / plan), "--out", str(out), "--no-baselines"]) == 0
        probe, errors = browser.open(out)
        assert errors == [], (plan, errors)
        assert probe["images"] >= 1 and probe["broken"] == 0, (plan, probe)
        assert probe["title"].startswith("Mechanism plan:")


def test_every_results_report_has_one_panel_per_table_in_chromium(browser: Chromium,
                                                                 folder: Path) -> None:
    from factorize.executor.output import read_answers
    from factorize.report.render import write_report
    from factorize.report.results_report import results_report

    for answers, ledger in (("dense.csv", "L.db"), ("structured.parquet", None),
                            ("projection.json", None), ("local.csv", None)):
        path = folder / answers
        out = folder / f"{path.stem}_results.html"
        write_report(results_report(path, ledger=folder / ledger if ledger else None), out)
        probe, errors = browser.open(out, screenshot=ledger is not None)
        assert errors == [], (answers, errors)
        if ledger is not None:  # drawn, not blank: a good share of the page is not white
            pixels = probe.pop("pixels")
            assert pixels.shape[0] > 2000 and np.mean(np.any(pixels[..., :3] < 0.9, axis=-1)) > 0.02
        assert probe["images"] >= 1 and probe["broken"] == 0, (answers, probe)
        cols, _ = read_answers(path)
        tables = list(dict.fromkeys(str(t) for t in cols["table"]))
        assert probe["panels"] == tables, answers  # one panel per table, in order
        assert probe["panelImages"] == len(tables)
        assert probe["answerRows"] == cols["estimate"].size  # every answer in the document
