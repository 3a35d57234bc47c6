"""CpuMeter: the CPU a timed run got; busy_reason: when other processes took the cores."""

import threading
import time

from recpipe.decode.cpu_meter import CpuMeter, CpuShare, busy_reason


def _share(queue=0.0, pressure=0.0, load=1.0, cpu=1.9, cores=2):
    return CpuShare(wall_seconds=1.0, cpu_seconds=cpu, run_queue_share=queue,
                    load_average=load, cpu_pressure=pressure, cores=cores)


def test_the_meter_counts_this_process_cpu_against_the_wall():
    meter = CpuMeter(2)
    stop = time.perf_counter() + 0.3
    while time.perf_counter() < stop:  # one busy thread
        pass
    threading.Event().wait(0.2)  # then idle: wall time without CPU
    share = meter.read()
    assert share.cpu_seconds < share.wall_seconds  # the idle wait counts on the wall only
    assert 0 < share.cores_used <= 1.05  # one thread busy part of the time, never two cores
    assert share.to_dict()["cores_used"] == share.cores_used and share.cores == 2


def test_an_idle_machine_is_not_busy():
    assert busy_reason([_share(), _share(queue=0.05, pressure=3.0, load=2.5)], threads=2) is None
    assert busy_reason([], threads=2) is None


def test_each_sign_of_other_processes_makes_the_machine_busy_and_is_named():
    queued = busy_reason([_share(), _share(queue=0.6, cpu=0.7)], threads=2)
    assert queued.startswith("the machine is busy: other processes took the cores (this "
                             "process's threads waited for a CPU 60% of their runnable time")
    assert "as little as 0.70 of the 2 core(s)" in queued
    assert "CPU pressure 40%" in busy_reason([_share(pressure=40.0)], threads=2)
    assert "load average 5.0 on 2 cores" in busy_reason([_share(load=5.0)], threads=2)
    assert busy_reason([_share(load=3.5)], threads=2) is None  # our 2 threads + 1.5 others
