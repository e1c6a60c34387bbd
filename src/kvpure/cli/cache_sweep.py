"""The runs behind ``kvpure cache``: one actual run per memory figure and the unbounded runs.

Every run is a task over the same workload; the tasks are independent, so
``--jobs N`` hands them to a process pool (the workload is sent to each
worker once, by the pool's initializer) and the results, gathered in task
order, are the serial run's: the same functions on the same inputs. The
actual runs are dealt into one group per process, and a group replays its
figures in one pass over the workload, as the serial path does with all of
them.

The unbounded pool follows the model length and block sizes, not the memory.
With a fixed ``--max-model-len`` it is run once, from the first memory figure
that plans; when the model length is fitted to the memory it is run once per
figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kvpure.cache.errors import UnboundedPoolTooLargeError
from kvpure.cache.fleet import FleetResult, InstanceResult, run_fleet, run_round_robin_instance
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.workload import (
    RunResult,
    WorkloadReport,
    WorkloadTotals,
    replay_config,
    run_workload,
    unbounded_run,
    workload_report,
    workload_totals,
)
from kvpure.cache.workload_points import run_workload_points
from kvpure.cache.workload_server import Workload
from kvpure.cli.cache_dask import run_on_dask, worker_workload
from kvpure.cli.serve_options import VLLM_OPTION, serve_flags_from_options
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.errors import ModelConfigError
from kvpure.models.layout import ModelLayout
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.versions import DEFAULT_VLLM_VERSION

__all__ = ["SweepInput", "SweepRow", "count_runs", "run_sweep"]

SweepRow = tuple[str, WorkloadReport | str]
"""A memory figure and its report, or why it cannot be served."""


@dataclass(frozen=True, slots=True)
class SweepInput:
    """What every run shares."""

    requests: Workload
    """The requests, iterated once per run (a tuple, or a stream read again each time)."""
    model_config: object
    """The parsed config.json."""
    options: Mapping[str, str]
    """The deployment options (``kv_cache_memory`` is set per figure)."""
    max_num_seqs: int
    vllm_version: str = DEFAULT_VLLM_VERSION
    """The vLLM release answered for (normalised)."""
    instances: int = 1
    """Servers of a fleet (1: no fleet runs)."""
    routing: tuple[str, ...] = ()
    """The fleet's routing policies, each run separately."""


@dataclass(frozen=True, slots=True)
class _Task:
    kind: str
    """``actual``, ``unbounded`` (at ``index``), ``first-unbounded`` (from ``index`` on),
    ``fleet`` (``policy`` at ``index``) or ``round-robin`` (its ``instance`` at ``index``)."""
    index: int
    policy: str = ""
    instance: int = 0


_Outcome = RunResult | FleetResult | InstanceResult | KVPureError | None

_Shared = tuple[SweepInput, ModelLayout, tuple[str | None, ...]]
_shared: _Shared | None = None


def _shared_input(sweep: SweepInput, labels: tuple[str | None, ...]) -> _Shared:
    return (sweep, model_layout(parse_model_config(sweep.model_config)), labels)


def _set_shared(sweep: SweepInput, labels: tuple[str | None, ...]) -> None:
    """The pool's initializer (and the serial path's setup): parse the model once."""
    global _shared
    _shared = _shared_input(sweep, labels)


def _deployment(sweep: SweepInput, layout: ModelLayout, label: str | None) -> Deployment:
    """The deployment of one memory figure, ``--vllm``'s serve defaults resolved as for ``plan``.

    Async scheduling stays off: the replay drives the manager one synchronous
    step at a time (``kvpure.cache`` refuses async traces), so the plan is the
    one a server with ``--no-async-scheduling`` makes.
    """
    options = dict(sweep.options)
    options["async_scheduling"] = "off"
    options[VLLM_OPTION] = sweep.vllm_version
    if label is not None:
        options["kv_cache_memory"] = label
    return resolve_serve_settings(layout, serve_flags_from_options(options)).deployment


def _fatal(err: KVPureError) -> bool:
    """A mistake in the input (or a workload too large), not a memory figure too small."""
    return isinstance(err, InvalidFieldError | ModelConfigError | UnboundedPoolTooLargeError)


def _run_task(task: _Task, progress: Callable[[int], None] | None = None) -> _Outcome:
    """One run; a memory figure that cannot be served is returned as its error."""
    if _shared is None:
        raise RuntimeError("the sweep's shared input is set before any task runs")
    return _run_task_on(_shared, task, progress)


def _run_dask_task(
    task: _Task, sweep_and_labels: tuple[SweepInput, tuple[str | None, ...]]
) -> _Outcome:
    """One run on a Dask worker: the workload read from the worker's copy of its spool."""
    sweep, labels = sweep_and_labels
    sweep = replace(sweep, requests=worker_workload(sweep.requests))
    return _run_task_on(_shared_input(sweep, labels), task)


