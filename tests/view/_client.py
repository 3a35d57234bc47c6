"""A small HTTP client for the viewer's tests (standard library only), and a running viewer."""

import contextlib
import http.client
import json
import time
import urllib.parse

import cv2
import numpy as np

from recpipe.decode.options import LoaderOptions
from recpipe.view import serve_file

# the recipe of the in-process tests: small outputs, random-resized crop and flip, shuffled
RECIPE = dict(data_shape=(3, 48, 48), random_resized_crop=True, min_random_area=0.3,
              rand_mirror=True, shuffle=True, seed=3)


def options(batch_size=8, **changes):
    settings = dict(RECIPE, **changes)
    data_shape = settings.pop("data_shape")
    return LoaderOptions.from_kwargs(batch_size, data_shape, **settings)


@contextlib.contextmanager
def viewer(rec, batch_size=8, **changes):
    """A viewer of ``rec`` serving from its own thread, with the summary the command line
    gives it (``recpipe inspect``'s text); closed (threads joined) on exit."""
    from recpipe.cli.view import inspect_text

    with serve_file(rec, options(batch_size, **changes),
                    summary_target=inspect_text).start() as running:
        client = Client(running.url)
        client.app = running.app
        yield client


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def image(self):
        """The body decoded as an image: RGB ``(H, W, 3)`` uint8."""
        pixels = cv2.imdecode(np.frombuffer(self.body, np.uint8), cv2.IMREAD_COLOR)
        assert pixels is not None, f"not an image: {self.body[:200]!r}"
        return pixels[..., ::-1]


class Client:
    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.url, self.host, self.port = url, parts.hostname, parts.port

    def request(self, path, method="GET", headers=None, timeout=60):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.putrequest(method, path, skip_host=headers is not None and "Host" in headers,
                                  skip_accept_encoding=True)
            for name, value in (headers or {}).items():
                connection.putheader(name, value)
            connection.endheaders()
            response = connection.getresponse()
            return Reply(response.status, dict(response.getheaders()), response.read())
        finally:
            connection.close()

    def get(self, path, **kwargs):
        return self.request(path, **kwargs)

    def post(self, path):
        return self.request(path, "POST", headers={"X-Recpipe-View": "1"})

    def poll(self, path, until, seconds=60):
        """GET ``path`` until ``until(reply)`` holds; the last reply."""
        deadline = time.monotonic() + seconds
        while True:
            reply = self.get(path)
            if until(reply):
                return reply
            assert time.monotonic() < deadline, f"{path}: still {reply.status} {reply.body[:300]!r}"
            time.sleep(0.1)
