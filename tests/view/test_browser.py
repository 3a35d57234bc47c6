"""``recpipe view`` as a user meets it: the command started on a pack with damaged records, its
page driven in a real headless browser (Debian's chromium through selenium and chromedriver).

Browse, jump to a key, open a record, see the damaged ones marked, the augmentation draws and a
batch, and compare the pixels the page shows for a batch with what ``ImageLoader`` delivers (the
PNGs behind the page's images, and the pixels the browser itself decoded from them). Skips,
saying why, where chromium, chromedriver or selenium is missing (``ci/setup_browser.sh``
installs them).
"""

import base64
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import cv2
import numpy as np
import pytest

from recpipe.decode.bench import TRAIN
from recpipe.decode.loader import ImageLoader
from tests._browser import WAIT, chromium, css, missing, wait
from tests.view._files import (DAMAGED, FRAMING, KEY_BASE, NOT_IMAGE, SUM_DAMAGED, TRUNCATED,
                               write_damaged)

BATCH_SIZE, SEED, EPOCH = 8, 3, 1


pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


def loader(rec, **changes):
    """The loader a user would train with: the train recipe, shuffled, seed 3."""
    settings = dict(TRAIN, shuffle=True, seed=SEED, **changes)
    return ImageLoader(rec, BATCH_SIZE, settings.pop("data_shape"), **settings)


