"""Open an HTML report in headless Chromium (Debian package `chromium`) and read back the rendered table."""
from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (tools/setup.sh: apt-get install chromium)")
    return found


def dump_dom(html: Path) -> str:
    """The DOM after Chromium parsed and laid out the page (--dump-dom), as text."""
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={html.parent / '.chromium-profile'}", "--dump-dom",
                           Path(html).resolve().as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "<table" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


class _Table(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def rendered_table_rows(html: Path, header: bool = False) -> list[list[str]]:
    """Cell texts of the report table's rows as Chromium built them (header row left out unless asked)."""
    table = _Table()
    table.feed(dump_dom(Path(html)))
    rows = [r for r in table.rows if r]
    return rows if header else rows[1:]


VIEWPORT = (1280, 800)

_LAYOUT_SCRIPT = """<script>
(function () {
  var out = {viewport: [window.innerWidth, window.innerHeight]};
  var wanted = %s;
  Object.keys(wanted).forEach(function (key) {
    out[key] = Array.prototype.map.call(document.querySelectorAll(wanted[key]), function (e) {
      var r = e.getBoundingClientRect();
      return {top: r.top, bottom: r.bottom, text: (e.innerText || e.textContent).replace(/\\s+/g, " ").trim()};
    });
  });
  var pre = document.createElement("pre");
  pre.id = "crdops-layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _run(args: list[str], html: Path) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--hide-scrollbars", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
                           f"--user-data-dir={html.parent / '.chromium-profile'}", *args, Path(html).resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)


def layout(html: Path, selectors: dict[str, str]) -> dict:
    """Where Chromium lays out the elements of ``selectors`` in a 1280x800 window: per key a list of
    {top, bottom, text} in CSS pixels from the top of the first screen, and ``viewport``. The page is measured
    from a copy with a measuring script appended (the report itself has no script)."""
    import json
    probe = Path(html).with_name(Path(html).stem + ".layout.html")
    probe.write_text(Path(html).read_text().replace("</body>", _LAYOUT_SCRIPT % json.dumps(selectors) + "</body>"))
    proc = _run(["--dump-dom"], probe)
    assert proc.returncode == 0 and 'id="crdops-layout"' in proc.stdout, proc.stderr[-2000:]
    text = proc.stdout.split('id="crdops-layout">', 1)[1].split("</pre>", 1)[0]
    return json.loads(text.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def screenshot(html: Path, png: Path) -> Path:
    """The first screen (1280x800) of the page as Chromium paints it."""
    png.parent.mkdir(parents=True, exist_ok=True)
    proc = _run([f"--screenshot={png}"], Path(html))
    assert proc.returncode == 0 and png.exists(), proc.stderr[-2000:]
    return png
