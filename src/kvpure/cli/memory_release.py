"""``--vllm`` naming a V1 release that kvpure plans by a neighbour's rules.

kvpure reproduces the planner, hashing and cache manager of a few releases
(:data:`kvpure.versions.KNOWN_VLLM_VERSIONS`), but the start-up memory profile
of every V1 release from 0.10 to 0.34 (:mod:`kvpure.memory_profile.releases`).
A start-up log of, say, vLLM 0.11 is replayed with ``--vllm 0.11``: the memory
estimate follows 0.11's own formula, and the rest of the plan follows the
oldest reproduced release whose rules cover it (0.26 for 0.10-0.26, 0.33 for
0.27-0.33). The report names both (``planned as vLLM 0.26`` and the memory
profile's range). Releases before 0.10 run the V0 engine and are refused in
one line (:class:`~kvpure.memory_profile.releases.V0EngineError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.versions import KNOWN_VLLM_VERSIONS, UnknownVllmVersionError, normalize_vllm_version

#: A release as (major, minor), as :data:`kvpure.memory_profile.releases.Version` holds it
#: (that module is imported only for a release kvpure does not reproduce).
Version = tuple[int, int]

__all__ = ["planning_release", "split_release_options"]

_VLLM: Final = "vllm"
_PROFILE: Final = "memory_profile_version"


def _key(text: str) -> Version:
    major, minor = text.split(".")
    return int(major), int(minor)


def planning_release(version: Version) -> str:
    """The oldest reproduced release at or after ``version`` (its planner rules cover it)."""
    return next(
        (known for known in KNOWN_VLLM_VERSIONS if _key(known) >= version),
        KNOWN_VLLM_VERSIONS[-1],
    )


def split_release_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with a V1 ``--vllm`` outside the reproduced set split in two.

    The ``vllm`` option becomes :func:`planning_release`'s and, unless
    ``--memory-profile-version`` is given, the memory profile follows the
    release named. A reproduced release, or no ``--vllm``, changes nothing;
    V0 and unknown names raise a typed error naming ``--vllm``.
    """
    text = options.get(_VLLM)
    if text is None:
        return dict(options)
    try:
        normalize_vllm_version(text, field="--vllm")
    except UnknownVllmVersionError as unknown:
        if not isinstance(text, str):
            raise
        # The memory profile's release table: only for a release kvpure does not reproduce.
        from kvpure.memory_profile.releases import V0EngineError, parse_version

        try:
            version = parse_version(text, field="--vllm")
        except V0EngineError:
            raise
        except InvalidFieldError:
            raise unknown from None
        split = {**options, _VLLM: planning_release(version)}
        split.setdefault(_PROFILE, text.strip().lstrip("v"))
        return split
    return dict(options)
