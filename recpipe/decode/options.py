"""``LoaderOptions``: everything an ``ImageLoader`` is asked to do, frozen and validated before
any file is opened.

``LoaderOptions.from_kwargs(batch_size, data_shape, **keywords)`` takes the loader's own
keywords and ImageRecordIter's augmentation keywords (into ``augment``, an ``AugmentConfig``);
a misspelt keyword gets a "did you mean" over both (``shufle`` -> ``shuffle``).
``recpipe.mx.record_iter`` and ``recpipe.torch`` build one and hand it to ``ImageLoader(url,
options=...)`` instead of keeping their own keyword lists (``LOADER_KEYWORDS`` says which keywords
exist).
"""

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Hashable, Optional, Sequence, Union

from ..errors import ON_ERROR, check_on_error
from ..spelling import did_you_mean
from .augment import AUGMENT_KEYWORDS, UNSUPPORTED_KEYWORDS, AugmentConfig
from .decoders import DEFAULT_MAX_PIXELS, DEFAULT_MAX_SCANS, get_decoder
from .order import check_batching, check_parts

__all__ = ["LoaderOptions", "LOADER_KEYWORDS", "ON_ERROR", "INTEGRITY", "check_keywords",
           "decoder_for"]

# how far a read checks that a record is what was packed: "off" (no sums), "auto" (the
# checksum sidecar's CRC32C where one exists; libjpeg warnings are errors), "strict" (auto, and
# the rest of each JPEG scan is entropy-decoded so whatever a full decode flags is caught)
INTEGRITY = ("off", "auto", "strict")


@dataclass(frozen=True)
class LoaderOptions:
    """An ``ImageLoader``'s settings (see ``ImageLoader`` for what each one does).

    ``augment`` None (``from_kwargs`` with ``data_shape=None``) means whole decoded images,
    no augmentation: ``recpipe.torch.RecordDataset`` serves those; ``ImageLoader`` refuses it.
    """

    batch_size: int
    augment: Optional[AugmentConfig]
    threads: Union[int, str] = "auto"
    shuffle: Union[bool, str] = False
    seed: int = 0
    aug_seed: Optional[int] = None
    part_index: int = 0
    num_parts: int = 1
    last_batch: str = "pad"
    label_width: int = 1
    on_error: str = "raise"
    prefetch: int = 2
    decoder: str = "auto"
    fast_dct: bool = False
    fast_upsample: bool = False
    timeout: float = 300.0
    trace: bool = False
    lookahead: bool = True
    run_bytes: int = 8 << 20
    # index keys to serve, as given (a list or array of millions is not copied)
    keys: Optional[Sequence[Hashable]] = field(default=None, compare=False, repr=False)
    max_pixels: Optional[int] = DEFAULT_MAX_PIXELS
    integrity: str = "auto"
    max_scans: Optional[int] = DEFAULT_MAX_SCANS
    # a file the loader appends one JSON line to per delivered batch (recpipe.decode.provenance)
    provenance: Optional[str] = None
    # label(header, position) instead of the header's labels (e.g. recpipe.mx.record_iter's imglist)
    label_rule: Optional[Callable] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        _validate(self)

    @classmethod
    def from_kwargs(cls, batch_size: int, data_shape: Optional[Sequence[int]], *, dtype=None,
                    layout="NCHW", **keywords) -> "LoaderOptions":
        """Options from ``ImageLoader``'s keywords; augmentation keywords go to ``augment``
        (``dtype`` None: float32 when normalising, else uint8). ``data_shape`` None: no
        augmentation (whole images), and no augmentation keyword may be given."""
        check_keywords(keywords)
        own = {k: v for k, v in keywords.items() if k in _FIELDS}
        augment = {k: v for k, v in keywords.items() if k not in _FIELDS}
        if data_shape is None:
            if augment:
                raise ValueError(f"augmentation keywords {sorted(augment)} need data_shape")
            return cls(batch_size=batch_size, augment=None, **own)
        config = AugmentConfig.from_kwargs(data_shape=data_shape, dtype=dtype,
                                           layout=layout, **augment)
        return cls(batch_size=batch_size, augment=config, **own)

    def replace(self, **changes) -> "LoaderOptions":
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def augment_seed(self) -> int:
        """The seed of the augmentation's random stream (``aug_seed``, else ``seed``)."""
        return self.seed if self.aug_seed is None else self.aug_seed


