"""recpipe.system.distributed.detect_rank, and several loaders acting as the ranks of one job."""

import sys

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode.loader import ImageLoader
from recpipe.decode.order import epoch_order
from recpipe.system.distributed import ENV_PAIRS, RankInfo, detect_rank
from recpipe.io import IRHeader, pack

N_IMAGES = 23


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("ranks") / "tiny.rec")
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            img = rng.integers(0, 256, (12, 14, 3), dtype=np.uint8)
            writer.write(pack(IRHeader(0, float(i), i, 0), cv2.imencode(".png", img)[1].tobytes()))
    return url


# -- detect_rank ------------------------------------------------------------------------------


def test_explicit_values_win():
    assert detect_rank(2, 4, environ={"RANK": "0", "WORLD_SIZE": "8"}) == RankInfo(2, 4, "explicit")


def test_nothing_set_is_rank_zero_of_one():
    assert detect_rank(environ={}) == RankInfo(0, 1, "default")


@pytest.mark.parametrize("rank_name, size_name, launcher", ENV_PAIRS)
def test_each_launchers_variables(rank_name, size_name, launcher):
    info = detect_rank(environ={rank_name: "3", size_name: " 5 ", "UNRELATED": "x"})
    assert (info.rank, info.world_size) == (3, 5)
    assert rank_name in info.source


def test_torchrun_variables_come_before_horovod_and_mpi():
    environ = {"RANK": "1", "WORLD_SIZE": "2", "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4",
               "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6"}
    assert detect_rank(environ=environ)[:2] == (1, 2)
    del environ["RANK"], environ["WORLD_SIZE"]
    assert detect_rank(environ=environ)[:2] == (3, 4)


@pytest.mark.parametrize("environ, message", [
    ({"RANK": "1"}, "WORLD_SIZE is not"),
    ({"HOROVOD_SIZE": "2"}, "HOROVOD_RANK is not"),
    ({"PMI_RANK": "one", "PMI_SIZE": "2"}, "PMI_RANK='one'"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "0 <= rank < world_size"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "world_size >= 1"),
])
def test_bad_environments_raise_naming_the_variable(environ, message):
    with pytest.raises(ValueError, match=message):
        detect_rank(environ=environ)


def test_half_explicit_raises():
    with pytest.raises(ValueError, match="both"):
        detect_rank(rank=1)


def test_initialised_torch_distributed_comes_first(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    assert "torch" in sys.modules
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        monkeypatch.setenv("RANK", "3")
        monkeypatch.setenv("WORLD_SIZE", "4")
        assert detect_rank() == RankInfo(0, 1, "torch.distributed")
    finally:
        dist.destroy_process_group()
    assert detect_rank() == RankInfo(3, 4, "RANK/WORLD_SIZE")


# -- loaders as ranks -------------------------------------------------------------------------


def _epoch_positions(loader, epoch):
    """Record positions of each batch of ``epoch`` (labels equal positions in this file)."""
    loader.set_epoch(epoch)
    batches = []
    for batch in loader:
        assert np.array_equal(batch.labels, batch.positions)
        batches.append(batch.positions.tolist())
    return batches


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_ranks_share_one_permutation_and_get_equal_batch_counts(rec, world_size):
    kwargs = dict(shuffle="full", seed=11, threads=1, last_batch="pad")
    per_rank = {}
    for rank in range(world_size):
        info = detect_rank(environ={"RANK": str(rank), "WORLD_SIZE": str(world_size)})
        with ImageLoader(rec, 2, (3, 8, 8), part_index=info.rank, num_parts=info.world_size,
                         **kwargs) as loader:
            per_rank[rank] = [_epoch_positions(loader, epoch) for epoch in (0, 1)]
    for epoch in (0, 1):
        counts = {len(per_rank[r][epoch]) for r in per_rank}
        assert len(counts) == 1  # every rank the same number of batches
        parts = [[p for batch in per_rank[r][epoch] for p in batch] for r in range(world_size)]
        per_part = -(-N_IMAGES // world_size)
        # without the padding of a short last batch, rank r holds slice r of one permutation
        heads = [part[:per_part] for part in parts]
        joined = [p for head in heads for p in head]
        assert sorted(set(joined)) == list(range(N_IMAGES))  # every record on some rank
        permutation = epoch_order(N_IMAGES, shuffle="full", seed=11, epoch=epoch)
        assert joined[:N_IMAGES] == permutation.tolist()
        assert joined[N_IMAGES:] == permutation.tolist()[:len(joined) - N_IMAGES]
    assert per_rank[0][0] != per_rank[0][1]  # a new permutation each epoch


def test_a_rank_sees_the_same_batches_on_every_run(rec):
    runs = []
    for _ in range(2):
        with ImageLoader(rec, 3, (3, 8, 8), part_index=1, num_parts=3, shuffle=True, seed=5,
                         threads=2) as loader:
            runs.append(_epoch_positions(loader, 4))
    assert runs[0] == runs[1]


def test_torch_loaders_as_ranks(rec, monkeypatch):
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    from recpipe.torch import TorchLoader

    labels_per_rank = []
    for rank in range(4):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "4")
        with TorchLoader(rec, 4, (3, 8, 8), shuffle=True, seed=2, threads=1) as loader:
            loader.set_epoch(3)
            labels_per_rank.append([lab.tolist() for _, lab in loader])
    assert {len(batches) for batches in labels_per_rank} == {2}
    seen = {int(x) for batches in labels_per_rank for batch in batches for x in batch}
    assert seen == set(range(N_IMAGES))
