"""What this installation can do and what it is missing: ``recpipe doctor``.

``diagnose()`` returns a JSON-ready dict: the decoders that are live and which one ``"auto"``
picks, the C extensions built (the libjpeg one, ``_batch``: region decoder and GIL-free runs;
the required fused resize, colour jitter and CRC32C ones), whether
libjpeg-turbo was found and how to get it, the fsspec protocols whose clients import, usable
cores (affinity, cgroup quota, this rank's share), library versions, the recpipe environment
variables that are set, and, measured on a built-in sample, each decoder's rate and what the
missing fast paths cost; given files, whether each is protected by checksums (a ``.sums``
sidecar that describes it: ``recpipe.io.health.protection``). ``slow_paths(report)`` lists what is
missing, for the one-line hint of ``recpipe demo``.
"""

import importlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import sys
import tempfile
import time
from typing import List, Optional

from .. import __version__
from .._optional import extension
from ..image.opencv import SET_BY_RECPIPE, load_cv2
from ..io.health.protection import protection_of
from ..system.env import VARIABLES
from ..system.host import local_ranks, node_share, usable_cores

__all__ = ["INSTALL_HINTS", "diagnose", "measure_decoders", "slow_paths"]

log = logging.getLogger(__name__)

INSTALL_HINTS = {
    "libturbojpeg": "apt-get install libturbojpeg0 (Debian/Ubuntu), then nothing else",
    "_kernels": "a C compiler (apt-get install gcc python3-dev), then reinstall recpipe "
                "(it is required: this installation is incomplete)",
    "_resize": "a C compiler (apt-get install gcc python3-dev), then reinstall recpipe "
               "(it is required: this installation is incomplete)",
    "_colour": "a C compiler (apt-get install gcc python3-dev), then reinstall recpipe "
               "(it is required: this installation is incomplete)",
    "_batch": "apt-get install libjpeg62-turbo-dev (libjpeg-turbo8-dev on Ubuntu), then "
              "pip install -e . (or reinstall recpipe) so the extension is built",
    "simplejpeg": "pip install 'recpipe[turbo]'",
    "_crc32c": "a C compiler (apt-get install gcc python3-dev), then reinstall recpipe "
               "(it is required: this installation is incomplete)",
    "_plan": "a C compiler (apt-get install gcc python3-dev), then reinstall recpipe "
             "(it is required: this installation is incomplete)",
}
# URL schemes -> (the client that opens them, its recpipe extra); "protocol_clients" in the
# report names each present client's version, or how to install it
_PROTOCOLS = {"s3": "s3fs", "gs": "gcsfs", "az/abfs": "adlfs", "hdfs (arrow)": "pyarrow",
              "hdfs (native)": "hdfs_native", "http": "aiohttp"}
_PROTOCOL_EXTRAS = {"s3fs": "s3", "gcsfs": "gcs", "adlfs": "azure", "pyarrow": "hdfs",
                    "hdfs_native": "hdfs-native", "aiohttp": "s3"}


def _protocol_clients():
    clients = {}
    for name, module in _PROTOCOLS.items():
        version = _version(module) if _importable(module) else None
        clients[name] = f"{module} {version}" if version else \
            f"not installed: pip install 'recpipe[{_PROTOCOL_EXTRAS[module]}]'"
    return clients


def _importable(module):
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - any failure means the protocol is not usable here
        return False
    return True


def _version(module):
    try:
        return getattr(importlib.import_module(module), "__version__", "?")
    except ImportError:
        return None


def _installed_version(module):
    """The installed version of ``module`` without importing it (torch takes seconds), None
    when it is not installed."""
    if module in sys.modules:
        return _version(module)
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return "installed, not imported" if importlib.util.find_spec(module) else None


def _fast_paths():
    """``{name: present}`` of every optional fast path."""
    from ..decode.decoders import turbojpeg_available

    return {"_batch": extension("_batch") is not None,
            "_kernels": extension("_kernels") is not None,
            "_resize": extension("_resize") is not None,
            "_colour": extension("_colour") is not None,
            "_crc32c": extension("_crc32c") is not None,
            "_plan": extension("_plan") is not None,
            "libturbojpeg": turbojpeg_available(),
            "simplejpeg": _importable("simplejpeg")}


_DESCRIPTIONS = {
    "_kernels": "recpipe's pixels: the renderer both decode paths use (recpipe._kernels)",
    "_resize": "fused resize/crop/mirror/normalise into the batch (recpipe._resize)",
    "_colour": "fused colour jitter/PCA/normalise (recpipe._colour)",
    "_batch": "the libjpeg extension (recpipe._batch, links libjpeg-turbo): region + DCT-scaled "
              "JPEG decoder, and runs of records decoded into the batch without the GIL",
    "_crc32c": "hardware CRC32C of records against their .sums sidecar (recpipe._crc32c)",
    "_plan": "the one planner of both decode paths (recpipe._plan)",
    "libturbojpeg": "libjpeg-turbo's TurboJPEG library (the 'turbojpeg' decoder)",
    "simplejpeg": "simplejpeg (the 'simplejpeg' decoder)",
}


