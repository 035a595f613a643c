"""The docs site in a real browser: ``mkdocs build --strict`` into a temporary folder, served by a local HTTP
server, opened in headless Chromium (Debian's, driven by Playwright as in tests/test_report_browser.py).

Every request the pages make is recorded and only the local server's are let through: the site must work
offline (no web fonts, no CDN, no analytics). Skipped, saying how to install them, without mkdocs (the docs
extra), Playwright or Chromium.
"""

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip(
    "mkdocs", reason="the docs site needs mkdocs: pip install -c constraints.txt -e '.[docs]'"
)
pytest.importorskip("material", reason="the docs site needs mkdocs-material: the docs extra")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser test needs Playwright: pip install playwright (the dev extra)"
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site, served on 127.0.0.1: its base URL."""
    if not (ROOT / "docs" / "javascripts" / "mermaid.min.js").exists():  # every page loads it
        pytest.skip("no docs/javascripts/mermaid.min.js: make docs (or make test) fetches it from npm")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def visit(browser, site):
    """Open pages of the site; afterwards, check that none logged an error or asked another host for anything."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    requests, errors = [], []

    def route(r):  # every request of the pages and their workers (search runs in a web worker)
        requests.append(r.request.url)
        r.continue_() if r.request.url.startswith(site) else r.abort()

    context.route("**/*", route)

    def open_page(path):
        page = context.new_page()
        page.on("console", lambda m: errors.append(f"{path}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"{path}: {e}"))
        page.goto(site + path, wait_until="networkidle")
        return page

    yield open_page
    context.close()
    assert requests and [url for url in requests if not url.startswith(site)] == []
    assert errors == []


@pytest.mark.parametrize(
    ("path", "title", "heading"),
    [
        ("", "proxima", "proxima"),
        ("ENVS/", "Your own env", None),
        ("reference/config/", "Settings (PPOArgs)", "Settings"),
        ("reference/losses/", "Losses", "Losses"),
    ],
)
def test_a_page_renders_with_its_title_navigation_and_styles(visit, path, title, heading):
    page = visit(path)
    assert page.title().startswith(title) and page.title().endswith("proxima"), page.title()
    if heading:
        assert page.locator("article h1").first.inner_text().strip().rstrip("¶").strip() == heading
    nav = page.locator("nav.md-nav--primary a.md-nav__link").all_inner_texts()
    for section in ("Home", "Your own env", "Settings (PPOArgs)", "Architecture", "Results"):
        assert any(text.strip() == section for text in nav), (section, nav)
    # Material's stylesheet is applied: the header is a coloured bar at the top, not unstyled text
    header = page.evaluate(
        "() => { const s = getComputedStyle(document.querySelector('header.md-header'));"
        " return [s.position, s.backgroundColor]; }"
    )
    assert header[0] == "sticky" and header[1] not in ("rgba(0, 0, 0, 0)", "transparent"), header


def test_the_reference_shows_the_documented_fields_of_ppoargs(visit):
    page = visit("reference/config/")
    text = page.locator("article").inner_text()
    assert "clip_coef" in text and "the surrogate clipping coefficient" in text
    assert "total_timesteps" in text and "gae_lambda" in text


def test_search_finds_clip_coef_and_its_result_opens_the_reference(visit, site):
    page = visit("")
    page.locator("label.md-search__icon, .md-search__input").first.click()
    # typed key by key: Material searches on keyboard events, which fill() does not send
    page.locator("input.md-search__input").press_sequentially("clip_coef", delay=20)
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15_000)  # the worker builds lunr's index from search_index.json first
    assert page.locator(".md-search-result__meta").inner_text().endswith("matching documents")
    first = results.first.inner_text()
    assert first.startswith("Settings") and "clip_coef" in first, first
    results.first.locator("a").first.click()
    page.wait_for_url(f"{site}reference/config/**")
    assert "the surrogate clipping coefficient" in page.locator("article").inner_text()


def test_the_architecture_page_draws_its_diagram_from_the_sites_own_mermaid(visit, site):
    page = visit("ARCHITECTURE/")
    # mkdocs-material swaps the ```mermaid block (a <pre class="mermaid">) for a drawn <div class="mermaid">
    page.locator("div.mermaid").first.wait_for(timeout=15_000)
    box = page.locator("div.mermaid").first.bounding_box()
    assert box is not None and box["height"] > 200, box  # seven packages, one under another
    assert page.locator("pre.mermaid").count() == 0
