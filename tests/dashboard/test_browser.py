"""S5-S7 and S13: the operator screen in a real headless Chromium (Debian's package,
installed by ``make browser``; never a downloaded one), served by the
``inboxguard dashboard`` command over a database the scenario runs filled."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRE
from tests.dashboard.scenario import SCRIPT, Filled

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Another site's name, rebound to this machine (DNS rebinding, S13).
    "--host-resolver-rules=MAP rebound.example 127.0.0.1",
]
TOKEN = "browser-test-token"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the dashboard exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"the dashboard did not answer at {url} within {timeout}s")


@pytest.fixture(scope="module")
def site(filled: tuple[str, str, Filled]) -> Iterator[str]:
    url, prefix, _ = filled
    port = _free_port()
    env = {**os.environ, "INBOXGUARD_DASHBOARD_TOKEN": TOKEN, "INBOXGUARD_DB_URL": url}
    command = [sys.executable, "-m", "inboxguard", "dashboard", "--port", str(port)]
    command += ["--prefix", prefix, "--sample-every", "1s"]
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(base + "/", process)
        yield base
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
        assert url.encode() not in err  # the database URL is never printed


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        reason = f"{CHROMIUM} is missing; run `make browser` (apt-get install chromium)"
        if REQUIRE:
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            java_script_enabled=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def _screenshot(page: Any, path: Path) -> None:
    """Save a screenshot; with INBOXGUARD_SCREENSHOTS=docs/img, for the docs too."""
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    if os.environ.get("INBOXGUARD_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["INBOXGUARD_SCREENSHOTS"]) / path.name)


def _columns(page: Any, base: str, query: str) -> dict[str, list[str]]:
    page.goto(f"{base}/search?q={query}")
    card = page.locator("article.command").first
    return {
        column: card.locator(f'[data-column="{column}"]').all_inner_texts()
        for column in ("inbox", "delivery", "effect")
    }


def test_s5_three_columns_tell_apart_what_one_flag_would_hide(
    site: str, browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page()
    page.goto(site + "/")
    page.fill("#q", "order-1/charge")  # an effect key finds its command
    page.click("form.search button")
    card = page.locator("article.command").first
    assert card.locator("h2").inner_text().startswith("order-1")
    # confirmed while retrying: the payment is confirmed, the inbox has not
    # accepted the command, and its message is being sent again
    assert _columns(page, site, "order-1") == {
        "inbox": ["not accepted"],
        "delivery": ["retrying: attempt 1 failed"],
        "effect": ["confirmed"],
    }
    _screenshot(page, tmp_path / "dashboard.png")
    # complete but unknown: accepted and delivered, the notification unknown
    assert _columns(page, site, "order-2") == {
        "inbox": ["accepted"],
        "delivery": ["delivered (attempt 1)"],
        "effect": ["unknown"],
    }
    page.goto(site + "/")
    _screenshot(page, tmp_path / "dashboard-overview.png")
    assert page.locator("#unknown-effects").inner_text().count("order-2/notify") == 1
    assert page.locator("#effects-confirmed").inner_text() == "1"
    assert page.locator("#backlog").inner_text() == "1"
    page.close()


def test_s6_a_script_in_a_payload_is_shown_as_text(
    site: str, browser: Any, filled: tuple[str, str, Filled]
) -> None:
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{site}/quarantine/{filled[2].quarantine['order-3']}")
    assert SCRIPT in page.locator("#payload").inner_text()
    assert page.locator("script").count() == 0
    assert page.title() != "owned"
    assert dialogs == []
    page.close()


def test_s7_release_needs_the_token_and_records_who_and_why(
    site: str, browser: Any, filled: tuple[str, str, Filled]
) -> None:
    record = filled[2].quarantine["order-3"]
    page = browser.new_page()
    page.goto(f"{site}/quarantine/{record}")
    page.click("text=Release…")

    def submit(token: str) -> Any:
        page.fill("#who", "ana")
        page.fill("#why", "the producer's payload was fixed")
        page.fill("#token", token)
        page.check("#confirm")
        with page.expect_navigation() as navigation:
            page.click("#action-form button[type=submit]")
        return navigation.value

    refused = submit("not-the-token")
    assert refused.status == 403
    assert "token is missing or wrong" in page.inner_text("main")
    page.goto(f"{site}/quarantine/{record}")
    assert page.inner_text("#status") == "open"
    page.click("text=Release…")
    submit(TOKEN)
    assert page.url.endswith(f"/quarantine/{record}?done=release")
    assert page.inner_text("#status") != "open"
    assert "release by ana: the producer's payload was fixed" in page.inner_text("#actions")
    page.close()


def test_s13_a_rebound_name_reads_nothing_in_chromium(
    site: str, browser: Any, filled: tuple[str, str, Filled]
) -> None:
    """A page of rebound.example, whose name now resolves to 127.0.0.1, is
    same-origin with anything served there: the dashboard refuses its Host."""
    record = filled[2].quarantine["order-3"]
    rebound = site.replace("127.0.0.1", "rebound.example")
    page = browser.new_page()
    for path in ("/", f"/quarantine/{record}"):
        answer = page.goto(f"{rebound}{path}")
        assert answer is not None
        assert answer.status == 400
        text = page.inner_text("body")
        assert "--allowed-host" in text
        assert "order-3" not in text
    assert page.goto(f"{site}/quarantine/{record}").status == 200  # type: ignore[union-attr]
    page.close()
