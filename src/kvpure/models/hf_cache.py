"""Finding a model's config.json in the local Hugging Face cache, never downloading.

``kvpure plan org/name`` reads the model the way ``huggingface_hub`` does
with ``local_files_only``: the cache folder is ``$HF_HUB_CACHE``, else
``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub``; the model lives in
``models--org--name/``, whose ``refs/main`` names the snapshot
(``snapshots/<revision>/config.json``). ``org/name@REV`` reads the snapshot
``REV`` (a revision folder or a ref under ``refs/``). A model that is not
there raises :class:`~kvpure.models.errors.ModelNotCachedError`, one line
naming every path looked at. A cached repository folder given as a path
(``.../hub/models--org--name``) is read the same way.

Nothing outside the cache is reached: the id and the revision are checked
first (plain names, no ``..``, no absolute or empty parts:
:class:`~kvpure.errors.InvalidFieldError`), a ref file is followed only when
it holds one plain name, and the config.json found must resolve (links
followed, as huggingface_hub's snapshot links to ``blobs/``) inside the
repository folder, else :class:`~kvpure.models.errors.ModelNotCachedError`
says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.errors import ModelNotCachedError
from kvpure.user_files import open_regular

__all__ = [
    "cached_repository_root",
    "check_model_id",
    "config_argument",
    "hub_cache_dir",
    "is_model_id",
    "resolve_model_config",
    "resolve_model_folder",
]

_ID: Final = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(@[\w.-]{1,96})?$"
)
_REF_BYTES: Final = 256
"""A ref file holds one commit hash; more than this is not a ref."""
_NAME: Final = re.compile(r"[A-Za-z0-9][\w.-]{0,95}")
"""One path part of an id, a revision or a ref's content: no separator, no leading dot."""


