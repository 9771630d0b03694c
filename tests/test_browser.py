"""The report page in a real browser: headless Chromium loads ``report.html`` from a file URL.

Chromium is driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so no websocket library and
no network port is needed. One browser session checks that:

- the page loads and the DOM holds the headline and every problem's section;
- every figure is decoded (``naturalWidth > 0``) and its region of the screenshot is not blank;
- the console shows no error (``console.error``, an uncaught exception, a failed load);
- the page asks for nothing but ``file:`` and ``data:`` URLs, and holds no ``http``/``https``
  reference.

A control page with a blank figure, a console error and a missing file checks that each of
these checks can fail. Skipped, saying so, where no Chromium binary is found (``.ci/run``
installs Debian's ``chromium``).
"""

import base64
import contextlib
import fcntl
import io
import json
import os
import re
import select
import shutil
import subprocess
import time

import numpy as np
import pytest
from _report_pages import PROBLEMS, sample_meta, sample_records, sample_rows

from ksvd_bench.report import verdicts, write_report
from ksvd_bench.report.html import problem_id

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
CHROMIUM = os.environ.get("KSVD_BENCH_CHROMIUM") or next(
    (shutil.which(n) for n in _NAMES if shutil.which(n)), None
)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary found (looked for KSVD_BENCH_CHROMIUM, then "
    + ", ".join(_NAMES)
    + " on PATH); install Debian's chromium to run this test",
)

#: a page's DOM, figure boxes (document coordinates) and size, read inside the browser
_PROBE = """JSON.stringify({
  html: document.documentElement.outerHTML,
  width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
  verdicts: Array.from(document.querySelectorAll("#headline li.verdict"), li => li.textContent),
  problems: Array.from(document.querySelectorAll("section.problem"),
                       s => [s.id, s.dataset.problem, s.querySelectorAll("img").length]),
  images: Array.from(document.images).map(im => {
    const r = im.getBoundingClientRect();
    return {alt: im.alt, complete: im.complete, natural: im.naturalWidth,
            x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};
  })})"""


class Browser:
    """Headless Chromium driven over the DevTools pipe; one page target."""

    def __init__(self, binary, profile_dir, timeout=60.0):
        self.timeout = timeout
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # high descriptors, so dup2 onto 3 and 4 in the child clobbers neither
        hi_r, hi_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 20) for fd in (to_child_r, from_child_w))
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        # a file, not a pipe: Chromium logs a lot, and a full pipe would stall it
        self.log_path = os.path.join(profile_dir, "chromium.log")
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-quic",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--mute-audio",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile_dir}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            preexec_fn=child_fds,
            pass_fds=(3, 4),
        )
        os.close(hi_r)
        os.close(hi_w)
        self.out, self.inp = to_child_w, from_child_r
        self.buf, self.next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                with open(self.log_path, "rb") as f:
                    tail = f.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"Chromium closed the pipe; its log ends:\n{tail}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self.out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method):
        deadline = time.monotonic() + self.timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def load(self, url):
        """Open ``url``; returns (probe, screenshot as an RGB array, console errors, URLs)."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        probe = json.loads(
            self.call("Runtime.evaluate", session=True, expression=_PROBE, returnByValue=True)[
                "result"
            ]["value"]
        )
        shot = self.call(
            "Page.captureScreenshot",
            session=True,
            format="png",
            captureBeyondViewport=True,
            clip={
                "x": 0,
                "y": 0,
                "width": probe["width"],
                "height": min(probe["height"], 30000),
                "scale": 1,
            },
        )
        from PIL import Image

        image = np.asarray(Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB"))
        # drain what is already sent (console messages of the load)
        with contextlib.suppress(TimeoutError):
            self.call("Runtime.evaluate", session=True, expression="1")
        errors, urls = [], []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(
                    "console."
                    + p["type"]
                    + ": "
                    + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                errors.append("exception: " + p["exceptionDetails"].get("text", ""))
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                errors.append("log: " + p["entry"].get("text", ""))
            elif method == "Network.loadingFailed":
                errors.append("load failed: " + p.get("errorText", ""))
            elif method == "Network.requestWillBeSent":
                urls.append(p["request"]["url"])
        return probe, image, errors, urls

    def close(self):
        with contextlib.suppress(Exception):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        os.close(self.out)
        os.close(self.inp)


def _blank(image, box):
    """Whether the screenshot is blank inside ``box`` (one colour, or nearly)."""
    x0, y0 = int(round(box["x"])) + 2, int(round(box["y"])) + 2
    x1, y1 = x0 + int(box["w"]) - 4, y0 + int(box["h"]) - 4
    region = image[y0:y1, x0:x1].astype(float)
    if region.size == 0:
        return True
    background = np.median(region.reshape(-1, 3), axis=0)
    differs = np.abs(region - background).max(axis=2) > 40
    return region.std() < 8 or differs.mean() < 0.01


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = write_report(
        tmp_path_factory.mktemp("page"),
        rows=sample_rows(),
        meta=sample_meta(),
        records=sample_records(),
    )
    return path


def test_report_page_in_chromium(browser, report):
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"https?:", text, re.IGNORECASE)
    probe, image, errors, urls = browser.load(report.as_uri())
    assert errors == []
    assert all(u.startswith(("file:", "data:")) for u in urls), urls
    dom = probe["html"]
    assert not re.search(r"https?:", dom, re.IGNORECASE)
    assert probe["verdicts"] == [v["sentence"] for v in verdicts(sample_rows())]
    # every problem has its section, with a figure per measure
    assert probe["problems"] == [[problem_id(p), p, 2] for p in PROBLEMS]
    assert dom.index('id="headline"') < dom.index('class="problem"')
    assert 'id="profiles"' in dom and 'id="failures"' in dom and 'id="record"' in dom
    images = probe["images"]
    assert len(images) == 5
    assert image.shape[0] >= min(probe["height"], 30000) - 1
    for box in images:
        assert box["complete"] and box["natural"] > 0, box["alt"]
        assert box["w"] > 300 and box["h"] > 150, box
        assert not _blank(image, box), f"figure {box['alt']!r} is blank in the screenshot"


def test_the_checks_can_fail(browser, tmp_path):
    """A blank figure, a console error and a missing file are all caught."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (400, 200), "white").save(buf, format="png")
    blank = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    page = tmp_path / "control.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><link rel='icon' href='data:,'></head><body>"
        f"<img src='{blank}' alt='blank'><img src='missing.png' alt='gone'>"
        "<script>console.error('boom')</script></body></html>"
    )
    probe, image, errors, urls = browser.load(page.as_uri())
    assert any("boom" in e for e in errors)
    assert any(e.startswith("load failed") for e in errors)
    boxes = {b["alt"]: b for b in probe["images"]}
    assert boxes["gone"]["natural"] == 0
    assert _blank(image, boxes["blank"])
    assert any(u.endswith("missing.png") for u in urls)