_FIELDS = frozenset(f.name for f in dataclasses.fields(LoaderOptions)) - {"augment",
                                                                          "batch_size"}
# every keyword ImageLoader takes besides url, batch_size, data_shape, index_url and
# storage_options: its own, dtype/layout, and the augmentation keywords
LOADER_KEYWORDS = frozenset(_FIELDS | {"dtype", "layout"} | set(AUGMENT_KEYWORDS))


def check_keywords(keywords, owner: str = "ImageLoader", also: Sequence[str] = ()) -> None:
    """A keyword that is neither an augmentation keyword nor one of ImageLoader's (nor one of
    ``also``, ``owner``'s own) gets a ValueError with a "did you mean" naming the closest."""
    unknown = [key for key in keywords if key not in LOADER_KEYWORDS
               and key not in UNSUPPORTED_KEYWORDS and key not in also]
    if not unknown:
        return
    key = unknown[0]
    names = sorted(LOADER_KEYWORDS | {"index_url", "storage_options"} | set(also))
    raise ValueError(f"{owner} got an unknown keyword {key!r}{did_you_mean(key, names)}: "
                     f"not an {owner} argument nor an ImageRecordIter augmentation keyword")


def decoder_for(options: LoaderOptions):
    """The decoder ``options`` ask for: backend, DCT/upsampling shortcuts, pixel and scan
    limits, integrity."""
    o = options
    return get_decoder(o.decoder, fast_dct=o.fast_dct, fast_upsample=o.fast_upsample,
                       max_pixels=o.max_pixels, integrity=o.integrity, max_scans=o.max_scans)


def _validate(o):
    if o.augment is not None and not isinstance(o.augment, AugmentConfig):
        raise ValueError(f"augment={o.augment!r}: expected an AugmentConfig (or None)")
    if o.label_rule is not None and not callable(o.label_rule):
        raise ValueError(f"label_rule={o.label_rule!r}: expected label_rule(header, position)")
    check_on_error(o.on_error)
    if o.integrity not in INTEGRITY:
        raise ValueError(f"integrity={o.integrity!r}: expected one of {INTEGRITY}")
    if o.label_width < 1:
        raise ValueError(f"label_width={o.label_width} must be at least 1")
    if o.prefetch < 1:
        raise ValueError(f"prefetch={o.prefetch} must be at least 1")
    if o.threads != "auto" and (not isinstance(o.threads, int) or isinstance(o.threads, bool)
                                or o.threads < 1):
        raise ValueError(f"threads={o.threads!r}: expected 'auto' or a number >= 1")
    if o.timeout <= 0:
        raise ValueError(f"timeout={o.timeout} must be positive")
    if o.run_bytes < 1:
        raise ValueError(f"run_bytes={o.run_bytes} must be at least 1")
    if o.max_pixels is not None and o.max_pixels < 1:
        raise ValueError(f"max_pixels={o.max_pixels!r} must be >= 1 (or None: no limit)")
    if o.max_scans is not None and (isinstance(o.max_scans, bool)
                                    or not isinstance(o.max_scans, int)
                                    or not 1 <= o.max_scans < 1 << 31):
        raise ValueError(f"max_scans={o.max_scans!r} must be a number >= 1 (or None: no limit)")
    if o.shuffle not in (False, True, None, "none", "full", "block"):
        raise ValueError(f"shuffle={o.shuffle!r}: expected False, True, 'full' or 'block'")
    for name in ("seed", "aug_seed"):
        value = getattr(o, name)
        if value is not None and value < 0:
            raise ValueError(f"{name}={value} must be >= 0")
    if o.provenance is not None and (not isinstance(o.provenance, (str, os.PathLike))
                                     or not os.fspath(o.provenance)):
        raise ValueError(f"provenance={o.provenance!r}: expected a file path or None")
    check_batching(o.batch_size, o.last_batch)
    check_parts(o.part_index, o.num_parts)
