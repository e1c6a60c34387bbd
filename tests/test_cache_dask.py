"""``kvpure cache --dask-scheduler``: the sweep's runs on a Dask cluster give the local rows.

The cluster is started by the test: a ``LocalCluster`` of two in-process
workers (``processes=False``, one thread each), so no daemon and no network;
one test starts ``--dask-scheduler local`` (worker processes) through the
CLI. Every JSON report is compared with the serial run's, field for field
(``peak_rss_bytes``, a measurement, aside). The tests that need Dask skip
when ``distributed`` is not installed; the missing-extra error is tested
either way.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kvpure.cache.workload import WorkloadRequest
from kvpure.cli import main
from kvpure.cli.cache_sweep import SweepInput, run_sweep

if TYPE_CHECKING:
    from distributed import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
FIGURES = "8MiB,24MiB,40MiB,64MiB"


def _requests(count: int = 24) -> list[WorkloadRequest]:
    rng = random.Random(3)
    shared = [[rng.randrange(1, 30000) for _ in range(96)] for _ in range(3)]
    return [
        WorkloadRequest(
            prompt_token_ids=(*rng.choice(shared), *(rng.randrange(1, 30000) for _ in range(40))),
            output_len=8,
        )
        for _ in range(count)
    ]


def _workload(tmp_path: Path) -> str:
    path = tmp_path / "w.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for request in _requests():
            line = {"prompt_token_ids": list(request.prompt_token_ids), "output_len": 8}
            out.write(json.dumps(line) + "\n")
    return str(path)


def _cache(path: str, *extra: str) -> list[str]:
    return [
        "cache", path, "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "1GiB",
        "--max-num-seqs", "2", "--max-model-len", "256", "--json", *extra,
    ]  # fmt: skip


def _facts(out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(out)
    assert isinstance(data.pop("peak_rss_bytes"), int)  # a measurement, different each run
    return data


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as started:
        yield started


def _worker_files(cluster: LocalCluster) -> list[str]:
    return sorted(
        name
        for worker in cluster.workers.values()
        for name in os.listdir(worker.local_directory)
        if name.startswith("kvpure-workload-")
    )


def test_a_sweep_with_fleets_on_the_cluster_is_the_serial_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cluster: LocalCluster
) -> None:
    args = _cache(
        _workload(tmp_path), "--sweep-memory", FIGURES, "--instances", "3", "--routing",
        "round-robin,least-loaded,prefix-aware",
    )  # fmt: skip
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--dask-scheduler", cluster.scheduler_address]) == 0
    assert _facts(capsys.readouterr().out) == _facts(serial)
    rows = json.loads(serial)["sweep_memory"]
    served = [r for r in rows if "error" not in r]
    assert len(served) >= 2
    assert any(r["hits_lost_to_eviction"] > 0 for r in served)  # small figures evict
    assert all(len(r["fleet"]["policies"]) == 3 for r in served)
    # the workload's spool was uploaded to each worker and removed from it at the end
    assert _worker_files(cluster) == []


def test_one_figure_on_the_cluster_is_the_serial_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cluster: LocalCluster
) -> None:
    args = _cache(_workload(tmp_path))
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--dask-scheduler", cluster.scheduler_address]) == 0
    assert _facts(capsys.readouterr().out) == _facts(serial)


def test_the_api_runs_an_in_memory_workload_on_the_cluster(cluster: LocalCluster) -> None:
    config = json.loads(Path(LLAMA).read_text(encoding="utf-8"))
    options = {"kv_cache_memory": "1GiB", "max_model_len": "256"}
    sweep = SweepInput(tuple(_requests()), config, options, 2, "0.26", 2, ("prefix-aware",))
    figures = FIGURES.split(",")
    counted: list[int] = []
    rows = run_sweep(
        sweep, figures, dask_scheduler=cluster.scheduler_address, progress=counted.append
    )
    assert rows == run_sweep(sweep, figures)
    # a call per task, each counting the whole workload
    assert set(counted) == {len(sweep.requests)}


def test_a_local_cluster_of_worker_processes_gives_the_serial_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("distributed")
    args = _cache(_workload(tmp_path), "--sweep-memory", "24MiB,64MiB")
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--dask-scheduler", "local", "--jobs", "2"]) == 0
    assert _facts(capsys.readouterr().out) == _facts(serial)


def test_without_dask_the_error_names_the_distributed_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(_cache(_workload(tmp_path), "--dask-scheduler", "local")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--dask-scheduler needs the distributed package" in err
    assert "pip install 'kvpure[distributed]'" in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--dask-scheduler", " "), "--dask-scheduler: give tcp://HOST:PORT or local"),
        (("--dask-scheduler", "tcp://127.0.0.1:8786", "--jobs", "3"), "sizes a local cluster"),
        (("--dask-scheduler", "nowhere"), "no Dask scheduler answered there"),
        (("--dask-scheduler", "tcp://127.0.0.1:1"), "no Dask scheduler answered there"),
    ],
)
def test_a_bad_scheduler_is_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: tuple[str, ...],
    needle: str,
) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr("kvpure.cli.cache_dask.CONNECT_TIMEOUT_S", 1)  # nothing listens there
    assert main(_cache(_workload(tmp_path), *extra)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert needle in err