def measure_decoders(seconds=0.3, images=16):
    """Images/s of every live decoder on a built-in sample (480x360 JPEGs), one thread."""
    from ..decode.decoders import available_decoders, get_decoder
    from .sample import make_sample_images

    with tempfile.TemporaryDirectory(prefix="recpipe-doctor-") as folder:
        paths = make_sample_images(folder, classes=1, per_class=images)
        data = [open(p, "rb").read() for p in paths]
    rates = {}
    for name in available_decoders():
        decoder = get_decoder(name)
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            decoder.decode(data[count % len(data)])
            count += 1
        rates[name] = round(count / (time.perf_counter() - start), 1)
    return rates


def diagnose(measure: bool = True, files=()) -> dict:
    """The report as a JSON-ready dict (``measure=False`` skips the timed decode); ``files``:
    ``.rec`` files (any URL) whose checksum protection to report (``protection``: the
    ``recpipe.io.health.protection.protection_of`` of each)."""
    cv2 = load_cv2()
    import numpy as np

    from ..decode.decoders import available_decoders

    paths = _fast_paths()
    cores, source = usable_cores()
    share, share_source = node_share()
    ranks = local_ranks()
    report = {
        "recpipe": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {"numpy": np.__version__, "opencv": cv2.__version__,
                     "fsspec": _version("fsspec"), "simplejpeg": _version("simplejpeg"),
                     "torch": _installed_version("torch")},
        "decoders": {"live": available_decoders(), "auto": available_decoders()[0]},
        # recpipe's two build states: with its libjpeg extension (_batch) or without
        "build": "with libjpeg" if paths["_batch"] else "without libjpeg",
        "fast_paths": {name: {"present": present, "what": _DESCRIPTIONS[name],
                              **({} if present else {"install": INSTALL_HINTS[name]})}
                       for name, present in paths.items()},
        "protocols": {"file": True, "memory": True,
                      **{name: _importable(module) for name, module in _PROTOCOLS.items()}},
        "protocol_clients": _protocol_clients(),
        "cores": {"usable": cores, "source": source, "this_rank": share,
                  "this_rank_source": share_source, "local_rank": ranks.rank,
                  "local_ranks": ranks.size},
        # what the user set; recpipe's own defaults (set in os.environ for OpenCV) apart
        "environment": {name: os.environ[name] for name in VARIABLES
                        if name in os.environ and SET_BY_RECPIPE.get(name) != os.environ[name]},
        "set_by_recpipe": {name: value for name, value in SET_BY_RECPIPE.items()
                           if os.environ.get(name) == value},
    }
    if files:
        report["protection"] = {str(url): protection_of(str(url)) for url in files}
    if measure:
        rates = measure_decoders()
        report["decode_images_per_s"] = rates
        report["missing_cost"] = _missing_cost(rates, paths)
    return report


def _missing_cost(rates, paths):
    """What the missing fast paths cost here: the live decoder's rate against the fastest one
    measured, and for missing pieces, what they would bring (from BENCHMARKS.md)."""
    costs = {}
    auto = next(iter(rates))
    fastest = max(rates, key=rates.get)
    if rates[auto] < 0.8 * rates[fastest]:  # closer than that is timing noise
        costs["auto decoder"] = (
            f"{auto} (auto's choice) decoded {rates[auto]:.0f} images/s here, {fastest} "
            f"{rates[fastest]:.0f}. auto's order (turbojpeg, libjpeg, simplejpeg, opencv) is "
            "fixed, measured on whole pipelines, where region and DCT-scaled decodes count; "
            "this is one thread decoding the sample's whole images, and a busy machine adds "
            f"noise. For your data compare `recpipe bench FILE --decoder {fastest}` with "
            f"`--decoder auto`, and pass decoder='{fastest}' to the loaders (or --decoder to "
            "the commands) if it is faster there")
    if auto == "opencv" and "opencv" in rates:
        costs["decoder"] = (f"only OpenCV decodes here ({rates['opencv']:.0f} images/s on the "
                            "sample): libjpeg-turbo's region and DCT-scaled decode typically "
                            "make the train pipeline 1.5-2.5x faster (BENCHMARKS.md)")
    for name in ("_kernels", "_resize", "_colour", "_plan"):  # required: recpipe was not built
        if not paths.get(name, True):
            costs[name] = ("recpipe is not fully built: augmentations fail with ImportError "
                           "until it is (python setup.py build_ext --inplace, or reinstall)")
    if not paths["_batch"]:
        costs["_batch"] = ("every JPEG is decoded whole: random crops decode 1.2-2x more "
                           "pixels than they use (BENCHMARKS.md, region decoding); and every "
                           "sample is read, planned and dispatched by Python: ~50-60 us "
                           "of GIL-held work a sample, at most ~16-19k images/s on any core "
                           "count (BENCHMARKS.md, small images)")
    if not paths.get("_crc32c", True):
        costs["_crc32c"] = ("recpipe is not fully built: reading a pack with a .sums "
                            "sidecar fails with ImportError until it is")
    return costs


def slow_paths(report: Optional[dict] = None) -> List[str]:
    """Names of the missing fast paths (empty when this installation has them all)."""
    paths = _fast_paths() if report is None else {
        name: info["present"] for name, info in report["fast_paths"].items()}
    missing = [name for name in ("_batch", "_kernels", "_resize", "_colour")
               if not paths[name]]
    if not paths["_batch"] and not paths["libturbojpeg"]:
        missing.append("libjpeg-turbo")
    return missing
