"""``PackOptions``: the settings of ``pack_dataset``, frozen and validated before any file is
touched.

``PackOptions.from_kwargs(**keywords)`` takes ``pack_dataset``'s keywords; a misspelt one gets
a "did you mean" (``shufle`` -> ``shuffle``). ``image_options()`` gives the per-image
settings (``transform.ImageOptions``) the packers apply."""

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..errors import check_on_error
from ..spelling import did_you_mean
from ..image.restart import RestartPolicy, restarts_available
from .inputs import InputLimits
from .items import DEFAULT_EXTENSIONS
from .transform import ImageOptions, asks_for_change

__all__ = ["PackOptions", "PACK_KEYWORDS", "PACK_ON_ERROR", "ENCODINGS", "check_keywords"]

# the loaders' vocabulary (recpipe.errors.ON_ERROR) less "replace": a file is packed or not
PACK_ON_ERROR = ("raise", "skip")
ENCODINGS = (None, ".jpg", ".jpeg", ".png")
# restart markers when ``restart`` is not given (``image.restart``): "auto", measured to pay
# (BENCHMARKS.md "Restart markers": random crops decode 1.25x faster, files 2.3% smaller, 2.6 ms
# more CPU per photo at pack time); "off" where recpipe's libjpeg extension is not built
DEFAULT_RESTART = "auto"


@dataclass(frozen=True)
class PackOptions:
    """How ``pack_dataset`` packs (see ``pack_dataset`` for what each setting does)."""

    root: Optional[str] = None
    workers: Optional[int] = None
    pass_through: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: Optional[int] = None
    encoding: Optional[str] = None
    color: int = 1
    pack_label: bool = False
    exact: bool = False
    keep_jpeg: Optional[bool] = None  # None: keep JPEG bytes unless an option asks for a change
    shards: int = 0
    shard_size: int = 0  # bytes
    shuffle: Optional[bool] = None  # None: True for folders, False for .lst files
    seed: int = 0
    val_ratio: float = 0.0
    on_error: str = "skip"
    resume: bool = False
    extensions: Tuple[str, ...] = DEFAULT_EXTENSIONS
    storage_options: Optional[dict] = None
    chunksize: Optional[int] = None
    flush_every: int = 256
    item_timeout: float = 60.0
    dask: Any = None
    limits: InputLimits = InputLimits()
    sources: bool = True  # write X.sources.jsonl: each record's file, size and SHA-256
    # keep what an interrupted run wrote (partial shards, the partition) for resume=True;
    # False: an interrupted or failed run leaves nothing behind (im2rec)
    resumable: bool = True
    labels_file: bool = True  # publish OUT.labels.json (the label map and the shard sizes)
    restart: Any = None  # restart markers: "auto", "off", MCU rows; None: DEFAULT_RESTART

    def __post_init__(self):
        _validate(self)

    @classmethod
    def from_kwargs(cls, **keywords) -> "PackOptions":
        """Options from ``pack_dataset``'s keywords; an unknown one raises TypeError with a
        "did you mean"."""
        check_keywords(keywords)
        return cls(**keywords)

    def replace(self, **changes) -> "PackOptions":
        """A copy with ``changes`` (checked and validated again)."""
        check_keywords(changes)
        return dataclasses.replace(self, **changes)

    def image_options(self) -> ImageOptions:
        """The per-image settings: JPEG bytes kept unless an option asks for a change (or
        ``keep_jpeg=False``), quality 95 unless given, ``.jpeg`` written as ``.jpg``."""
        keep_jpeg = self.keep_jpeg
        if keep_jpeg is None:
            keep_jpeg = not asks_for_change(self.resize, self.center_crop, self.quality,
                                            self.encoding, self.color)
        encoding = ".jpg" if self.encoding in (None, ".jpeg") else str(self.encoding)
        quality = 95 if self.quality is None else int(self.quality)
        return ImageOptions(bool(self.pass_through), int(self.resize or 0),
                            bool(self.center_crop), quality, encoding, int(self.color),
                            bool(self.pack_label), bool(self.exact), bool(keep_jpeg),
                            self.restart_name())

    def restart_name(self) -> str:
        """The restart markers the JPEGs written get: ``"off"`` (always with ``pass_through``),
        ``"auto"`` or MCU rows; ``restart=None`` is ``DEFAULT_RESTART`` where recpipe's libjpeg
        extension is built, else "off". ImportError for a policy asked for without it."""
        if self.pass_through:
            return "off"
        if self.restart is None:
            return RestartPolicy.name(DEFAULT_RESTART) if restarts_available() else "off"
        name = RestartPolicy.name(self.restart)
        if name != "off" and not restarts_available():
            raise ImportError(f"restart={self.restart!r} needs recpipe's libjpeg extension "
                              "(recpipe._batch): install the libjpeg-turbo headers (apt-get "
                              "install libjpeg62-turbo-dev) and reinstall recpipe, or pack with "
                              "restart='off'")
        return name


