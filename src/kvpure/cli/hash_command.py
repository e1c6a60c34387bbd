"""``kvpure hash REQUEST.json``: the block hashes vLLM computes for a request.

The NONE_HASH seed is ``--seed`` (the server's PYTHONHASHSEED). Without it
nothing is read from the environment: the profile's rule for an unset
PYTHONHASHSEED applies, which for ``vllm-0.33`` with sha256 or sha256_cbor is
the fixed seed ``"vllm-none-hash"``; where that rule is a random NONE_HASH
(every algorithm of ``vllm-0.26``, xxhash* of ``vllm-0.33``) the command stops
with exit code 2 unless ``--random-none-hash`` asks for one.

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
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.request_state import RequestBlockHashes
from kvpure.hashing.scheme import DEFAULT_HASH_PROFILE, HASH_PROFILES, HashScheme, get_hash_profile
from kvpure.hashing.types import maybe_convert_block_hash
from kvpure.interop.hashing import hash_case_from_json


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
    parser.add_argument(
        "--profile",
        default=DEFAULT_HASH_PROFILE.name,
        choices=tuple(HASH_PROFILES),
        help=f"vLLM rules to follow (default: {DEFAULT_HASH_PROFILE.name})",
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
        help="tokens per hashed block (vLLM's hash_block_size), where the file has none",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the NONE_HASH, the block hashes (hex and as vLLM's event ints) and the "
        "scheme used",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    data = read_json(args.request)
    case = hash_case_from_json(
        data, share_equal_strings=args.share_equal_strings, block_size=args.block_size
    )
    scheme = HashScheme.from_seed(
        algorithm=args.algo,
        block_size=case.block_size,
        seed=args.seed,
        profile=get_hash_profile(args.profile),
        random_none_hash=args.random_none_hash,
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
            "seed": args.seed,
        }
        out = {
            "block_hashes": hashes,
            "event_block_hashes": [e.hex() if isinstance(e, bytes) else e for e in events],
            "none_hash": scheme.none_hash.hex(),
            "scheme": scheme_json,
            "num_tokens": state.num_tokens,
        }
        print(json.dumps(out))
        return 0
    seed = "unset" if args.seed is None else repr(args.seed)
    print(
        f"{len(hashes)} block hashes ({scheme.algorithm}, block_size={scheme.block_size} tokens, "
        f"profile {scheme.profile.name}, PYTHONHASHSEED {seed}, {state.num_tokens} tokens)"
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
