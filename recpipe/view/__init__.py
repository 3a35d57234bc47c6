"""``recpipe view``: a local web page over one ``.rec`` (records, labels, damage, and what the
loader feeds the model).

The parts: ``dataset`` (the one file, read by position through its ``IndexTable``: nothing per
record is held), ``pictures`` (thumbnails decoded at a JPEG DCT scale by the loaders' strict
decoder; samples made viewable), ``labels`` (the histogram and by-label/by-identity order,
computed on demand in the background), ``health`` (quarantine, ``verify`` and what the viewer
met), ``model`` (draws and batches from a real ``ImageLoader``), ``jobs`` (whole-file ``inspect``
and ``verify`` in a child process), ``app`` (the routes and limits), ``server`` (HTTP) and
``static/`` (the page: one HTML file, one script, one style sheet, shipped as package data).

Why the standard library's ``http.server``: the viewer serves one user on the loopback
interface, a few dozen small requests a page, and its work is decoding, which the C decoders do
without the GIL; what it needs from a server is bounded concurrency, timeouts and a strict
request surface, not an async framework. ``http.server`` gives that with no new dependency
(recpipe installs with numpy, OpenCV, fsspec and tqdm only), and ``ViewServer`` replaces
``ThreadingHTTPServer``'s thread per connection with a fixed pool and a bounded queue. The
page is plain HTML, CSS and JavaScript with no build step and nothing fetched from elsewhere:
it works offline and installs with the package.

>>> viewer = serve_file("train.rec", options)       # doctest: +SKIP
>>> print(viewer.url); viewer.serve_forever()        # doctest: +SKIP
"""

import ipaddress
import threading
from typing import Optional

from .app import App, Limits
from .dataset import Dataset
from .model import ModelView
from .server import ViewServer

__all__ = ["App", "Limits", "Viewer", "serve_file"]


class Viewer:
    """A running viewer: ``url``, ``serve_forever()`` (or ``start()`` in a thread owned by
    it) and ``close()``, which stops the server, its jobs, its loader and closes the file."""

    def __init__(self, server: ViewServer, app: App):
        self.server = server
        self.app = app
        host, port = server.server_address[:2]
        self.url = f"http://{_url_host(host)}:{port}/"
        self._thread: Optional[threading.Thread] = None

    def serve_forever(self):
        self.server.serve_forever(poll_interval=0.25)

    def start(self):
        """Serve from a thread this viewer owns (``close`` joins it)."""
        self._thread = threading.Thread(target=self.serve_forever, name="recpipe-view-accept")
        self._thread.start()
        return self

    def close(self):
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(10)
            self._thread = None
        self.server.close()
        self.app.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _url_host(host):
    return f"[{host}]" if ":" in host else host


def _allowed_hosts(host, port):
    """The Host headers a loopback server answers (None: any, for a server bound elsewhere)."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        return None
    names = {host, "localhost", "127.0.0.1", "[::1]", _url_host(host)}
    return {f"{name}:{port}" for name in names}


def serve_file(url, options, *, storage_options=None, host="127.0.0.1", port=0,
               limits: Optional[Limits] = None, summary_target=None, workers=8) -> Viewer:
    """Open ``url`` and bind a viewer's server to ``host:port`` (0: a free port) with the
    loader settings ``options`` (``LoaderOptions``); serve with ``serve_forever`` or ``start``.
    Raises before binding for a missing file or one that is not RecordIO."""
    dataset = Dataset(url, storage_options)
    try:
        app = App(dataset, ModelView(dataset, options), limits=limits,
                  summary_target=summary_target)
    except BaseException:
        dataset.close()
        raise
    try:
        server = ViewServer((host, port), app, workers=workers)
    except BaseException:
        app.close()
        raise
    server.allowed_hosts = _allowed_hosts(host, server.server_address[1])
    return Viewer(server, app)
