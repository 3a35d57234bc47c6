"""``close()`` while an epoch runs (issue 30 item 15): the consumer gets a RuntimeError that
says the loader was closed, never a StopIteration that looks like a complete epoch, never a
batch of undecoded memory; no hang, every decode thread joined."""

import threading
import time

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode.loader import ImageLoader

N_RECORDS, BATCH = 100, 2  # 50 batches


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("close") / "close.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_RECORDS):
            img = np.full((24, 32, 3), (i * 5) % 256, np.uint8)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      cv2.imencode(".jpg", img)[1].tobytes()))
    return url


def _decode_threads():
    return [t for t in threading.enumerate() if t.name.startswith("recpipe-decode")]


def _slow_label(header, position):
    time.sleep(0.02)  # keeps the consumer waiting on the decode threads
    return float(header.label)


def test_close_between_batches_from_another_thread_is_an_error(rec):
    loader = ImageLoader(rec, BATCH, (3, 16, 16), threads=2)
    epoch = iter(loader)
    first = next(epoch)
    assert first.labels.tolist() == [0.0, 1.0]
    closer = threading.Thread(target=loader.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    with pytest.raises(RuntimeError, match="closed while iterating"):
        next(epoch)
    with pytest.raises(RuntimeError, match="closed while iterating"):
        next(epoch)  # and stays so: never a quiet end
    assert not _decode_threads()


def test_close_while_the_consumer_waits_is_an_error_and_nothing_is_made_up(rec):
    loader = ImageLoader(rec, BATCH, (3, 16, 16), threads=2, label_rule=_slow_label,
                         prefetch=2)
    delivered, outcome = [], {}

    def consume():
        try:
            for batch in loader:
                delivered.append(batch.labels.copy())
        except RuntimeError as exc:
            outcome["error"] = exc
        else:
            outcome["end"] = True

    consumer = threading.Thread(target=consume)
    consumer.start()
    while len(delivered) < 2 and consumer.is_alive():
        time.sleep(0.005)
    loader.close()
    consumer.join(30)
    assert not consumer.is_alive()
    assert "end" not in outcome, f"close() ended the epoch quietly after {len(delivered)} of 50"
    assert "closed while iterating" in str(outcome["error"])
    assert 2 <= len(delivered) < N_RECORDS // BATCH
    for i, labels in enumerate(delivered):  # every batch handed out was really decoded
        assert labels.tolist() == [2.0 * i, 2.0 * i + 1], i
    assert not _decode_threads()


def test_a_superseded_epoch_says_so(rec):
    with ImageLoader(rec, BATCH, (3, 16, 16), threads=2) as loader:
        first = iter(loader)
        next(first)
        second = iter(loader)
        assert next(second).labels.tolist() == [0.0, 1.0]
        with pytest.raises(RuntimeError, match="superseded"):
            next(first)


def test_a_finished_epoch_stays_finished_after_close(rec):
    loader = ImageLoader(rec, 50, (3, 16, 16), threads=2)
    epoch = iter(loader)
    assert len(list(epoch)) == 2
    loader.close()
    with pytest.raises(StopIteration):
        next(epoch)
