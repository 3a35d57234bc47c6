"""``recpipe bench``'s measurements as a suite: bare full-size decoding against the loader's
pipeline (train, val, faces) at each thread count, and, at one decode thread, the GIL-held time
per image of every ImageRecordIter recipe users run (the loader's own counter: worker CPU
outside GIL-releasing C calls, what caps one process at any core count).

The contenders are ``recpipe.decode.bench.bare_decode`` and ``pipeline_rate``, the functions
``recpipe bench`` runs, so the two agree. Data: the photos packed pass-through (train, val and
the recipes), 112x112 face crops of them (faces), 32x32 crops (CIFAR).
"""

import os

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

NORM = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)
FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5,
                 std_b=127.5)
TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
             rand_mirror=True)
VAL = dict(data_shape=(3, 224, 224), resize=256)
# MXNet's example/image-classification/common/data.py, --aug-level 3 (ImageRecordIter names)
AUG_LEVEL_3 = dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                   max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                   random_h=36, random_s=50, random_l=50)

# recipe -> (data, loader keywords)
RECIPES = {
    "faces": ("faces", dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="float32",
                            **FACE_NORM)),
    "train": ("photos", dict(TRAIN, dtype="uint8")),
    "val": ("photos", dict(VAL, dtype="uint8")),
    "aug level 3": ("photos", dict(AUG_LEVEL_3, dtype="uint8")),
    "aug level 3 without HLS": ("photos", dict(
        {k: v for k, v in AUG_LEVEL_3.items() if not k.startswith("random_")}, dtype="uint8")),
    "CIFAR pad 4": ("cifar", dict(data_shape=(3, 28, 28), pad=4, rand_crop=True,
                                  rand_mirror=True, dtype="float32", **NORM)),
    "PCA + colour jitter": ("photos", dict(TRAIN, brightness=0.4, contrast=0.4, saturation=0.4,
                                           pca_noise=0.1, dtype="float32", **NORM)),
    "float16": ("photos", dict(TRAIN, dtype="float16", **NORM)),
    "gray": ("photos", dict(data_shape=(1, 224, 224), resize=256, dtype="uint8")),
    "HLS": ("photos", dict(VAL, random_h=36, random_s=50, random_l=50, dtype="uint8")),
    "contrast/illumination": ("photos", dict(VAL, max_random_contrast=0.3,
                                             max_random_illumination=20, dtype="float32",
                                             **NORM)),
    "area (inter_method=3)": ("photos", dict(VAL, inter_method=3, dtype="uint8")),
    "cubic (inter_method=2)": ("photos", dict(VAL, inter_method=2, dtype="uint8")),
    "random (inter_method=10)": ("photos", dict(TRAIN, inter_method=10, dtype="uint8")),
}


def make_cifar(rec, photos_rec, count=5000):
    """``rec``: ``count`` 32x32 JPEGs (CIFAR-sized) cut from the photos of ``photos_rec``."""
    import cv2
    import numpy as np

    import recpipe

    if os.path.exists(rec):
        return rec
    rng = np.random.default_rng(0)
    with recpipe.RecordReader(photos_rec) as reader, \
            recpipe.RecordWriter(rec, rec[:-4] + ".idx") as writer:  # published whole
        for i in range(count):
            header, jpeg = recpipe.unpack(reader[i % len(reader)])
            img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            h, w = img.shape[:2]
            side = int(min(h, w) * rng.uniform(0.5, 1.0))
            y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            small = cv2.resize(img[y:y + side, x:x + side], (32, 32),
                               interpolation=cv2.INTER_AREA)
            jpeg = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(header.label), i, 0), jpeg),
                         key=i)
    return rec