def _run_task_on(
    shared: _Shared, task: _Task, progress: Callable[[int], None] | None = None
) -> _Outcome:
    sweep, layout, labels = shared
    requests, seqs = sweep.requests, sweep.max_num_seqs
    indexes = range(task.index, len(labels)) if task.kind == "first-unbounded" else [task.index]
    for index in indexes:
        try:
            deployment = _deployment(sweep, layout, labels[index])
            version = sweep.vllm_version
            if task.kind in ("actual", "fleet", "round-robin"):
                config = replay_config(layout, deployment, version)
                if task.kind == "fleet":
                    return run_fleet(requests, config, seqs, sweep.instances, task.policy, progress)
                if task.kind == "round-robin":
                    return run_round_robin_instance(
                        requests, config, seqs, sweep.instances, task.instance, progress
                    )
                return run_workload(requests, config, seqs, progress)
            return unbounded_run(requests, layout, deployment, seqs, progress, vllm_version=version)
        except KVPureError as err:
            if _fatal(err) or task.kind != "first-unbounded":
                return err
    return None


def _unbounded_per_figure(sweep: SweepInput, labels: Sequence[str | None]) -> bool:
    """Whether the model length, hence the unbounded pool, follows the memory."""
    if not labels:
        return False
    layout = model_layout(parse_model_config(sweep.model_config))
    return _deployment(sweep, layout, labels[0]).auto_fit_max_model_len


def count_runs(sweep: SweepInput, labels: Sequence[str | None]) -> int:
    """How many runs :func:`run_sweep` makes (each replays every request once)."""
    return len(_tasks(sweep, len(labels), _unbounded_per_figure(sweep, labels)))


def _fleet_tasks(sweep: SweepInput, index: int) -> list[_Task]:
    if sweep.instances <= 1:
        return []
    tasks: list[_Task] = []
    for policy in sweep.routing:
        if policy == "round-robin":  # independent instances: a task each
            tasks += [_Task("round-robin", index, policy, i) for i in range(sweep.instances)]
        else:
            tasks.append(_Task("fleet", index, policy))
    return tasks


def _tasks(sweep: SweepInput, count: int, unbounded_per_figure: bool) -> list[_Task]:
    tasks = [_Task("actual", i) for i in range(count)]
    fleets = [t for i in range(count) for t in _fleet_tasks(sweep, i)]
    if unbounded_per_figure:
        return [
            *(t for i in range(count) for t in (tasks[i], _Task("unbounded", i))),
            *fleets,
        ]
    return [*tasks, _Task("first-unbounded", 0), *fleets]


def _first_sentence(message: str) -> str:
    first = message.strip().splitlines()[0].split(". ")[0] if message.strip() else "error"
    return first if len(first) <= 160 else first[:157] + "..."


def run_sweep(
    sweep: SweepInput,
    labels: Sequence[str | None],
    *,
    jobs: int = 1,
    strict: bool = False,
    progress: Callable[[int], None] | None = None,
    dask_scheduler: str | None = None,
) -> list[tuple[str | None, WorkloadReport | str]]:
    """A report (or why it cannot be served) per memory figure, in order.

    ``labels`` are memory figures (None: the options' own). ``strict`` raises a
    figure's error instead of reporting it; a mistake in the input always
    raises. ``jobs`` above 1 runs the tasks in that many processes.
    ``dask_scheduler`` (a scheduler's address, or ``"local"`` for a
    ``LocalCluster`` of ``jobs`` worker processes) runs them on a Dask cluster
    instead (``pip install 'kvpure[distributed]'``); the rows are the same.
    ``progress`` is called with the number of requests replayed since its last call.
    """
    labels = tuple(labels)
    tasks = _tasks(sweep, len(labels), _unbounded_per_figure(sweep, labels))
    outcomes: list[_Outcome]
    if dask_scheduler is not None:
        done = None if progress is None else _advance(progress, len(sweep.requests))
        outcomes = run_on_dask(
            dask_scheduler,
            _run_dask_task,
            tasks,
            (sweep, labels),
            workload=sweep.requests,
            workers=jobs if jobs > 1 else None,
            done=done,
        )
    elif jobs <= 1:
        _set_shared(sweep, labels)
        together = _actual_runs([t for t in tasks if t.kind == "actual"], progress)
        outcomes = [
            together[t] if t in together else _counted(t, len(sweep.requests), progress)
            for t in tasks
        ]
    else:
        outcomes = _pooled_runs(sweep, labels, tasks, jobs, progress)
    return _rows(sweep, labels, tasks, outcomes, strict)


def _pooled_runs(
    sweep: SweepInput,
    labels: tuple[str | None, ...],
    tasks: list[_Task],
    jobs: int,
    progress: Callable[[int], None] | None,
) -> list[_Outcome]:
    """The tasks over a pool of ``jobs`` processes: the actual runs dealt into one group per
    process, each group in one pass over the workload (:func:`_actual_runs`), every other
    task on its own; the outcomes in task order, as the serial path gives them."""
    from concurrent.futures import ProcessPoolExecutor

    actual = [t for t in tasks if t.kind == "actual"]
    groups = [group for group in (actual[i::jobs] for i in range(jobs)) if group]
    others = [t for t in tasks if t.kind != "actual"]
    step = len(sweep.requests)
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(groups) + len(others)),
        initializer=_set_shared,
        initargs=(sweep, labels),
    ) as pool:
        grouped = [pool.submit(_actual_group, group) for group in groups]
        alone = {task: pool.submit(_run_task, task) for task in others}
        if progress is not None:
            for group, future in zip(groups, grouped, strict=True):
                future.add_done_callback(_advance(progress, step * len(group)))
            for single in alone.values():
                single.add_done_callback(_advance(progress, step))
        found: dict[_Task, _Outcome] = {}
        for future in grouped:
            found.update(future.result())
        return [found[t] if t in found else alone[t].result() for t in tasks]