PACK_KEYWORDS = frozenset(field.name for field in dataclasses.fields(PackOptions))


def check_keywords(keywords) -> None:
    """Raise TypeError naming the first keyword that is not a ``PackOptions`` field, with the
    closest one as a hint."""
    for key in keywords:
        if key not in PACK_KEYWORDS:
            raise TypeError(f"pack_dataset got an unknown keyword {key!r}"
                            f"{did_you_mean(key, PACK_KEYWORDS)}")


def _validate(o: PackOptions) -> None:
    check_on_error(o.on_error, PACK_ON_ERROR)
    if o.encoding not in ENCODINGS:
        raise ValueError(f"encoding must be .jpg or .png, got {o.encoding!r}")
    if o.color not in (-1, 0, 1):
        raise ValueError(f"color must be -1, 0 or 1, got {o.color!r}")
    if o.encoding != ".png" and o.quality is not None and not 0 <= o.quality <= 100:
        raise ValueError(f"JPEG quality must be in 0..100, got {o.quality}")
    if o.resume and not o.resumable:
        raise ValueError("resume=True needs resumable=True (a run that keeps what it wrote)")
    if o.pass_through and o.restart is not None and RestartPolicy.parse(o.restart) is not None:
        raise ValueError(f"pass_through stores every file's bytes as they are: it cannot add "
                         f"restart markers (restart={o.restart!r}); drop one of the two")
    if o.workers is not None and o.workers < 0:
        raise ValueError(f"workers must be >= 0, got {o.workers}")
    _check_counts(o)
    if not isinstance(o.limits, InputLimits):
        raise ValueError(f"limits must be an InputLimits, got {o.limits!r}")
    o.image_options()  # its own checks (resize, ...)


def _check_counts(o: PackOptions) -> None:
    if o.shards is not None and o.shards < 0:
        raise ValueError(f"shards must be >= 0 (0: the runner's default), got {o.shards}")
    if o.shard_size is not None and o.shard_size < 0:
        raise ValueError(f"shard_size must be >= 0 bytes (0: no size cut), got {o.shard_size}")
    val_ratio = float(o.val_ratio or 0.0)
    if not 0.0 <= val_ratio < 1.0:
        raise ValueError(f"val_ratio must be in [0, 1), got {o.val_ratio}")
    if o.chunksize is not None and o.chunksize < 1:
        raise ValueError(f"chunksize must be >= 1, got {o.chunksize}")
    if o.flush_every < 1:
        raise ValueError(f"flush_every must be >= 1, got {o.flush_every}")
    if not o.item_timeout > 0:
        raise ValueError(f"item_timeout must be > 0 seconds, got {o.item_timeout}")
    if isinstance(o.extensions, str):
        raise ValueError(f"extensions must be a sequence of endings like ('.jpg',), got "
                         f"{o.extensions!r}")
