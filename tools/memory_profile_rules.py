"""Print, per unpacked vLLM wheel, the settings kvpure's memory-profile records follow.

Usage: python tools/memory_profile_rules.py FOLDER [--json OUT]

FOLDER holds one directory per release (``0.19.0/vllm/...``), unpacked from
``pip download --no-deps --only-binary :all: vllm==X`` with at least
``vllm/envs.py``, ``vllm/config/*``, ``vllm/utils/*`` and ``vllm/v1/worker/*``.
Each line reads, from that release's own source:

- ``estimate``: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``'s default in envs.py
  (1: ``Worker.determine_available_memory`` subtracts the CUDA-graph estimate);
- ``util``: ``CacheConfig.gpu_memory_utilization``'s default (config/cache.py);
- ``platform``: the condition under which gpu_worker.py makes the estimate;
- ``fusion``: ``enable_allreduce_rms_fusion`` (config/vllm.py): which compute
  capabilities (exactly 10.0, or the 10.x family) and whether PP must be 1;
- ``sampler``: ``VLLM_USE_FLASHINFER_SAMPLER``'s unset value (envs.py);
- ``consumed``: utils/mem_utils.py measures ``total_consumed`` (0.27 on);
- ``extensible``: v1/worker/extensible_kv_cache.py exists (0.34);
- ``v2``: which models run GPU Model Runner V2 by default (config/vllm.py
  ``_is_default_v2_model_runner_model``: ``listed`` architectures, ``+dense``
  when any non-MoE model does, ``all`` when ``use_v2_model_runner`` no longer
  asks), and ``v2-graphs``: whether V2's ``profile_cudagraph_memory``
  (v1/worker/gpu/model_runner.py) estimates anything (``return 0`` before 0.29).

kvpure.memory_profile.releases keeps one record per run of identical lines;
docs/memory-profile.md quotes the table. ``--json OUT`` writes the same readings,
one object per release (:func:`facts`, plus the Model Runner V2 architecture list
and 0.34's margin constants), to the file tests/data/memory_profile/ holds for
tests/test_memory_release_sources.py.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.name))


def describe(release: Path) -> str:
    """One line of settings for the unpacked release at ``release``."""
    v = release / "vllm"
    envs = _read(v / "envs.py")
    cache = _read(v / "config" / "cache.py") or _read(v / "config.py")
    config = _read(v / "config" / "vllm.py")
    worker = _read(v / "v1" / "worker" / "gpu_worker.py")
    estimate = re.search(r'VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "(\d)"', envs)
    util = re.search(r"gpu_memory_utilization: float = (?:Field\(default=)?([\d.]+)", cache)
    platform = re.search(r"cudagraph_memory_estimate = 0\s+if \(?\s*(.*?)\n", worker, re.S)
    fusion = re.search(r"def enable_allreduce_rms_fusion.*?\n\n\n", config, re.S)
    body = fusion.group(0) if fusion else ""
    if "is_device_capability_family(100)" in body:
        capability = "9.0+10.x"
    elif "is_device_capability(100)" in body:
        capability = "9.0+10.0"
    else:
        capability = "off"
    pp = "pp1" if "pipeline_parallel_size == 1" in body else "any-pp"
    sampler = re.search(r'"VLLM_USE_FLASHINFER_SAMPLER".*?else (\w+)', envs, re.S)
    default_v2 = re.search(
        r"def _is_default_v2_model_runner_model.*?(?=\n    (?:def|@))", config, re.S
    )
    if not (v / "v1" / "worker" / "gpu_model_runner.py").is_file():
        v2 = "only"  # 0.34: no V1 GPU model runner left
    elif "def use_v2_model_runner" not in config:
        v2 = "-"
    elif default_v2 is None:
        v2 = "all"
    else:
        v2 = "listed+dense" if "not model_config.is_moe\n" in default_v2.group(0) else "listed"
    runner_v2 = _read(v / "v1" / "worker" / "gpu" / "model_runner.py")
    v2_estimate = re.search(r"def profile_cudagraph_memory.*?(?=\n    (?:def|@))", runner_v2, re.S)
    v2_graphs = bool(v2_estimate) and "return 0\n" not in v2_estimate.group(0)
    return " ".join(
        [
            f"{release.name:8}",
            f"estimate={estimate.group(1) if estimate else '-'}",
            f"util={util.group(1) if util else '?'}",
            f"platform={platform.group(1).strip()[:36] if platform else '-'}",
            f"fusion={capability}/{pp if fusion else '-'}",
            f"sampler={sampler.group(1) if sampler else '?'}",
            f"consumed={'total_consumed' in _read(v / 'utils' / 'mem_utils.py')}",
            f"extensible={(v / 'v1' / 'worker' / 'extensible_kv_cache.py').is_file()}",
            f"v2={v2}",
            f"v2-graphs={v2_graphs}",
        ]
    )


def _platform(worker: str) -> str:
    """Where gpu_worker.py makes the CUDA-graph estimate: none, not_rocm, cuda, cuda_alike."""
    found = re.search(r"cudagraph_memory_estimate = 0\n((?:.*\n){1,4})", worker)
    text = found.group(1) if found else ""
    for needle, name in (
        ("is_cuda_alike()", "cuda_alike"),
        ("is_cuda()", "cuda"),
        ("not current_platform.is_rocm()", "not_rocm"),
    ):
        if needle in text:
            return name
    return "none"


def _v2_architectures(config: str) -> list[str]:
    """``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (config/vllm.py), sorted; [] without one."""
    found = re.search(
        r"^DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = (frozenset\(.*?\)\n)", config, re.S | re.M
    )
    if found is None:
        return []
    call = ast.parse(found.group(1).strip(), mode="eval").body
    assert isinstance(call, ast.Call)
    return sorted(ast.literal_eval(call.args[0])) if call.args else []


def facts(release: Path) -> dict[str, object]:
    """The settings :func:`describe` prints, as one JSON object."""
    v = release / "vllm"
    envs = _read(v / "envs.py")
    cache = _read(v / "config" / "cache.py") or _read(v / "config.py")
    config = _read(v / "config" / "vllm.py")
    worker = _read(v / "v1" / "worker" / "gpu_worker.py")
    extensible = _read(v / "v1" / "worker" / "extensible_kv_cache.py")
    fields = dict(re.findall(r"(?:^| )([\w-]+)=(\S*)", describe(release)))
    estimate = re.search(r'VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "(\d)"', envs)
    util = re.search(r"gpu_memory_utilization: float = (?:Field\(default=)?([\d.]+)", cache)
    resolved = re.search(
        r"def resolved_gpu_memory_utilization.*?if self.enable_extensible_kv_cache:\s+"
        r"return ([\d.]+)",
        cache,
        re.S,
    )
    default_v2 = re.search(
        r"def _is_default_v2_model_runner_model.*?(?=\n    (?:def|@))", config, re.S
    )
    floor = re.search(
        r"KV_CACHE_MARGIN_FLOOR_BYTES = \((\d+) if current_platform.is_rocm\(\) else (\d+)\) << 30",
        extensible,
    )
    fraction = re.search(r"^KV_CACHE_MARGIN_FRACTION = ([\d.]+)", extensible, re.M)
    runner_v2 = _read(v / "v1" / "worker" / "gpu" / "model_runner.py")
    v2_estimate = re.search(r"def profile_cudagraph_memory.*?(?=\n    (?:def|@))", runner_v2, re.S)
    fusion = fields["fusion"].split("/")
    return {
        "release": release.name,
        "estimate_cudagraphs_default": estimate.group(1) if estimate else None,
        "estimate_platform": _platform(worker),
        # the extensible cache's value where the field is unset (0.34), else the plain default
        "unset_gpu_memory_utilization": float((resolved or util).group(1))
        if (resolved or util)
        else None,
        "fusion_capability": fusion[0],
        "fusion_needs_pp_1": fusion[1] == "pp1",
        "non_kv_from_total_consumed": fields["consumed"] == "True",
        "extensible_kv_cache": fields["extensible"] == "True",
        "margin_floor_gib": [int(floor.group(2)), int(floor.group(1))] if floor else None,
        "margin_fraction": float(fraction.group(1)) if fraction else None,
        "v2_default": fields["v2"],
        "v2_listed_needs_dense_unquantized": bool(default_v2)
        and "not model_config.is_moe and not model_config.is_quantized" in default_v2.group(0),
        "v2_architectures": _v2_architectures(config),
        # V2's profile_cudagraph_memory runs the capture estimate (0.34: unless the
        # extensible cache measures it after warm-up instead)
        "v2_estimates_graphs": bool(v2_estimate)
        and "_profile_cudagraph_memory(self)" in v2_estimate.group(0),
    }


def main(argv: list[str]) -> int:
    out = None
    if len(argv) == 3 and argv[1] == "--json":
        out = Path(argv[2])
        argv = argv[:1]
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python tools/memory_profile_rules.py FOLDER [--json OUT]", file=sys.stderr)
        return 2
    releases = [
        r for r in sorted(Path(argv[0]).iterdir(), key=_version_key) if (r / "vllm").is_dir()
    ]
    if out is not None:
        records = [facts(release) for release in releases]
        out.write_text(json.dumps({"releases": records}, indent=1) + "\n")
        return 0
    for release in releases:
        print(describe(release))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
