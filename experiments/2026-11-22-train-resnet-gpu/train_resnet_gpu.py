"""Train torchvision ResNet-50 on CUDA fed by recpipe, with ``threads="auto"`` and fixed threads.

Three measurements in one run, compared as ratios (docs/autotune.md, section 6B):

1. synthetic: the same model and batch on random tensors already on the GPU (the ceiling);
2. a fixed-thread sweep: ``ImageLoader(threads=n)`` for each ``--fixed`` n;
3. autotune: ``ImageLoader(threads="auto")``, plus its report (final threads, reason, history).

Each training step copies the uint8 NCHW batch to the GPU, normalises it there, runs forward,
backward and an SGD step, and synchronises (``loss.item()``), so the loader's wait is the GPU
waiting for input. Images/s is measured after ``--warmup`` steps over ``--seconds``.

    python experiments/2026-11-22-train-resnet-gpu/train_resnet_gpu.py \\
        --rec .bench/data/photos-1000.rec --fixed 2,4,8,12,16 \\
        --json out/train_resnet_gpu.json

Needs torch and torchvision with CUDA; exits with status 2 and a message when they are missing.
"""

import argparse
import json
import os
import sys
import time


def require_cuda():
    """torch, torchvision, or exit(2) with a clear message."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        _fail(f"needs torch and torchvision ({e.name} is missing): pip install torch torchvision")
    if not torch.cuda.is_available():
        _fail("CUDA is not available (no GPU, or a CPU-only torch build); run this on a machine "
              "with an NVIDIA GPU")
    return torch, torchvision


def _fail(message):
    print(f"train_resnet_gpu: {message}", file=sys.stderr)
    sys.exit(2)


class Trainer:
    """ResNet-50, SGD, optional AMP and channels-last; ``step(images_u8, labels)``."""

    def __init__(self, torch, torchvision, batch, amp, channels_last):
        self.torch = torch
        self.device = torch.device("cuda")
        self.model = torchvision.models.resnet50(num_classes=1000).to(self.device)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = self.model.to(memory_format=self.memory_format)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.amp = amp
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)
        mean = torch.tensor([0.485, 0.456, 0.406], device=self.device).view(1, 3, 1, 1) * 255
        std = torch.tensor([0.229, 0.224, 0.225], device=self.device).view(1, 3, 1, 1) * 255
        self.mean, self.std = mean, std
        self.batch = batch

    def step_gpu(self, images, labels):
        """One step on tensors already on the GPU (uint8 images)."""
        torch = self.torch
        x = ((images.float() - self.mean) / self.std).contiguous(memory_format=self.memory_format)
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.amp):
            loss = self.loss_fn(self.model(x), labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()  # synchronises: the step is done when this returns

    def step_host(self, images, labels):
        torch = self.torch
        x = torch.from_numpy(images).to(self.device, non_blocking=True)
        y = torch.from_numpy(labels).to(self.device, non_blocking=True).long() % 1000
        return self.step_gpu(x, y)


def timed(step_fn, batches, warmup, seconds):
    """Images/s over ``seconds`` after ``warmup`` steps; ``batches`` yields (images, labels)."""
    for _ in range(warmup):
        step_fn(*next(batches))
    start = time.perf_counter()
    images = 0
    while time.perf_counter() - start < seconds:
        batch = next(batches)
        step_fn(*batch)
        images += len(batch[0])
    return images / (time.perf_counter() - start)


def endless(loader):
    while True:
        yield from loader


def synthetic(trainer, batch, args):
    torch = trainer.torch
    images = torch.randint(0, 256, (batch, 3, 224, 224), dtype=torch.uint8, device="cuda")
    labels = torch.randint(0, 1000, (batch,), device="cuda")

    def batches():
        while True:
            yield images, labels

    return timed(trainer.step_gpu, batches(), args.warmup, args.seconds)


def recpipe_run(trainer, args, threads):
    import recpipe
    from recpipe.decode.bench import TRAIN

    settings = dict(TRAIN)
    shape = settings.pop("data_shape")
    with recpipe.ImageLoader(args.rec, args.batch, shape, threads=threads, shuffle=True,
                             **settings) as loader:
        rate = timed(trainer.step_host, endless(loader), args.warmup, args.seconds)
        stats = loader.stats()
        report = loader.autotune_report()
    result = {"threads": threads, "images_per_s": rate, "wait_fraction": stats["wait_fraction"]}
    if report is not None:
        result["autotune"] = report
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rec", default=".bench/data/photos-1000.rec",
                        help="RecordIO file (`python -m benchmarks autotune` packs one under "
                             ".bench/data/)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--fixed", default="1,2,4,8,12,16", help="comma list of fixed threads")
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per run")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per run")
    parser.add_argument("--no-amp", dest="amp", action="store_false")
    parser.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    torch, torchvision = require_cuda()
    if not os.path.exists(args.rec):
        _fail(f"{args.rec} not found (`python -m benchmarks autotune` packs the photos "
              f"there)")
    torch.backends.cudnn.benchmark = True  # this script's own process; the library never does
    trainer = Trainer(torch, torchvision, args.batch, args.amp, args.channels_last)
    results = {"device": torch.cuda.get_device_name(), "batch": args.batch, "amp": args.amp,
               "cpu_cores": len(os.sched_getaffinity(0)), "rec": args.rec}
    print("synthetic (data already on the GPU)...", file=sys.stderr, flush=True)
    results["synthetic_images_per_s"] = synthetic(trainer, args.batch, args)
    results["fixed"] = []
    for n in [int(x) for x in args.fixed.split(",") if x]:
        print(f"recpipe, {n} fixed threads...", file=sys.stderr, flush=True)
        results["fixed"].append(recpipe_run(trainer, args, n))
    print("recpipe, threads='auto'...", file=sys.stderr, flush=True)
    results["auto"] = recpipe_run(trainer, args, "auto")
    best = max(results["fixed"], key=lambda r: r["images_per_s"])
    auto = results["auto"]
    results["auto_vs_best_fixed"] = auto["images_per_s"] / best["images_per_s"]
    results["auto_vs_synthetic"] = auto["images_per_s"] / results["synthetic_images_per_s"]
    print(f"{results['device']}, ResNet-50, batch {args.batch}, AMP {args.amp}")
    print(f"  synthetic        {results['synthetic_images_per_s']:8.1f} images/s")
    for r in results["fixed"]:
        print(f"  fixed {r['threads']:3d} threads {r['images_per_s']:8.1f} images/s "
              f"(wait {r['wait_fraction']:.0%})")
    report = auto["autotune"]
    print(f"  auto -> {report['threads']:2d} threads {auto['images_per_s']:8.1f} images/s "
          f"({report['reason']}; {results['auto_vs_best_fixed']:.2f}x best fixed "
          f"[{best['threads']} threads], {results['auto_vs_synthetic']:.2f}x synthetic)")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
