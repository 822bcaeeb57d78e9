"""Synthetic traces in each supported format, for the trace benchmarks (not realistic distributions, only
realistic shapes: DAG names, retries, GPU fractions, unsorted instance rows, JSON events).

Every generator writes about `pods` pods into `directory` and returns the number it wrote.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

CHUNK = 50_000


def _write(path: Path, lines: Iterator[str]) -> None:
    with path.open("w") as handle:
        block: list[str] = []
        for line in lines:
            block.append(line)
            if len(block) >= CHUNK:
                handle.write("\n".join(block) + "\n")
                block.clear()
        if block:
            handle.write("\n".join(block) + "\n")


def alibaba_v2018(directory: Path, pods: int, seed: int = 0) -> int:
    """batch_task + batch_instance (+ machine_meta): jobs of a 3-task DAG, 4 instances per task, spread over
    8 days; instance rows are written job by job but with shuffled chunks, as the real file is not sorted."""
    rng = random.Random(seed)
    jobs = max(1, pods // 12)
    starts = [rng.randrange(1, 8 * 86_400) for _ in range(jobs)]
    names = ("M1", "M2", "R3_1_2")

    def tasks() -> Iterator[str]:
        for j, start in enumerate(starts):
            for k, name in enumerate(names):
                begin = start + 60 * k
                yield f"{name},4.0,j_{j},1,Terminated,{begin},{begin + 50},{rng.choice((50, 100))}.0,0.3"

    def instances() -> Iterator[str]:
        order = list(range(jobs))
        blocks = [order[i:i + 1000] for i in range(0, jobs, 1000)]
        rng.shuffle(blocks)
        n = 0
        for block in blocks:
            for j in block:
                for k, name in enumerate(names):
                    begin = starts[j] + 60 * k
                    for i in range(4):
                        n += 1
                        yield (f"ins_{n},{name},j_{j},1,Terminated,{begin},{begin + 40 + i},m_{n % 4000},1,1,"
                               f"{rng.randrange(10, 100)}.0,{rng.randrange(100, 150)}.0,0.2,0.25")

    _write(directory / "machine_meta.csv", (f"m_{m},0,{m % 292},{m % 21},96,100,USING" for m in range(4000)))
    _write(directory / "batch_task.csv", tasks())
    _write(directory / "batch_instance.csv", instances())
    return jobs * 12


def spar_v2018(directory: Path, pods: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    jobs = max(1, pods // 6)
    arrival = sorted(rng.randrange(0, 3600) for _ in range(jobs))
    tasks, instances = [], []
    n = 0
    for j, t in enumerate(arrival):
        for name in ("M1", "R2_1"):
            tasks.append(f"{t},j_{j},{name},30,100.0,0.3,3")
            for _ in range(3):
                n += 1
                instances.append(f"{t},j_{j},{name},ins_{n},{rng.randrange(1, 60)},80.0,0.2")
    _write(directory / "sample_tasks.csv", iter(tasks))
    _write(directory / "sample_instances.csv", iter(instances))
    return n


def pai_v2020(directory: Path, pods: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    jobs = max(1, pods // 2)
    base = 1_700_000
    submit = [base + rng.randrange(0, 30 * 86_400) for _ in range(jobs)]
    gpus = (25.0, 50.0, 100.0, 800.0, "")
    _write(directory / "pai_job_table.csv",
           (f"job{j},inst{j},u{j % 100},Terminated,{s},{s + 900}" for j, s in enumerate(submit)))
    _write(directory / "pai_task_table.csv",
           (f"job{j},worker,2.0,Terminated,{s + 5},{s + 900},600.0,29.296875,{rng.choice(gpus)},T4"
            for j, s in enumerate(submit)))
    _write(directory / "pai_instance_table.csv",
           (f"job{j},worker,i{j}_{i},w{j}_{i},inst{j},Terminated,{s + 5},{s + 300 + i},m{j % 1000}"
            for j, s in enumerate(submit) for i in range(2)))
    _write(directory / "pai_sensor_table.csv",
           (f"job{j},worker,w{j}_0,inst{j},m{j % 1000},/dev/nvidia0,300.0,20.0,12.0,14.0,1.0,2.0,1,1,1,1"
            for j in range(0, jobs, 2)))
    _write(directory / "pai_machine_spec.csv", (f"m{m},T4,96,512,8" for m in range(1000)))
    return jobs * 2


def openb_v2023(directory: Path, pods: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
             "scheduled_time"

    def rows() -> Iterator[str]:
        yield header
        t = 0
        for p in range(pods):
            t += rng.randrange(0, 30)
            gpus, milli = rng.choice(((0, 0), (1, 460), (1, 1000), (8, 1000)))
            yield (f"openb-pod-{p:07d},{rng.choice((4000, 11300, 16000))},{rng.choice((16384, 41560))},{gpus},"
                   f"{milli},,{rng.choice(('LS', 'BE'))},Running,{t},{t + 600},{t + 2}")

    _write(directory / "openb_pod_list_default.csv", rows())
    _write(directory / "openb_node_list_all_node.csv",
           iter(["sn,cpu_milli,memory_mib,gpu,model"] + [f"openb-node-{n:04d},96000,393216,8,G2"
                                                         for n in range(1500)]))
    return pods


def google_2019(directory: Path, pods: int, seed: int = 0) -> int:
    rng = random.Random(seed)

    def events() -> Iterator[str]:
        for p in range(pods):
            t = 600_000_000 + rng.randrange(0, 86_400) * 1_000_000
            common = {"collection_id": str(1000 + p // 10), "instance_index": str(p % 10),
                      "collection_type": "0", "priority": "200", "scheduling_class": "2"}
            request = {"cpus": 0.01, "memory": 0.005}
            yield json.dumps({"time": str(t), "type": "0", **common, "resource_request": request})
            yield json.dumps({"time": str(t + 1_000_000), "type": "3", **common, "machine_id": "1"})
            yield json.dumps({"time": str(t + 301_000_000), "type": "6", **common})

    _write(directory / "instance_events-000000000000.json", events())
    _write(directory / "machine_events-000000000000.json",
           (json.dumps({"time": "0", "machine_id": str(m), "type": "1", "capacity": {"cpus": 0.5, "memory": 0.25}})
            for m in range(2000)))
    return pods


GENERATORS: dict[str, Callable[[Path, int, int], int]] = {
    "alibaba-v2018": alibaba_v2018, "alibaba-v2018-spar": spar_v2018, "alibaba-gpu-v2020": pai_v2020,
    "alibaba-gpu-v2023": openb_v2023, "google-2019": google_2019,
}
