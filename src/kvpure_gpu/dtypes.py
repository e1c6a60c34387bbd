"""The table between kvpure's torch-free ``KVDtype`` and ``torch.dtype``.

``KVDtype`` values are named as torch names its dtypes, so the table is
built by name once, at import; both directions are total over what they
accept and raise :class:`~kvpure.errors.UnsupportedDtypeError` otherwise.
"""

from __future__ import annotations

from types import MappingProxyType

import torch

from kvpure.runtime_types import typed
from kvpure.specs import KVDtype
from kvpure_gpu.errors import UnsupportedDtypeError


def _build_table() -> dict[KVDtype, torch.dtype]:
    table: dict[KVDtype, torch.dtype] = {}
    for member in KVDtype:
        candidate = getattr(torch, str(member.value), None)
        if isinstance(candidate, torch.dtype):
            table[member] = candidate
    return table


_TO_TORCH = MappingProxyType(_build_table())
_FROM_TORCH = MappingProxyType({v: k for k, v in _TO_TORCH.items()})


@typed
def to_torch_dtype(dtype: KVDtype) -> torch.dtype:
    """The ``torch.dtype`` of a ``KVDtype``."""
    try:
        return _TO_TORCH[dtype]
    except KeyError:
        raise UnsupportedDtypeError(dtype=str(dtype.value), direction="torch") from None


@typed
def from_torch_dtype(dtype: torch.dtype) -> KVDtype:
    """The ``KVDtype`` of a ``torch.dtype``."""
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        raise UnsupportedDtypeError(
            dtype=str(dtype).removeprefix("torch."), direction="kvpure KVDtype"
        ) from None
