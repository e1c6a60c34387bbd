"""Bad arguments to the public events API: typed errors naming the argument, in a
fresh process without the test hooks (beartype is not there to catch them first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_SCRIPT = r"""
import json, math
from kvpure.errors import KVPureError
from kvpure.events import *
router = RouterSettings(algorithm="sha256", block_size=4, seed="0")
stored = dict(block_hashes=(1,), parent_block_hash=None, token_ids=(1, 2), block_size=2,
              lora_id=None, medium="GPU", lora_name=None)
batch = KVEventBatch(ts=1.0, events=())
cases = {
    "payload": lambda: decode_batch("93"),
    "strict": lambda: decode_report(b"\x90", strict=1),
    "profile": lambda: decode_batch(b"\x90", profile="vllm-0.33"),
    "BlockStored.block_size": lambda: BlockStored(**{**stored, "block_size": True}),
    "BlockStored.token_ids[0]": lambda: BlockStored(**{**stored, "token_ids": ("a",)}),
    "BlockStored.lookahead_token_ids[0]": lambda: BlockStored(
        **{**stored, "lookahead_token_ids": (1,)}),
    "BlockStored.parent_block_hash": lambda: BlockStored(block_hashes=(1,)),
    "KVEventBatch.ts": lambda: KVEventBatch(ts=math.nan, events=()),
    "KVEventBatch.data_parallel_rank": lambda: KVEventBatch(
        ts=1.0, events=(), data_parallel_rank=True),
    "frames": lambda: decode_message([1, 2, 3]),
    "seq": lambda: EventMessage(topic="", seq=True, batch=batch),
    "start_seq": lambda: encode_replay_request(1.5),
    "data": lambda: split_capture(None),
    "event": lambda: LiveBlocks().apply(None),
    "block_hash": lambda: LiveBlocks().copies_of(None, group_idx=0),
    "batches": lambda: audit_batches(None, router),
    "batches[0]": lambda: audit_batches([1], router),
    "router": lambda: audit_batches([], None),
    "AuditOptions.candidate_block_sizes[0]": lambda: AuditOptions(candidate_block_sizes=(True,)),
    "AuditOptions.diagnose": lambda: AuditOptions(diagnose=1),
    "num_hash_lookahead_tokens": lambda: RouterSettings(
        algorithm="sha256", block_size=4, seed="0", num_hash_lookahead_tokens=True),
    "block_size": lambda: RouterSettings(algorithm="sha256", block_size=math.nan, seed="0"),
    "algorithm": lambda: RouterSettings(algorithm="md5", block_size=4, seed="0"),
    "name": lambda: get_event_profile(None),
}
result = {}
for argument, call in cases.items():
    try:
        call()
        result[argument] = "accepted"
    except KVPureError as err:
        result[argument] = str(err)
    except Exception as err:
        result[argument] = "untyped " + type(err).__name__
print(json.dumps(result))
"""


def test_bad_arguments_are_typed_errors_naming_the_argument() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    result = json.loads(done.stdout)
    for argument, message in result.items():
        # the message starts with the argument's name, whole (not a name that holds it)
        assert message.startswith(f"{argument}: "), (argument, message)
        assert not message.startswith(("accepted", "untyped")), (argument, message)
