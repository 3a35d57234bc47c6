"""Screenshots of ``recpipe view`` for the documentation (``docs/images/view-*.png``).

Packs 160 of the project's sample photos (16 from each class folder of
``shared/data/photos``, beside the repository) with two damaged records, lets a training epoch
meet them (so they are in the loaders' quarantine), starts ``recpipe view --recipe train`` on
the pack and saves the browse, record, batch and health views from headless chromium (the same
browser the tests drive: ``bash ci/setup_browser.sh``), scaled to 800 px wide.

    python ci/view_screenshots.py                 # writes docs/images/view-*.png
    python ci/view_screenshots.py --out /tmp/shots
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1280,980",
                  "--hide-scrollbars")


def pack_photos(folder, per_class=16):
    import recpipe
    from tests._photos import photos_dir

    source = photos_dir()
    if source is None:
        raise SystemExit("no photos: shared/data/photos is not beside the repository")
    rec = os.path.join(folder, "photos.rec")
    classes = sorted(p for p in os.listdir(source) if os.path.isdir(os.path.join(source, p)))
    count = 0
    with recpipe.RecordWriter(rec) as writer:
        for label, name in enumerate(classes):
            files = sorted(os.listdir(os.path.join(source, name)))[:per_class]
            for file in files:
                with open(os.path.join(source, name, file), "rb") as f:
                    jpeg = f.read()
                if count == 9:
                    jpeg = jpeg[:len(jpeg) // 2]  # a truncated JPEG
                writer.write(recpipe.pack(recpipe.IRHeader(0, float(label), count, 0), jpeg))
                count += 1
    from tests._damage import damage

    with recpipe.RecordReader(rec, integrity="off") as reader:
        damage(rec, int(reader.offsets[27]), "zero")  # bit rot: a checksum mismatch
    return rec


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "images"))
    args = parser.parse_args()
    import cv2
    import numpy as np
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from recpipe.decode.bench import TRAIN
    from recpipe.decode.loader import ImageLoader

    scratch = os.path.join(tempfile.gettempdir(), "recpipe-view-docs")  # a stable name
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    env = dict(os.environ, RECPIPE_QUARANTINE_DIR=os.path.join(scratch, "quarantine"))
    os.environ["RECPIPE_QUARANTINE_DIR"] = env["RECPIPE_QUARANTINE_DIR"]
    rec = pack_photos(scratch)
    settings = dict(TRAIN)
    with ImageLoader(rec, 32, settings.pop("data_shape"), on_error="skip", shuffle=True,
                     **settings) as loader:
        for _ in loader:
            pass
    server = subprocess.Popen([sys.executable, "-m", "recpipe", "view", rec, "--recipe", "train",
                               "--shuffle", "true", "--batch-size", "32"],
                              stdout=subprocess.PIPE, text=True, env=env)
    url = None
    while url is None:
        line = server.stdout.readline()
        if not line:
            raise SystemExit("recpipe view did not start")
        if " at http://" in line:
            url = line.rsplit(" at ", 1)[1].strip()
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={os.path.join(scratch, 'profile')}")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    os.makedirs(args.out, exist_ok=True)
    shots = [("view-browse.png", "#/browse?order=record&start=0&count=48", 6),
             ("view-record.png", "#/record/40", 6),
             ("view-batch.png", "#/batch?epoch=0&batch=1", 8),
             ("view-health.png", "#/health", 3),
             ("view-labels.png", "#/browse?order=label&start=0&count=48", 6)]
    try:
        for name, hash_, seconds in shots:
            driver.get(url + hash_)
            time.sleep(seconds)
            if name == "view-health.png":  # with verify's findings
                driver.find_element("id", "verify-run").click()
                for _ in range(120):
                    if driver.find_elements("id", "verify-result"):
                        break
                    time.sleep(0.5)
            raw = driver.get_screenshot_as_png()
            image = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
            image = cv2.resize(image, (800, round(image.shape[0] * 800 / image.shape[1])),
                               interpolation=cv2.INTER_AREA)
            path = os.path.join(args.out, name)
            cv2.imwrite(path, image, [cv2.IMWRITE_PNG_COMPRESSION, 9])
            print(f"{path}: {os.path.getsize(path) // 1024} KiB")
    finally:
        driver.quit()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
