"""``recpipe replay LOG --batch N --out DIR``: a logged batch again, as image files and .npy."""

import os
import sys

from ..image.opencv import load_cv2
from .options import add_storage_options, storage_options

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "replay", help="rebuild a delivered batch from a provenance log (images + .npy)",
        description="Rebuild batch N of a run from the provenance log an ImageLoader wrote "
                    "(provenance=PATH): the same records, crops and pixels. Writes DIR/images.npy "
                    "and DIR/labels.npy (the arrays as delivered) and one image file per sample "
                    "(float images are stretched to 0..255 per image for viewing).")
    p.add_argument("log", metavar="LOG", help="the provenance log (JSON lines)")
    p.add_argument("--batch", type=int, required=True, help="batch index within the epoch")
    p.add_argument("--epoch", type=int, default=None,
                   help="epoch (default: the last epoch that logged the batch)")
    p.add_argument("--options", default=None, metavar="DIGEST",
                   help="the options digest of one loader, when several logged the batch")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--image-format", choices=("png", "jpg"), default="png",
                   help="file format of the per-sample images (default: png)")
    p.add_argument("--rec", default=None, metavar="REC",
                   help="the .rec where it is now, when it moved or was copied since the log "
                        "was written (default: the absolute path the log keeps); it must be "
                        "the same file: size, first and last 64 KiB and .sums digest are "
                        "checked")
    p.add_argument("--idx", default=None, metavar="IDX",
                   help="its .idx, when not beside --rec")
    p.add_argument("--no-check", action="store_true",
                   help="replay even when the file is not the one the log was written from")
    add_storage_options(p)
    p.set_defaults(func=run)


def _viewable(image):
    """An HxWxC uint8 BGR image of one sample (CHW or HWC, any dtype)."""
    import numpy as np

    if image.ndim == 3 and image.shape[0] in (1, 3) and image.shape[-1] not in (1, 3):
        image = image.transpose(1, 2, 0)
    if image.dtype != np.uint8:
        low, high = float(image.min()), float(image.max())
        image = ((image - low) * (255.0 / max(high - low, 1e-12))).round().astype(np.uint8)
    return np.ascontiguousarray(image[..., ::-1] if image.shape[-1] == 3 else image)


def run(args):
    cv2 = load_cv2()
    import numpy as np

    from ..decode.replay import replay

    batch = replay(args.log, args.batch, args.epoch, options=args.options,
                   storage_options=storage_options(args), check_file=not args.no_check,
                   rec=args.rec, index=args.idx)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "images.npy"), batch.images)
    np.save(os.path.join(args.out, "labels.npy"), batch.labels)
    labels = batch.labels.reshape(len(batch.labels), -1)
    for slot, (image, position) in enumerate(zip(batch.images, batch.positions)):
        name = f"{slot:04d}-record{int(position)}-label{labels[slot][0]:g}.{args.image_format}"
        ok, data = cv2.imencode("." + args.image_format, _viewable(image))
        if not ok:
            raise ValueError(f"cannot encode sample {slot} as {args.image_format}")
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data.tobytes())
    print(f"batch {args.batch}: {len(batch.images)} samples (pad {batch.pad}) written to "
          f"{args.out}: images.npy {batch.images.shape} {batch.images.dtype}, labels.npy, "
          f"{len(batch.images)} .{args.image_format} files", file=sys.stdout)
    return 0