def _actual_group(tasks: list[_Task]) -> dict[_Task, _Outcome]:
    """A pool worker's group of actual runs, in one pass (:func:`_actual_runs`)."""
    return _actual_runs(tasks, None)


def _actual_runs(
    tasks: list[_Task], progress: Callable[[int], None] | None
) -> dict[_Task, _Outcome]:
    """The serial path's actual runs, every figure in one pass over the workload
    (:func:`~kvpure.cache.workload_points.run_workload_points`): each one's result is
    ``_run_task``'s, the workload read and a trace's block keys derived once."""
    if _shared is None:
        raise RuntimeError("the sweep's shared input is set before any task runs")
    sweep, layout, labels = _shared
    outcomes: dict[_Task, _Outcome] = {}
    configs: list[tuple[_Task, ReplayConfig]] = []
    for task in tasks:
        try:
            deployment = _deployment(sweep, layout, labels[task.index])
            configs.append((task, replay_config(layout, deployment, sweep.vllm_version)))
        except KVPureError as err:
            outcomes[task] = err
    if progress is not None and outcomes:
        progress(len(outcomes) * len(sweep.requests))
    if configs:
        runs = run_workload_points(
            sweep.requests, [config for _, config in configs], sweep.max_num_seqs, progress
        )
        outcomes.update(zip([task for task, _ in configs], runs, strict=True))
    return outcomes


def _counted(task: _Task, total: int, progress: Callable[[int], None] | None) -> _Outcome:
    """``_run_task`` reporting each request, and the rest of ``total`` when it stops early."""
    if progress is None:
        return _run_task(task)
    counted = 0

    def count(step: int) -> None:
        nonlocal counted
        counted += step
        progress(step)

    outcome = _run_task(task, count)
    if counted < total:
        progress(total - counted)
    return outcome


def _advance(progress: Callable[[int], None], step: int) -> Callable[[object], None]:
    def done(_: object) -> None:
        progress(step)

    return done


def _fleets(
    sweep: SweepInput, index: int, tasks: list[_Task], outcomes: list[_Outcome]
) -> tuple[FleetResult, ...]:
    """The fleet runs of figure ``index``, one per policy in ``--routing`` order."""
    found: dict[str, FleetResult] = {}
    shares: dict[str, list[InstanceResult]] = {}
    for task, outcome in zip(tasks, outcomes, strict=True):
        if task.index != index or task.kind not in ("fleet", "round-robin"):
            continue
        if isinstance(outcome, KVPureError):
            raise outcome
        if isinstance(outcome, FleetResult):
            found[task.policy] = outcome
        elif isinstance(outcome, InstanceResult):
            shares.setdefault(task.policy, []).append(outcome)
    for policy, instances in shares.items():
        found[policy] = FleetResult(policy=policy, instances=tuple(instances))
    return tuple(found[p] for p in sweep.routing if p in found)


def _rows(
    sweep: SweepInput,
    labels: tuple[str | None, ...],
    tasks: list[_Task],
    outcomes: list[_Outcome],
    strict: bool,
) -> list[tuple[str | None, WorkloadReport | str]]:
    actual: dict[int, _Outcome] = {}
    unbounded: dict[int, _Outcome] = {}
    shared: _Outcome = None
    for task, outcome in zip(tasks, outcomes, strict=True):
        if task.kind == "actual":
            actual[task.index] = outcome
        elif task.kind == "unbounded":
            unbounded[task.index] = outcome
        elif task.kind == "first-unbounded":
            shared = outcome
    rows: list[tuple[str | None, WorkloadReport | str]] = []
    totals: dict[tuple[int, bool], WorkloadTotals] = {}
    for index, label in enumerate(labels):
        run = actual[index]
        if isinstance(run, KVPureError):
            if strict or _fatal(run):
                raise run
            rows.append((label, _first_sentence(str(run))))
            continue
        upper = unbounded.get(index, shared)
        if isinstance(upper, KVPureError):
            raise upper
        if not isinstance(run, RunResult) or not isinstance(upper, RunResult):
            raise RuntimeError("a served figure lacks a run")  # not reached: every task ran
        key = (run.hash_block_size, run.enable_caching)
        if key not in totals:
            totals[key] = workload_totals(sweep.requests, *key)
        report = workload_report(sweep.requests, run, upper, sweep.max_num_seqs, totals=totals[key])
        fleet = _fleets(sweep, index, tasks, outcomes)
        rows.append((label, replace(report, fleet=fleet, instances=sweep.instances)))
    return rows
