"""Options shared by the commands that take a file or URL: fsspec storage options."""

import json

__all__ = ["BATCH_HELP", "DECODERS", "DECODER_HELP", "DTYPE_HELP", "add_storage_options",
           "storage_options"]


def _pair(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"-o {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)  # numbers, true/false, null, {"nested": ...}
    except ValueError:
        return key, value


def add_storage_options(parser, short=True):
    """``--storage-options JSON`` and ``--storage-option``/``-o KEY=VALUE`` (repeatable; no
    ``-o`` where a command already uses it), passed to fsspec (and recpipe's own remote
    settings under the ``recpipe`` key)."""
    parser.add_argument("--storage-options", metavar="JSON", default=None,
                        help='fsspec storage options as JSON, e.g. \'{"anon": true, '
                             '"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}\'')
    flags = ("-o", "--storage-option") if short else ("--storage-option",)
    parser.add_argument(*flags, dest="storage_option", metavar="KEY=VALUE", action="append",
                        default=[], help="one storage option (repeatable; VALUE parsed as JSON "
                                         f"when it is JSON, e.g. {flags[0]} anon=true); "
                                         "recpipe.KEY=VALUE sets recpipe's remote settings")


# the decoders of recpipe.decode.decoders.PREFERENCE (a test keeps the two in step), named here
# so that building the parser imports no decode code
DECODERS = ("auto", "turbojpeg", "libjpeg", "simplejpeg", "opencv")
DECODER_HELP = ("JPEG decoder: auto (the first available of turbojpeg, libjpeg, simplejpeg, "
                "opencv; `recpipe doctor` lists them), or one of those (default auto)")
DTYPE_HELP = "dtype of the image batches (default uint8)"
BATCH_HELP = "images per batch (default 128)"


def storage_options(args):
    """The storage options of ``args`` as a dict, or None when none were given."""
    options = {}
    if getattr(args, "storage_options", None):
        try:
            options = json.loads(args.storage_options)
        except ValueError as e:
            raise ValueError(f"--storage-options is not valid JSON: {e}") from None
        if not isinstance(options, dict):
            raise ValueError("--storage-options must be a JSON object")
    for text in getattr(args, "storage_option", None) or ():
        key, value = _pair(text)
        if key.startswith("recpipe."):
            options.setdefault("recpipe", {})[key[len("recpipe."):]] = value
        else:
            options[key] = value
    return options or None
