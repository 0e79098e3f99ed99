"""Open the reports in headless Chromium (Debian ``chromium``): they must render without a script
error, a console error, a blocked (external) load, or an empty plot. Skips where Chromium is absent.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from report_golden import NAT, ROUTER

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install chromium)"),
]

#: Injected first thing in <head>: records script errors, failed resource loads, console errors
#: and CSP violations (an attempt to load anything) as attributes of <html>, and after load the
#: number of <svg> plots and how many of them are drawn smaller than 100×100 px.
PROBE = """<script>(function(){var h=document.documentElement;
function add(a,m){h.setAttribute(a,(h.getAttribute(a)||'')+String(m).replace(/[|]/g,'/')+'|');}
window.addEventListener('error',function(e){add('data-errors',e.message||('failed to load '+((e.target&&(e.target.src||e.target.href))||'?')));},true);
window.addEventListener('unhandledrejection',function(e){add('data-errors','unhandled rejection '+e.reason);});
document.addEventListener('securitypolicyviolation',function(e){add('data-csp','blocked '+e.blockedURI+' ('+e.violatedDirective+')');});
var ce=console.error;console.error=function(){add('data-console',Array.prototype.join.call(arguments,' '));return ce.apply(console,arguments);};
window.addEventListener('load',function(){var s=document.querySelectorAll('svg'),small=0;
for(var i=0;i<s.length;i++){var r=s[i].getBoundingClientRect();if(r.width<100||r.height<100)small++;}
h.setAttribute('data-svgs',s.length);h.setAttribute('data-small-svgs',small);h.setAttribute('data-loaded','yes');});
})();</script>"""


def chromium_dom(html_path: Path) -> tuple[dict[str, str], str]:
    """Load ``html_path`` (with the probe injected) and return the <html> attributes and stderr."""
    text = html_path.read_text(encoding="utf-8")
    probed = html_path.with_name("probed-" + html_path.name)
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    profile = tempfile.mkdtemp(prefix="netrig-chromium-")
    try:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--window-size=1280,900", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
            capture_output=True, text=True, timeout=180, env={**os.environ, "LANG": "C.UTF-8"},
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r"<html([^>]*)>", proc.stdout)
    if m is None:
        pytest.fail(f"chromium returned no DOM (exit {proc.returncode}): {proc.stderr[-2000:]}")
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
    return attrs, proc.stderr


def console_errors(stderr: str) -> list[str]:
    """Console / script errors Chromium logged (not its own dbus and sandbox noise)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def check_renders(html_path: Path, min_svgs: int) -> None:
    attrs, stderr = chromium_dom(html_path)
    assert attrs.get("data-loaded") == "yes", f"load event never fired: {attrs}"
    assert not attrs.get("data-errors"), attrs["data-errors"]
    assert not attrs.get("data-console"), attrs["data-console"]
    assert not attrs.get("data-csp"), f"the page tried to load something: {attrs['data-csp']}"
    assert not console_errors(stderr), console_errors(stderr)
    assert int(attrs["data-svgs"]) >= min_svgs
    assert attrs["data-small-svgs"] == "0", "a plot rendered smaller than 100×100 px"


def test_probe_catches_errors(tmp_path):
    """The harness itself: a page with a script error and an external image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                   "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
                   '<img src="https://example.invalid/x.png"><script>noSuchFunction()</script></body></html>')
    attrs, _ = chromium_dom(bad)
    assert "noSuchFunction" in attrs.get("data-errors", "")
    assert "example.invalid" in attrs.get("data-csp", "")


def test_report_renders_in_chromium(rendered):
    check_renders(rendered(ROUTER), min_svgs=10)


def test_compare_renders_in_chromium(rendered):
    check_renders(rendered(ROUTER, NAT, compare=True), min_svgs=7)
