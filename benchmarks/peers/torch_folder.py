"""Peer runner: PyTorch DataLoader over torchvision ImageFolder (run by .venv-peers' python).

``--threads N`` = ``num_workers=N`` worker processes (``persistent_workers=True``, so epoch
turns cost no respawn). Train: RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor ->
uint8 NCHW batches. Val: Resize(256) + CenterCrop(224) + PILToTensor. ``--dtype float32`` adds
ToDtype(scale) + Normalize.
"""

from _common import IMAGENET_MEAN, IMAGENET_STD, measure, parse_args, thread_count

TORCH_DEFAULT_WORKERS = 0  # DataLoader's own default: load in the main process


def build_transform(spec, dtype):
    import torch
    from torchvision import transforms

    if spec["name"] == "train":
        steps = [transforms.RandomResizedCrop(spec["size"], scale=spec["area"],
                                              ratio=spec["aspect"]),
                 transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(spec["resize"]), transforms.CenterCrop(spec["size"])]
    steps.append(transforms.PILToTensor())
    if dtype == "float32":
        steps += [transforms.ConvertImageDtype(torch.float32),
                  transforms.Normalize([m / 255 for m in IMAGENET_MEAN],
                                       [s / 255 for s in IMAGENET_STD])]
    return transforms.Compose(steps)


def main():
    args = parse_args("time torch DataLoader + torchvision ImageFolder")
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    torch.manual_seed(args.seed)
    requested = thread_count(args)
    workers = TORCH_DEFAULT_WORKERS if requested is None else requested
    transform = build_transform(args.config_spec, args.dtype)
    dataset = ImageFolder(args.folder, transform=transform)
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=False, num_workers=workers,
                        drop_last=True, persistent_workers=workers > 0)
    state = {"iterator": iter(loader)}

    def fetch():
        try:
            return next(state["iterator"])
        except StopIteration:
            state["iterator"] = iter(loader)
            return next(state["iterator"])

    def consume(batch):
        images, _labels = batch
        probe = images[:, :, images.shape[2] // 2, images.shape[3] // 2]
        return images.shape[0], int(probe.to(torch.int64).sum())

    used = {"num_workers": workers, "persistent_workers": workers > 0, "drop_last": True,
            "transform": repr(transform).replace("\n", ""), "images_in_folder": len(dataset),
            "decoder": "PIL (ImageFolder default_loader)", "torch": torch.__version__,
            "torchvision": torchvision.__version__}
    measure(args, fetch, consume, contender="torch", used=used, threads_used=workers)


if __name__ == "__main__":
    main()