def _require_str(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidFieldError(
            field=field, value=type(value).__name__, reason="must be a string (a path or hub id)"
        )


def check_model_id(model: object) -> tuple[str, str, str]:
    """``(org, name, revision)`` of a hub id; a typed error for anything else.

    Each part is a plain name (letters, digits, ``_.-``, not starting with a
    dot, no ``..``), so no part can climb out of the cache folder.
    """
    if not isinstance(model, str):
        raise InvalidFieldError(
            field="model", value=type(model).__name__, reason="must be a hub id string (org/name)"
        )
    repo, at, revision = model.partition("@")
    org, slash, name = repo.partition("/")
    parts = (org, name, revision) if at else (org, name)
    if not slash or not all(_NAME.fullmatch(p) and ".." not in p for p in parts):
        raise InvalidFieldError(
            field="model",
            value=model[:120],
            reason="must be a hub id org/name or org/name@REVISION of plain names "
            "(letters, digits, '_', '.', '-'; no '..', no '/' or absolute parts)",
        )
    return org, name, revision


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The Hugging Face hub cache folder ``huggingface_hub`` would use."""
    env = os.environ if env is None else env
    if not isinstance(env, Mapping):
        raise InvalidFieldError(
            field="env", value=type(env).__name__, reason="must map variable names to strings"
        )
    for key in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        if env.get(key) is not None and not isinstance(env.get(key), str):
            raise InvalidFieldError(field=key, value=env.get(key), reason="must be a string path")
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "huggingface" / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def is_model_id(text: str) -> bool:
    """Whether ``text`` is shaped like a hub id (``org/name``, optionally ``@REV``)."""
    _require_str("text", text)
    return (
        _ID.match(text) is not None
        and not text.endswith(".json")
        and ".." not in text.split("@", 1)[0]
    )


def _read_ref(path: Path) -> str | None:
    """The one plain name a ref file holds; None (ignored) for anything else."""
    try:
        with open_regular(path) as handle:
            text = handle.read(_REF_BYTES + 1)
    except (OSError, InvalidFieldError):
        return None
    name = text.decode("ascii", "replace").strip()
    if len(text) > _REF_BYTES or not _NAME.fullmatch(name) or ".." in name:
        return None
    return name


def _inside(config: Path, folder: Path, model: str, looked: list[Path]) -> Path:
    """``config`` if it resolves (links followed) inside ``folder``; else refused."""
    try:
        real = config.resolve(strict=True)
        root = folder.resolve(strict=True)
    except (OSError, RuntimeError):  # a link loop or a vanished file
        raise ModelNotCachedError(
            model=model, looked=tuple(str(p) for p in looked), hint="its links do not resolve"
        ) from None
    if not real.is_relative_to(root):
        raise ModelNotCachedError(
            model=model,
            looked=tuple(str(p) for p in looked),
            hint=f"{config} resolves to {real}, outside the cached repository folder {root}; "
            "refused",
        )
    return config


def cached_repository_root(folder: Path) -> Path | None:
    """The repository folder (``models--org--name``, links followed) of a snapshot folder
    of the cache (``.../models--org--name/snapshots/REV``); None for any other folder.

    Every file read from a snapshot must resolve inside it, as its config.json must
    (huggingface_hub's snapshot files are links into the repository's ``blobs/``).
    """
    parent = folder.parent
    if parent.name != "snapshots" or not parent.parent.name.startswith("models--"):
        return None
    try:
        return parent.parent.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def resolve_model_config(model: str, env: Mapping[str, str] | None = None) -> Path:
    """The cached config.json of hub id ``model`` (``org/name`` or ``org/name@REV``)."""
    org, name, revision = check_model_id(model)
    return _snapshot_config(hub_cache_dir(env) / f"models--{org}--{name}", revision, model)


def resolve_model_folder(model: str, env: Mapping[str, str] | None = None) -> Path:
    """The cached snapshot folder of hub id ``model``: its config.json's folder.

    The weights (``*.safetensors``, ``model.safetensors.index.json``) lie beside
    the config.json there; the memory profile reads their headers from it.
    """
    return resolve_model_config(model, env).parent


def _snapshot_config(folder: Path, revision: str, model: str) -> Path:
    """The config.json of a cached repository folder (``models--org--name``)."""
    looked: list[Path] = []
    ref = folder / "refs" / (revision or "main")
    commit = _read_ref(ref)
    looked.append(ref)
    candidates = [commit] if commit else []
    if revision:
        candidates.append(revision)
    for candidate in candidates:
        config = folder / "snapshots" / candidate / "config.json"
        looked.append(config)
        if config.is_file():
            return _inside(config, folder, model, looked)
    if not revision and commit is None:
        snapshots = folder / "snapshots"
        found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
        looked.append(snapshots / "*" / "config.json")
        if len(found) == 1:
            return _inside(found[0], folder, model, looked)
        if len(found) > 1:
            repo = model.split("@", 1)[0]
            raise ModelNotCachedError(
                model=model,
                looked=tuple(str(p) for p in looked),
                hint="several snapshots and no refs/main; name one as "
                + " or ".join(f"{repo}@{p.parent.name}" for p in found[:3]),
            )
    raise ModelNotCachedError(model=model, looked=tuple(str(p) for p in looked))


def config_argument(argument: str, env: Mapping[str, str] | None = None) -> str:
    """The file to read for a command-line model argument.

    ``-``, an existing file or folder: itself (a folder is read as its
    config.json), except a cached repository folder (``models--org--name``,
    with ``snapshots/`` and no config.json of its own), read at ``refs/main``;
    a hub id that is no local path: its cached config.json; anything else:
    itself (reading it then fails naming it).
    """
    _require_str("argument", argument)
    path = Path(argument)
    if path.is_dir() and not (path / "config.json").exists() and (path / "snapshots").is_dir():
        return str(_snapshot_config(path, "", argument))
    if argument == "-" or path.exists() or not is_model_id(argument):
        return argument
    return str(resolve_model_config(argument, env))
