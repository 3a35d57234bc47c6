"""Storage options on the command line: ``--storage-options JSON`` and ``-o KEY=VALUE`` reach
fsspec on every command that takes a URL (against a real S3 server on loopback)."""

import json

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.cli.options import storage_options


class _Args:
    def __init__(self, storage_options=None, storage_option=()):
        self.storage_options = storage_options
        self.storage_option = list(storage_option)


def test_parsing_json_and_pairs():
    assert storage_options(_Args()) is None
    parsed = storage_options(_Args('{"anon": false, "key": "a"}',
                                   ["key=b", "use_ssl=false", "recpipe.attempts=3",
                                    'client_kwargs={"region_name": "x"}']))
    assert parsed == {"anon": False, "key": "b", "use_ssl": False, "recpipe": {"attempts": 3},
                      "client_kwargs": {"region_name": "x"}}
    for bad in (_Args("{not json"), _Args("[1]"), _Args(None, ["novalue"])):
        with pytest.raises(ValueError):
            storage_options(bad)


def _pairs(options):
    """``options`` as repeated ``-o KEY=VALUE`` arguments (values as JSON)."""
    args = []
    for key, value in options.items():
        if key == "recpipe":
            for sub, sub_value in value.items():
                args += ["-o", f"recpipe.{sub}={json.dumps(sub_value)}"]
        else:
            args += ["-o", f"{key}={json.dumps(value)}"]
    return args


def test_every_url_command_takes_storage_options(s3, capsys):
    base, options = s3
    url = f"{base}/cli.rec"
    jpeg = cv2.imencode(".jpg", np.full((16, 16, 3), 90, np.uint8))[1].tobytes()
    with recpipe.RecordWriter(url, storage_options=options) as writer:
        for i in range(6):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i % 2), i, 0), jpeg))
    as_json = ["--storage-options", json.dumps(options)]
    assert main(["inspect", url, "--json", *as_json]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 6
    assert main(["verify", url, "--json", *_pairs(options)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    assert main(["index", url, "--output", f"{base}/cli2.idx", "--positions", *as_json]) == 0
    capsys.readouterr()
    with recpipe.RecordReader(url, f"{base}/cli2.idx", storage_options=options) as reader:
        assert len(reader) == 6
    # without the options the server refuses (no credentials for it): a clean error, exit 1
    assert main(["inspect", url]) == 1
    assert url in capsys.readouterr().err
