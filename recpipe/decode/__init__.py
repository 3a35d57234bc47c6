"""Multi-threaded JPEG decode and ImageRecordIter-style augmentation into numpy batches."""

from .augment import AugmentConfig, Augmenter
from .decoders import available_decoders, get_decoder
from .epoch import Batch
from .loader import ImageLoader
from .options import LoaderOptions
from .records import RecordDecoder

__all__ = ["AugmentConfig", "Augmenter", "Batch", "ImageLoader", "LoaderOptions", "RecordDecoder",
           "available_decoders", "get_decoder"]