def _start_viewer(rec, env):
    process = subprocess.Popen(
        [sys.executable, "-m", "recpipe", "view", rec, "--recipe", "train", "--shuffle", "true",
         "--seed", str(SEED), "--batch-size", str(BATCH_SIZE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline, lines = time.monotonic() + WAIT, []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if ready:
            line = process.stdout.readline()
            lines.append(line)
            if " at http://127.0.0.1:" in line:
                return process, line.rsplit(" at ", 1)[1].strip()
        if process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"recpipe view did not start: {lines} {process.stderr.read()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(rec, url, env)``: ``recpipe view`` running on a pack with damaged records that a
    training run already met (so they are in the loaders' quarantine)."""
    rec = write_damaged(tmp_path_factory.mktemp("data"))
    env = dict(os.environ, RECPIPE_QUARANTINE_DIR=str(tmp_path_factory.mktemp("quarantine")))
    before = os.environ.get("RECPIPE_QUARANTINE_DIR")
    os.environ["RECPIPE_QUARANTINE_DIR"] = env["RECPIPE_QUARANTINE_DIR"]
    try:
        with loader(rec, on_error="skip") as training:
            for _ in training:  # one epoch: the bad records are quarantined
                pass
    finally:
        if before is None:
            del os.environ["RECPIPE_QUARANTINE_DIR"]
        else:
            os.environ["RECPIPE_QUARANTINE_DIR"] = before
    listing = sorted(os.listdir(os.path.dirname(rec)))
    process, url = _start_viewer(rec, env)
    yield rec, url, env
    process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"recpipe view did not stop on SIGTERM: {err[-2000:]}") from None
    assert process.returncode == 0, err[-2000:]
    assert "stopped" in out and "Traceback" not in err
    assert sorted(os.listdir(os.path.dirname(rec))) == listing  # nothing written beside it


@pytest.fixture(scope="module")
def browser():
    with chromium(prefix="recpipe-view-chromium-") as driver:
        yield driver


def open_page(driver, url):
    driver.get(url)
    wait(driver, lambda d: d.execute_script("return document.getElementById('main').dataset.view")
         is not None, url)


def loaded_images(driver, selector):
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".filter(i => i.complete && i.naturalWidth > 0).length", selector)


def test_browse_shows_thumbnails_marks_the_damaged_and_jumps_to_a_key(served, browser):
    rec, url, env = served
    open_page(browser, url + "#/browse")
    wait(browser, lambda d: len(css(d, "#grid .tile")) == 48, "the first page of 48 tiles")
    tiles = css(browser, "#grid .tile")
    assert [int(t.get_attribute("data-position")) for t in tiles] == list(range(48))
    assert tiles[3].get_attribute("data-key") == str(KEY_BASE + 3)
    assert "label 3" in tiles[3].text and "jpeg 120\u00d796" in tiles[3].text
    wait(browser, lambda d: loaded_images(d, "#grid .tile img") == 48 - 4,
         "the thumbnails of the 44 readable images")
    # each damaged record is marked, with its error; never a picture
    wait(browser, lambda d: all("bad" in d.find_element(
        "css selector", f'.tile[data-position="{p}"]').get_attribute("class")
        for p in (*DAMAGED, NOT_IMAGE)), "the damaged tiles marked")
    for position, words in ((SUM_DAMAGED, "checksum mismatch"), (FRAMING, "bad magic"),
                            (TRUNCATED, "Premature end of JPEG file"), (NOT_IMAGE, "quarantined")):
        tile = browser.find_element("css selector", f'.tile[data-position="{position}"]')
        assert words in tile.get_attribute("data-error"), position
        assert not tile.find_elements("css selector", "img")
    assert "not a recognised image" in browser.find_element(
        "css selector", f'.tile[data-position="{NOT_IMAGE}"]').text
    assert "quarantined" in browser.find_element(
        "css selector", f'.tile[data-position="{TRUNCATED}"]').get_attribute("data-error")
    # the next page
    browser.find_element("id", "next").click()
    wait(browser, lambda d: [t.get_attribute("data-position") for t in css(d, "#grid .tile")]
         == [str(p) for p in range(48, 60)], "the second page")
    # jump to a key
    box = browser.find_element("id", "jump-input")
    box.clear()
    box.send_keys(str(KEY_BASE + 42))
    browser.find_element("id", "jump-go").click()
    wait(browser, lambda d: css(d, '.tile.highlight[data-position="42"]'), "record 42 highlighted")
    assert "highlight=42" in browser.current_url
    # a key that is not there: a clear message, not a blank page
    box = browser.find_element("id", "jump-input")
    box.clear()
    box.send_keys("424242")
    browser.find_element("id", "jump-go").click()
    wait(browser, lambda d: css(d, "main .error-box"), "the error for a missing key")
    assert "no record with key 424242" in css(browser, "main .error-box")[0].text


def test_by_label_order_groups_the_records(served, browser):
    _, url, _ = served
    open_page(browser, url + "#/browse?order=label&start=0&count=96")
    wait(browser, lambda d: len(css(d, "#grid .tile")) == 60, "all 60 records by label")
    groups = [g.text for g in css(browser, "#grid .group")]
    assert groups == [f"label {n}" for n in range(5)] + ["label -"]
    wait(browser, lambda d: css(d, "#histogram .bars .row"), "the label histogram")
    assert len(css(browser, "#histogram .bars .row")) == 5


def test_a_record_shows_its_picture_and_what_the_model_gets(served, browser):
    _, url, _ = served
    open_page(browser, url + "#/browse")
    wait(browser, lambda d: css(d, '.tile[data-position="42"]'), "the tiles")
    css(browser, '.tile[data-position="42"]')[0].click()
    wait(browser, lambda d: css(d, "#record-details"), "the record page")
    assert f"{KEY_BASE + 42}" in browser.find_element("id", "record-details").text
    wait(browser, lambda d: loaded_images(d, "#picture-img") == 1, "the picture")
    wait(browser, lambda d: loaded_images(d, "#draws img") == 8, "eight draws")
    draws = css(browser, "#draws .draw")
    assert [d.get_attribute("data-epoch") for d in draws] == [str(e) for e in range(8)]
    assert all("crop box" in d.text and "flipped" in d.text for d in draws)
    assert len(css(browser, "#picture svg rect")) == 8  # the crop boxes over the picture
    # a damaged record: its error, no picture, no draws
    open_page(browser, url + f"#/record/{TRUNCATED}")
    wait(browser, lambda d: css(d, "#picture-error") or css(d, ".error-box"), "the error")
    text = browser.find_element("id", "main").text
    assert "quarantined" in text or "decode" in text
    assert loaded_images(browser, "#picture img") == 0 and not css(browser, "#draws img")


def test_health_lists_the_damaged_records_and_verify_finds_them(served, browser):
    _, url, _ = served
    open_page(browser, url + "#/health")
    wait(browser, lambda d: css(d, "#quarantine-table"), "the quarantine table")
    rows = css(browser, "#quarantine-table tbody tr")
    assert sorted(int(r.get_attribute("data-position")) for r in rows) == sorted(
        (*DAMAGED, NOT_IMAGE))
    assert all(r.find_elements("css selector", "td.mono")[0].text.isdigit() for r in rows)
    browser.find_element("id", "verify-run").click()
    wait(browser, lambda d: css(d, "#verify-result"), "verify's result")
    assert "Problems" in browser.find_element("id", "verify-result").text
    kinds = {r.find_elements("css selector", "td")[1].text
             for r in css(browser, "#verify-table tbody tr")}
    assert {"checksum-mismatch", "bad-record"} <= kinds


def _shown_pixels(driver, blob_url):
    """The pixels the browser decoded from the image at ``blob_url`` (via a canvas)."""
    data = driver.execute_async_script("""
        const [url, done] = arguments;
        const img = new Image();
        img.onload = () => {
          const c = document.createElement('canvas');
          c.width = img.naturalWidth; c.height = img.naturalHeight;
          const g = c.getContext('2d', {colorSpace: 'srgb'});
          g.drawImage(img, 0, 0);
          const p = g.getImageData(0, 0, c.width, c.height).data;
          let s = ''; for (let i = 0; i < p.length; i += 8192)
            s += String.fromCharCode.apply(null, p.subarray(i, i + 8192));
          done([c.width, c.height, btoa(s)]);
        };
        img.onerror = () => done(null);
        img.src = url;""", blob_url)
    assert data is not None
    width, height, raw = data
    return np.frombuffer(base64.b64decode(raw), np.uint8).reshape(height, width, 4)[..., :3]


def test_a_batch_on_the_page_is_the_loaders_batch_pixel_for_pixel(served, browser):
    rec, url, env = served
    with loader(rec, on_error="skip") as training:
        training.set_epoch(EPOCH)
        clean = {i: (b.images.copy(), b.positions.copy()) for i, b in enumerate(training)
                 if len(b.images) == BATCH_SIZE and not set(b.positions) & {*DAMAGED, NOT_IMAGE}}
    index = sorted(clean)[-1]
    images, positions = clean[index]
    open_page(browser, url + f"#/batch?epoch={EPOCH}&batch={index}")
    wait(browser, lambda d: loaded_images(d, "#batch-grid img") == BATCH_SIZE, "the batch")
    cards = css(browser, "#batch-grid .sample")
    assert [int(c.get_attribute("data-position")) for c in cards] == positions.tolist()
    for slot, card in enumerate(cards):
        img = card.find_element("css selector", "img")
        with urllib.request.urlopen(url.rstrip("/") + img.get_attribute("data-src"),
                                    timeout=WAIT) as reply:
            assert reply.headers["Content-Type"] == "image/png"
            png = cv2.imdecode(np.frombuffer(reply.read(), np.uint8), cv2.IMREAD_COLOR)
        expected = images[slot].transpose(1, 2, 0)  # the loader's uint8 RGB sample
        assert np.array_equal(png[..., ::-1], expected), slot
        assert np.array_equal(_shown_pixels(browser, img.get_attribute("src")), expected), slot
    # a batch that holds a damaged record: the error naming it
    with loader(rec, on_error="skip") as training:
        training.set_epoch(EPOCH)
        short = [i for i, b in enumerate(training) if len(b.images) < BATCH_SIZE]
    open_page(browser, url + f"#/batch?epoch={EPOCH}&batch={short[0]}")
    wait(browser, lambda d: css(d, "#batch-view .error-box"), "the batch's error")
    assert "record" in css(browser, "#batch-view .error-box")[0].text


def test_the_summary_tab_shows_what_recpipe_inspect_prints(served, browser):
    rec, url, env = served
    printed = subprocess.run([sys.executable, "-m", "recpipe", "inspect", rec, "--no-progress"],
                             capture_output=True, text=True, timeout=WAIT, env=env).stdout
    open_page(browser, url + "#/summary")
    wait(browser, lambda d: css(d, "#summary-text"), "the summary")
    shown = browser.execute_script("return document.getElementById('summary-text').textContent")
    assert shown == printed and "QUARANTINED by a loader: 4 record(s)" in shown


def test_a_page_that_does_not_exist_is_a_clear_page(served, browser):
    _, url, _ = served
    browser.get(url + "static/../../etc/passwd")
    assert "404" in browser.title and "root:" not in browser.page_source
    open_page(browser, url + "#/record/999999")
    wait(browser, lambda d: css(d, "main .error-box"), "the error")
    assert "no record at position 999999" in css(browser, "main .error-box")[0].text
