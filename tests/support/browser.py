"""A headless Chromium driven by Selenium: the system's browser and its own driver (Debian's
``chromium`` and ``chromium-driver``, which ``scripts/install-browser.sh`` installs), so the two
always match and nothing is downloaded."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.wait import WebDriverWait

ARTIFACTS_ENV = "ACTORRT_TEST_ARTIFACTS"


def artifacts_dir() -> Path:
    """Where browser tests save their screenshots (CI keeps the folder)."""
    path = Path(os.environ.get(ARTIFACTS_ENV, "test-artifacts")) / "dashboard"
    path.mkdir(parents=True, exist_ok=True)
    return path


def browser_paths() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise RuntimeError("the dashboard's browser tests need Chromium and its driver: "
                           "bash scripts/install-browser.sh (Debian: apt-get install chromium chromium-driver)")
    return browser, driver


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[webdriver.Chrome]:
    browser, driver = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


def wait_for(chrome: webdriver.Chrome, condition: Callable[[webdriver.Chrome], Any], timeout: float = 30.0,
             what: str = "") -> Any:
    """Poll ``condition(chrome)`` until it is truthy; returns its value. A live page redraws its
    parts every second, so an element found may be gone when read: that poll counts as false."""
    return WebDriverWait(chrome, timeout, poll_frequency=0.2,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                         ).until(condition, message=what)


def text_of(chrome: webdriver.Chrome, selector: str) -> str | None:
    """The text of the first element ``selector`` matches, read in one step (None: no such element)."""
    return chrome.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                                 selector)


def attributes(chrome: webdriver.Chrome, selector: str, name: str) -> list[str]:
    """Attribute ``name`` of every element ``selector`` matches, read in one step."""
    return chrome.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]));", selector, name)
