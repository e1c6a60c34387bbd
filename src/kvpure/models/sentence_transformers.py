"""A Sentence Transformers model folder's ``modules.json``: the module types it lists.

vLLM asks, before its architecture registry, whether the model folder holds a
Sentence Transformers ``modules.json`` listing a pooling module
(``get_pooling_config`` in vllm/transformers_utils/config.py, called first by
``ModelConfig._get_default_runner_type``): such a model runs the pooling runner
even when its architecture is a ``*ForCausalLM`` (Qwen3-Embedding, the
GTE-Qwen family). Which module types count as pooling is the release's rule
(:attr:`kvpure.serve.rules.ServeRules.sentence_transformers_pooling_modules`);
this module only reads the file, as a stream with a stated bound, into a layout
field (:attr:`kvpure.models.layout.ModelLayout.sentence_transformers_modules`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.layout import ModelLayout
from kvpure.user_files import read_regular_text

__all__ = [
    "MAX_MODULES_JSON_BYTES",
    "MAX_MODULES",
    "MODULES_FILE",
    "read_module_types",
    "with_folder_modules",
]

MODULES_FILE: Final = "modules.json"
MAX_MODULES_JSON_BYTES: Final = 1 * 2**20
"""The largest ``modules.json`` read (real ones are a few hundred bytes)."""
MAX_MODULES: Final = 256
"""The most modules one ``modules.json`` may list (real ones list 2 to 5)."""


def read_module_types(folder: Path) -> tuple[str, ...]:
    """The ``type`` of every module ``folder/modules.json`` lists, in order; () without one.

    A file that is not a JSON list of objects each with a string ``type`` is an
    :class:`~kvpure.errors.InvalidFieldError` naming ``modules.json`` (vLLM
    fails on it too, with a KeyError or a TypeError).
    """
    path = folder / MODULES_FILE
    if not path.exists():
        return ()
    # a folder, pipe or device named modules.json is refused in one line, never waited on
    text = read_regular_text(path, MAX_MODULES_JSON_BYTES, MODULES_FILE)
    try:
        modules = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise InvalidFieldError(
            field=MODULES_FILE,
            value=str(path),
            reason=f"is not JSON ({err}); fix or remove the file",
        ) from None
    if not isinstance(modules, list):
        raise InvalidFieldError(
            field=MODULES_FILE,
            value=type(modules).__name__,
            reason="must be a JSON list of modules, each an object with a 'type'",
        )
    if len(modules) > MAX_MODULES:
        raise InvalidFieldError(
            field=MODULES_FILE,
            value=f"{len(modules)} modules",
            reason=f"lists at most {MAX_MODULES} modules",
        )
    types: list[str] = []
    for index, module in enumerate(modules):
        kind = module.get("type") if isinstance(module, dict) else None
        if not isinstance(kind, str):
            raise InvalidFieldError(
                field=f"{MODULES_FILE}[{index}].type",
                value=repr(module)[:80],
                reason="every module must be an object with a string 'type'",
            )
        types.append(kind)
    return tuple(types)


def with_folder_modules(layout: ModelLayout, folder: Path | None) -> ModelLayout:
    """``layout`` with the module types of ``folder``'s ``modules.json`` (unchanged without)."""
    if folder is None:
        return layout
    types = read_module_types(folder)
    if not types:
        return layout
    return replace(layout, sentence_transformers_modules=types)
