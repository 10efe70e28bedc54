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
