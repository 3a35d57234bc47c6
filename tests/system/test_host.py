"""recpipe.system.host: usable cores and the share of each rank on a node."""

import pytest

from recpipe.system.host import LocalRanks, local_ranks, node_share, usable_cores


def test_usable_cores_is_positive_with_its_source():
    cores, source = usable_cores()
    assert cores >= 1 and source in ("affinity", "cpu_count", "cgroup")


@pytest.mark.parametrize("environ, expected", [
    ({}, LocalRanks(0, 1, "none")),
    ({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8"}, LocalRanks(3, 8, "torchrun")),
    ({"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
     LocalRanks(1, 4, "openmpi")),
    ({"MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}, LocalRanks(0, 2, "mpich")),
    ({"HOROVOD_LOCAL_RANK": "5", "HOROVOD_LOCAL_SIZE": "8"}, LocalRanks(5, 8, "horovod")),
    ({"SLURM_LOCALID": "2", "SLURM_NTASKS_PER_NODE": "4(x2)"}, LocalRanks(2, 4, "slurm")),
    ({"LOCAL_RANK": "0"}, LocalRanks(0, 1, "none")),  # a rank without a size says nothing
])
def test_local_ranks_from_launchers(environ, expected):
    assert local_ranks(environ) == expected


@pytest.mark.parametrize("environ", [{"LOCAL_RANK": "x", "LOCAL_WORLD_SIZE": "8"},
                                     {"LOCAL_RANK": "8", "LOCAL_WORLD_SIZE": "8"}])
def test_bad_local_ranks_name_the_variable(environ):
    with pytest.raises(ValueError, match="LOCAL_RANK"):
        local_ranks(environ)


def test_node_share_splits_the_cores_among_local_ranks():
    shares = [node_share(64, LocalRanks(r, 8, "torchrun"))[0] for r in range(8)]
    assert shares == [8] * 8
    shares = [node_share(10, LocalRanks(r, 4, "torchrun"))[0] for r in range(4)]
    assert shares == [3, 3, 2, 2] and sum(shares) == 10
    assert node_share(2, LocalRanks(5, 8, "torchrun"))[0] == 1  # never below one
    cores, source = node_share(16, LocalRanks(0, 1, "none"))
    assert cores == 16 and source == "given"


def test_the_autotuner_grows_within_the_rank_share(monkeypatch, tmp_path):
    import cv2
    import numpy as np

    import recpipe
    from recpipe.decode.loader import ImageLoader

    rec = str(tmp_path / "s.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(8):
            writer.write(recpipe.pack(recpipe.IRHeader(0, 0.0, i, 0),
                                      cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1]))
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    with ImageLoader(rec, 4, (3, 8, 8)) as loader:  # threads="auto"
        assert loader.autotuner.cores == 1 and "local rank 1" in loader.autotuner.cores_source
        assert loader.threads == 1
