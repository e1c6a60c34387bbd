"""``kvpure hash REQUEST.json``: the block hashes vLLM computes for a request.

The NONE_HASH seed is ``--seed`` (the server's PYTHONHASHSEED). Without it
nothing is read from the environment: the profile's rule for an unset
PYTHONHASHSEED applies, which for ``vllm-0.33``/``vllm-0.34`` with sha256 or
sha256_cbor is the fixed seed ``"vllm-none-hash"``; where that rule is a random
NONE_HASH (every algorithm of ``vllm-0.26``, xxhash* of 0.33/0.34) the command
stops with exit code 2 unless ``--random-none-hash`` asks for one.

``--vllm`` picks the release (else the file's ``"vllm_version"``, else 0.34;
``--profile vllm-X.Y`` is its alias).
``--lookahead L`` (or the file's ``num_hash_lookahead_tokens``; the flag wins)
hashes each block with the L tokens after it, as a 0.33/0.34 server running
EAGLE, EAGLE3 or MTP with prefix caching does (L = 1); 0.26 has no lookahead.
Under 0.34 a token id outside signed int32 is refused naming its position.

Strings read from the file are distinct objects, as in a vLLM request built
from the same JSON; ``--share-equal-strings`` makes equal strings one object
(pickle writes a repeated object as a back-reference, so the sha256 and
xxhash algorithms then give the hashes of a vLLM request that was handed one
Python string in two places).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kvpure.cli.input_files import read_json
from kvpure.cli.vllm_option import add_vllm_argument
from kvpure.errors import InvalidFieldError
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.request_state import RequestBlockHashes
from kvpure.hashing.scheme import HASH_PROFILES, HashScheme, hash_profile_for_version
from kvpure.hashing.types import maybe_convert_block_hash
from kvpure.interop.hashing import hash_case_from_json
from kvpure.versions import normalize_vllm_version, resolve_vllm_version

DEFAULT_BLOCK_SIZE = 16
"""vLLM's default block size (``CacheConfig.block_size``), used where nothing gives one."""


def register(sub: Any) -> None:
    """Add the ``hash`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "hash",
        help="print the block hashes vLLM computes for a request",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "request", metavar="REQUEST.json", help="the request (see README); - for standard input"
    )
    parser.add_argument(
        "--algo", default="sha256", choices=HASH_ALGORITHM_NAMES, help="default: sha256"
    )
    parser.add_argument(
        "--seed",
        default=None,
        help="the server's PYTHONHASHSEED (default: unset, the profile's rule applies)",
    )
    add_vllm_argument(parser)
    parser.add_argument(
        "--profile",
        default=None,
        choices=tuple(HASH_PROFILES),
        help="alias of --vllm: vllm-0.26, vllm-0.33 or vllm-0.34",
    )
    parser.add_argument(
        "--lookahead",
        type=int,
        default=None,
        metavar="L",
        help="vLLM's num_hash_lookahead_tokens (0.33+; 1 for EAGLE/EAGLE3/MTP with prefix "
        "caching); default: the file's num_hash_lookahead_tokens, else 0",
    )
    parser.add_argument(
        "--random-none-hash",
        action="store_true",
        help="allow a random NONE_HASH where the profile's no-seed rule is random",
    )
    parser.add_argument(
        "--share-equal-strings",
        action="store_true",
        help="treat equal strings of the request as one object (pickle algorithms only "
        "notice; as when vLLM was given one Python string twice)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="tokens per hashed block (vLLM's hash_block_size), where the file has none "
        f"(default {DEFAULT_BLOCK_SIZE})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the NONE_HASH, the block hashes (hex and as vLLM's event ints), the "
        "scheme used and the vLLM version",
    )
    parser.set_defaults(run=run)


def _version(args: argparse.Namespace, file_value: str | None) -> str:
    """``--vllm`` or its alias ``--profile`` (both only if they agree), else the file's
    ``vllm_version``, else the default."""
    flag: str | None = args.vllm
    if args.profile is not None:
        aliased = args.profile.removeprefix("vllm-")
        if flag is not None and normalize_vllm_version(flag, field="--vllm") != aliased:
            raise InvalidFieldError(
                field="--profile",
                value=args.profile,
                reason=f"names another release than --vllm {flag}; give one of them",
            )
        flag = aliased
    return resolve_vllm_version(flag, file_value)


def run(args: argparse.Namespace) -> int:
    if args.vllm is not None:  # a bad --vllm is named before the file is read
        normalize_vllm_version(args.vllm, field="--vllm")
    if args.lookahead is not None and args.lookahead < 0:
        raise InvalidFieldError(
            field="--lookahead", value=args.lookahead, reason="must be 0 or more tokens"
        )
    data = read_json(args.request)
    case = hash_case_from_json(
        data,
        share_equal_strings=args.share_equal_strings,
        block_size=args.block_size,
        default_block_size=DEFAULT_BLOCK_SIZE,
    )
    version = _version(args, case.vllm_version)
    lookahead = args.lookahead
    if lookahead is None:
        lookahead = case.num_hash_lookahead_tokens or 0
    scheme = HashScheme.from_seed(
        algorithm=args.algo,
        block_size=case.block_size,
        seed=args.seed,
        profile=hash_profile_for_version(version),
        random_none_hash=args.random_none_hash,
        num_hash_lookahead_tokens=lookahead,
    )
    state = RequestBlockHashes.start(scheme, case.request)
    for step in case.appended_output_tokens:
        state = state.append_output_token_ids(step)
    hashes = [block_hash.hex() for block_hash in state.block_hashes]
    if args.json:
        events = [maybe_convert_block_hash(h) for h in state.block_hashes]
        scheme_json = {
            "algorithm": str(scheme.algorithm),
            "block_size": scheme.block_size,
            "profile": scheme.profile.name,
            "num_hash_lookahead_tokens": scheme.num_hash_lookahead_tokens,
            "seed": args.seed,
        }
        out = {
            "block_hashes": hashes,
            "vllm_version": version,
            "event_block_hashes": [e.hex() if isinstance(e, bytes) else e for e in events],
            "none_hash": scheme.none_hash.hex(),
            "scheme": scheme_json,
            "num_tokens": state.num_tokens,
        }
        print(json.dumps(out))
        return 0
    seed = "unset" if args.seed is None else repr(args.seed)
    print(
        f"vLLM {version}: {len(hashes)} block hashes ({scheme.algorithm}, "
        f"block_size={scheme.block_size} tokens, lookahead {scheme.num_hash_lookahead_tokens} "
        f"tokens, profile {scheme.profile.name}, PYTHONHASHSEED {seed}, "
        f"{state.num_tokens} tokens)"
    )
    print(f"NONE_HASH {scheme.none_hash.hex()}")
    for index, block_hash in enumerate(state.block_hashes):
        first = index * scheme.block_size
        last = first + scheme.block_size - 1
        event = maybe_convert_block_hash(block_hash)
        event_int = event.hex() if isinstance(event, bytes) else str(event)
        print(
            f"block {index:>4}  tokens {first:>6}-{last:<6} {block_hash.hex()}  event {event_int}"
        )
    return 0
