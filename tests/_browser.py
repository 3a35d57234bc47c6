"""Debian's chromium, headless, driven through selenium and chromedriver: the browser that the
page tests share (tests/view: the page of ``recpipe view``; tests/docs: the documentation site).

``tools/setup_browser.sh`` installs chromium, chromium-driver and selenium; where one is missing
``missing()`` says which, and the tests skip saying so.
"""

import contextlib
import os
import shutil
import tempfile

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# the flags that keep chromium from reaching for Google's hosts (this machine has no network)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1280,900")
WAIT = 60


def missing():
    """Why the browser cannot run here (a sentence), or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (bash tools/setup_browser.sh installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (bash tools/setup_browser.sh installs it)"
    return None


@contextlib.contextmanager
def chromium(prefix="recpipe-chromium-"):
    """A headless chromium with a profile of its own (removed after), quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix=prefix)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver, condition, what):
    """``condition(driver)``'s first truthy value, polled for up to ``WAIT`` seconds."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.2).until(
        lambda d: condition(d), message=f"waiting for {what}")


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)