@suite
class Decode(Suite):
    name = "decode"
    title = "Decoding: the loader's pipeline against bare decoding, and the GIL per recipe"
    grid = {"threads": (1, 2)}
    options = {"configs": "train,val,faces", "recipes": ",".join(RECIPES), "seconds": 1.0,
               "batch_size": 128, "dtype": "uint8", "decoder": "auto", "photos": 1000,
               "faces": 3000}
    quick = {"threads": (1,), "configs": "train", "recipes": "faces,val", "seconds": 0.2,
             "photos": 200, "faces": 300}
    repeats = 3
    warmup = 0  # pipeline_rate warms every run up itself

    def prepare(self):
        from recpipe.decode.bench import load_images

        photos = data.photos_rec(self.work.parent / "data", self.options["photos"])
        recs = {"photos": photos}
        wanted = {RECIPES[r][0] for r in self._recipes()}
        if "faces" in self._configs() or "faces" in wanted:
            recs["faces"] = data.faces_rec(self.work.parent / "data", self.options["faces"])
        if "cifar" in wanted:
            recs["cifar"] = make_cifar(str(self.work / "cifar.rec"), photos)
        self.recs = recs
        self.images = load_images(photos, limit=512)
        described = data.describe_rec(photos, "the photos packed pass-through")
        sizes = {k: data.describe_rec(v, k)["description"] for k, v in recs.items()}
        return {"description": "; ".join(sizes.values()) + " (bare decode: the first "
                f"{len(self.images)} photos in memory)", "records": described["records"]}

    def _configs(self):
        return [c for c in self.options["configs"].split(",") if c]

    def _recipes(self):
        unknown = [r for r in self.options["recipes"].split(",") if r and r not in RECIPES]
        if unknown:
            raise ValueError(f"unknown recipes {unknown}: choose from {list(RECIPES)}")
        return [r for r in self.options["recipes"].split(",") if r]

    def contenders(self, point):
        from recpipe.decode import bench

        threads, o = point["threads"], self.options
        found = {"bare decode": lambda: bench.bare_decode(
            self.images, threads, decoder=o["decoder"], seconds=o["seconds"])}
        for name in self._configs():
            rec = self.recs["faces" if name == "faces" else "photos"]
            found[f"{name} pipeline"] = self._pipeline(rec, bench.CONFIGS[name], threads,
                                                       o["dtype"])
        if threads == 1:
            for recipe in self._recipes():
                source, settings = RECIPES[recipe]
                settings = dict(settings)
                dtype = settings.pop("dtype")
                found[f"recipe: {recipe}"] = self._pipeline(self.recs[source], settings, 1,
                                                            dtype)
        return found

    def _pipeline(self, rec, config, threads, dtype):
        from recpipe.decode import bench

        o = self.options

        def run():
            result = bench.pipeline_rate(rec, config, threads, batch_size=o["batch_size"],
                                         seconds=o["seconds"], dtype=dtype,
                                         decoder=o["decoder"])
            result.pop("trace", None)
            stages = result.pop("stage_ms_per_image")
            result.update({f"stage_ms.{k}": v for k, v in stages.items()})
            return result
        return run

    def ratios(self, point):
        return [Ratio(f"{name} vs bare decode", f"{name} pipeline", "bare decode")
                for name in self._configs()]

    def facts(self, point):
        if point["threads"] != 1:
            return {}
        from recpipe.decode.loader import ImageLoader

        native = {}
        for recipe in self._recipes():
            source, settings = RECIPES[recipe]
            settings = dict(settings)
            shape = settings.pop("data_shape")
            with ImageLoader(self.recs[source], 8, shape, threads=1, **settings) as loader:
                native[recipe] = bool(loader.records.native)
        return {"native": native}

    @classmethod
    def tables(cls, result):
        rows = []
        for p in result["points"]:
            threads = p["params"]["threads"]
            rows.append([f"bare full-size decode, {threads} thr",
                         fmt(figure(p, "bare decode", "images_per_s")), "1.00x",
                         fmt(figure(p, "bare decode", "cpu_ms_per_image"), 2), ""])
            for name in [n[:-len(" pipeline")] for n in p["contenders"]
                         if n.endswith(" pipeline")]:
                key = f"{name} pipeline"
                rows.append([f"{name} pipeline, {threads} thr",
                             fmt(figure(p, key, "images_per_s")),
                             fmt_ratio(ratio(p, f"{name} vs bare decode")),
                             fmt(figure(p, key, "cpu_ms_per_image"), 2),
                             fmt(figure(p, key, "gil_us_per_image"), 1)])
        tables = [Table(
            "The loader's pipeline against bare full-size decoding (what `recpipe bench` measures)",
            ["measurement", "images/s", "vs bare decode", "CPU ms/image", "GIL us/image"], rows,
            notes="Bare decode: threads decoding the in-memory JPEGs at full size, nothing "
                  "else. Pipelines: `ImageLoader` (train = random-resized crop 224 + mirror, "
                  "val = resize 256 + centre crop 224, faces = 112x112 + mirror), batch "
                  f"{result['options']['batch_size']}, {result['options']['dtype']}; the "
                  "pipeline can beat bare decoding because it decodes only the crop's region, "
                  "at a reduced DCT scale where the output allows.")]
        one = next((p for p in result["points"] if p["params"]["threads"] == 1), None)
        recipes = [n for n in (one or {"contenders": {}})["contenders"]
                   if n.startswith("recipe: ")]
        if recipes:
            native = one["facts"].get("native", {})
            rows = [[name[len("recipe: "):], fmt(figure(one, name, "gil_us_per_image"), 1),
                     fmt(figure(one, name, "images_per_s")),
                     "yes" if native.get(name[len("recipe: "):]) else "no"]
                    for name in recipes]
            tables.append(Table(
                "GIL-held time per image, every recipe (1 decode thread)",
                ["recipe", "library us", "images/s", "native"], rows,
                notes="`library us`: the loader's own counter (worker CPU outside "
                      "GIL-releasing C calls) per image, which caps one process at any core "
                      "count; `native`: the recipe's runs go to `recpipe._batch`. The probes "
                      "that measured the GIL from outside the library are in "
                      "`experiments/` (GIL probes).",
                chart="library us", chart_title="GIL-held microseconds per image",
                headline=True))
        return tables
