"""``--vllm VERSION``: the one option every answering command shares.

The value is kept as the user typed it (``None`` when absent) so that a file's own
``"vllm_version"`` can still apply: :func:`kvpure.versions.resolve_vllm_version`
orders flag > file > default where the command reads its input.
"""

from __future__ import annotations

import argparse

from kvpure.versions import DEFAULT_VLLM_VERSION, KNOWN_VLLM_VERSIONS

__all__ = ["add_vllm_argument"]


def add_vllm_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--vllm VERSION`` (``0.26``, ``0.33``, ``0.34`` or ``X.Y.0``; default the newest)."""
    parser.add_argument(
        "--vllm",
        metavar="VERSION",
        default=None,
        help=(
            "the vLLM release to answer for: "
            f"{', '.join(KNOWN_VLLM_VERSIONS)} (or X.Y.0); default {DEFAULT_VLLM_VERSION}, "
            'else the input file\'s "vllm_version"'
        ),
    )
