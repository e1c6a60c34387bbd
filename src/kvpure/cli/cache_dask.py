"""``kvpure cache --dask-scheduler ADDRESS|local``: the sweep's runs on a Dask cluster.

The runs of a sweep (one per memory figure, the unbounded ones, a task per
fleet policy or round-robin instance) are independent tasks; ``--jobs``
hands them to a process pool on this machine, and this module hands the same
tasks to a Dask cluster (``pip install 'kvpure[distributed]'``), for work
that outgrows one machine. Each worker runs the task's function on the same
inputs, so the rows are those of the serial run.

- ``local`` starts a ``LocalCluster`` of ``--jobs`` worker processes (Dask's
  own count when ``--jobs`` is 1), one thread each, and stops it after.
- Any other value is the address of a running scheduler
  (``tcp://host:8786``); its workers need the same kvpure installed.

What every task shares (the sweep's input) is scattered to each worker once.
A workload streamed from a spool file (the CLI's) travels as that file: it is
uploaded to each worker's local directory (Dask's ``UploadFile`` plugin) and
removed from there at the end, so the workers need no shared file system.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

from kvpure.cache.workload_server import Workload, WorkloadItem
from kvpure.cache.workload_spool import WorkloadStream
from kvpure.errors import InvalidFieldError, KVPureRuntimeError
from kvpure.text.errors import MissingExtraError

__all__ = [
    "LOCAL_SCHEDULER",
    "DaskClusterError",
    "dask_scheduler_option",
    "run_on_dask",
    "worker_workload",
]

LOCAL_SCHEDULER: Final = "local"
"""The ``--dask-scheduler`` value that starts a ``LocalCluster``."""
CONNECT_TIMEOUT_S: Final = 30
"""How long to wait for a scheduler to answer."""

_Task = TypeVar("_Task")
_Shared = TypeVar("_Shared")
_Result = TypeVar("_Result")


class DaskClusterError(KVPureRuntimeError):
    """The Dask cluster could not be reached, or it lost a task (a worker died)."""

    def __init__(self, *, address: str, reason: str) -> None:
        super().__init__(f"--dask-scheduler {address}: {reason}")
        self.address = address
        self.reason = reason


def dask_scheduler_option(value: str | None, jobs: int) -> str | None:
    """``--dask-scheduler``, checked before any replay: ``local`` or a scheduler's address."""
    if value is None:
        return None
    address = value.strip()
    if not address:
        raise InvalidFieldError(
            field="--dask-scheduler", value=value, reason="give tcp://HOST:PORT or local"
        )
    if address != LOCAL_SCHEDULER and jobs > 1:
        raise InvalidFieldError(
            field="--jobs",
            value=jobs,
            reason="sizes a local cluster only: a scheduler's workers are its own",
        )
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise _missing() from None
    return address


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = text[0] if text else type(err).__name__
    return first if len(first) <= 160 else first[:157] + "..."


def _missing() -> MissingExtraError:
    return MissingExtraError(feature="--dask-scheduler", package="distributed", extra="distributed")


@contextlib.contextmanager
def _client(address: str, workers: int | None) -> Iterator[Any]:
    """A ``distributed.Client`` of the cluster (``Any``: distributed is imported only here)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise _missing() from None
    if address == LOCAL_SCHEDULER:
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as err:
        reason = (
            f"no Dask scheduler answered there ({_one_line(err)}); give tcp://HOST:PORT or local"
        )
        raise DaskClusterError(address=address, reason=reason) from None
    with client:
        yield client


def _upload(client: Any, workload: Workload) -> str | None:
    """Upload the workload's spool file to every worker (None: it travels with the input)."""
    if not isinstance(workload, WorkloadStream):
        return None
    from distributed.diagnostics.plugin import UploadFile

    name = f"kvpure-workload-{uuid.uuid4().hex}"
    client.register_plugin(UploadFile(workload.path, load=False), name=name)
    return name


def _remove_upload(filename: str, dask_worker: Any) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(dask_worker.local_directory, filename))


def worker_workload(requests: Workload) -> Workload:
    """On a Dask worker: ``requests``, a spool read from that worker's uploaded copy."""
    if not isinstance(requests, WorkloadStream):
        return requests
    from distributed import get_worker

    local = os.path.join(get_worker().local_directory, os.path.basename(requests.path))
    stream: WorkloadStream[WorkloadItem] = WorkloadStream(local, requests.offsets, requests.count)
    return stream


def run_on_dask(
    address: str,
    function: Callable[[_Task, _Shared], _Result],
    tasks: Sequence[_Task],
    shared: _Shared,
    *,
    workload: Workload,
    workers: int | None = None,
    done: Callable[[object], None] | None = None,
) -> list[_Result]:
    """``function(task, shared)`` for every task on the cluster at ``address``, in task order.

    ``workload`` (inside ``shared``) is uploaded when it is a spool file;
    ``workers`` sizes a ``local`` cluster; ``done`` is called as each task ends.
    """
    try:
        from distributed import KilledWorker
    except ImportError:
        raise _missing() from None
    with _client(address, workers) as client:
        upload = _upload(client, workload)
        try:
            [payload] = client.scatter([shared], broadcast=True, hash=False)
            futures = [client.submit(function, task, payload, pure=False) for task in tasks]
            if done is not None:
                for future in futures:
                    future.add_done_callback(done)
            results: list[_Result] = client.gather(futures)
            return results
        except (KilledWorker, TimeoutError) as err:
            raise DaskClusterError(address=address, reason=_one_line(err)) from None
        finally:
            if upload is not None and isinstance(workload, WorkloadStream):
                client.unregister_worker_plugin(upload)
                client.run(_remove_upload, os.path.basename(workload.path))
