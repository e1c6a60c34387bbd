"""The audit of lookahead servers (vLLM 0.33/0.34 with EAGLE/MTP) and of Mamba groups.

Lookahead: the events are built from vLLM 0.34's own lookahead hashes
(``hashes_lookahead.json``: ``get_request_block_hasher(B, fn, L)``) of plain
requests, as ``BlockPool.cache_full_blocks`` publishes them: the blocks' tokens,
``lookahead_token_ids`` = the L tokens after each block, no extra keys.

Mamba: a group that keeps only some blocks publishes their hashes and keys but
the tokens of all; a salt or an image on a block it left out cannot be seen in
the event, so the audit must say "unverifiable", never "disagrees", with the
right settings, and still flag and name a wrong setting.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from beartype.roar import BeartypeCallHintParamViolation
from msgspec.structs import replace as struct_replace

import kvpure.cli as cli
from kvpure.errors import InvalidFieldError
from kvpure.events import (
    VLLM_0_33_EVENTS,
    AuditOptions,
    AuditStatus,
    BlockStored,
    ExtraKey,
    KVEventBatch,
    RouterSettings,
    SettingChange,
    audit_batches,
    capture_record,
    encode_batch,
)
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    VLLM_0_34,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    hash_prompt,
    maybe_convert_block_hash,
)
from kvpure.interop.kv_events import event_from_json
from tests.conftest import DATA_DIR

LOOKAHEAD = json.loads((DATA_DIR / "vllm-0.34.0" / "hashes_lookahead.json").read_text())
SEED = LOOKAHEAD["pythonhashseed"]
PLAIN_CASES = [
    case
    for case in LOOKAHEAD["cases"]
    if not (case["lora_name"] or case["cache_salt"] or case["mm_features"])
    and case["prompt_embeds"] is None
    and not case["appended_output_tokens"]
]


def _event(case: dict[str, Any], key: str, *, as_int: bool = True) -> BlockStored:
    """vLLM's BlockStored for the prompt's blocks (one event, the request's first step)."""
    golden = case["hashes"][key]
    lookahead = golden["num_hash_lookahead_tokens"]
    size = case["block_size"]
    tokens = case["prompt_token_ids"]
    digests = [bytes.fromhex(h) for h in golden["block_hashes"]]
    blocks = len(digests)
    return BlockStored(
        block_hashes=tuple(
            maybe_convert_block_hash(d, use_int_block_hashes=as_int) for d in digests
        ),
        parent_block_hash=None,
        token_ids=tuple(tokens[: blocks * size]),
        block_size=size,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        extra_keys=(None,) * blocks,
        group_idx=0,
        kv_cache_spec_kind="full_attention",
        lookahead_token_ids=tuple(
            tuple(tokens[(j + 1) * size : (j + 1) * size + lookahead]) for j in range(blocks)
        ),
    )


def _cases() -> list[tuple[dict[str, Any], str]]:
    return [(case, key) for case in PLAIN_CASES for key in case["hashes"]]


def test_the_lookahead_goldens_hold_plain_requests() -> None:
    assert len(PLAIN_CASES) >= 2
    assert {c["hashes"][k]["num_hash_lookahead_tokens"] for c, k in _cases()} == {1, 3}


@pytest.mark.parametrize(("case", "key"), _cases(), ids=[f"{c['name']}-{k}" for c, k in _cases()])
def test_a_lookahead_server_agrees_under_its_l(case: dict[str, Any], key: str) -> None:
    lookahead = case["hashes"][key]["num_hash_lookahead_tokens"]
    algorithm = key.split("/", 1)[1]
    for as_int in (True, False):
        batches = [KVEventBatch(ts=0.0, events=(_event(case, key, as_int=as_int),))]
        for profile in (VLLM_0_33, VLLM_0_34):
            router = RouterSettings(
                algorithm=algorithm,
                block_size=case["block_size"],
                seed=SEED,
                profile=profile,
                num_hash_lookahead_tokens=lookahead,
            )
            assert audit_batches(batches, router).all_agree
        # a router without lookahead (L = 0) is wrong, and L is named as the setting
        wrong = RouterSettings(algorithm=algorithm, block_size=case["block_size"], seed=SEED)
        report = audit_batches(batches, wrong)
        assert report.count(AuditStatus.DISAGREES) == 1
        assert report.likely_explanation() == (
            SettingChange("num_hash_lookahead_tokens", 0, lookahead),
        )
        # a router with another L than the server's
        other = struct_replace_router(wrong, num_hash_lookahead_tokens=lookahead % 3 + 1)
        report = audit_batches(batches, other)
        assert not report.all_agree
        assert report.likely_explanation() == (
            SettingChange("num_hash_lookahead_tokens", lookahead % 3 + 1, lookahead),
        )


def struct_replace_router(router: RouterSettings, **changes: Any) -> RouterSettings:
    return replace(router, **changes)


def test_a_wrong_seed_under_lookahead_is_named() -> None:
    case, key = _cases()[0]
    batches = [KVEventBatch(ts=0.0, events=(_event(case, key),))]
    lookahead = case["hashes"][key]["num_hash_lookahead_tokens"]
    router = RouterSettings(
        algorithm=key.split("/", 1)[1],
        block_size=case["block_size"],
        seed="7",
        num_hash_lookahead_tokens=lookahead,
    )
    report = audit_batches(batches, router, AuditOptions(candidate_seeds=(SEED,)))
    assert report.likely_explanation() == (SettingChange("seed", "7", SEED),)


def test_lookahead_lists_that_contradict_the_tokens_are_unverifiable() -> None:
    case, key = _cases()[0]
    event = _event(case, key)
    lists = event.lookahead_token_ids
    assert lists is not None
    bad = struct_replace(event, lookahead_token_ids=((999_999,) * len(lists[0]), *lists[1:]))
    router = RouterSettings(
        algorithm=key.split("/", 1)[1],
        block_size=case["block_size"],
        seed=SEED,
        num_hash_lookahead_tokens=len(lists[0]),
    )
    audit = audit_batches([KVEventBatch(ts=0.0, events=(bad,))], router).events[0]
    assert audit.status is AuditStatus.UNVERIFIABLE
    assert "lookahead_token_ids[0] are not the tokens after block 0" in audit.reason
    uneven = struct_replace(event, lookahead_token_ids=((1,), *(((1, 2),) * (len(lists) - 1))))
    if len(lists) > 1:
        audit = audit_batches([KVEventBatch(ts=0.0, events=(uneven,))], router).events[0]
        assert "different lengths" in audit.reason


def test_router_settings_give_the_seed_once() -> None:
    with pytest.raises(InvalidFieldError, match="given once"):
        audit_batches(
            [],
            RouterSettings(algorithm="sha256", block_size=16, seed="0"),
            AuditOptions(seed="0"),
        )
    with pytest.raises(InvalidFieldError, match="num_hash_lookahead_tokens"):
        RouterSettings(
            algorithm="sha256",
            block_size=16,
            seed="0",
            profile=VLLM_0_26,
            num_hash_lookahead_tokens=1,
        )
    for bad in (
        {"block_size": True},
        {"block_size": 0},
        {"num_hash_lookahead_tokens": -1},
        {"algorithm": "md5"},
        {"seed": 0},
    ):
        fields: dict[str, Any] = {"algorithm": "sha256", "block_size": 16, "seed": "0", **bad}
        with pytest.raises((TypeError, ValueError, BeartypeCallHintParamViolation)) as caught:
            RouterSettings(**fields)  # beartype's check under the test hooks, kvpure's else
        assert next(iter(bad)) in str(caught.value)
    scheme = RouterSettings(
        algorithm="sha256", block_size=16, seed="0", num_hash_lookahead_tokens=2
    ).scheme()
    assert (scheme.num_hash_lookahead_tokens, scheme.profile) == (2, VLLM_0_34)


def test_cli_reads_l_from_the_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case, key = next((c, k) for c, k in _cases() if k.startswith("L3/"))
    batch = KVEventBatch(ts=0.0, events=(_event(case, key),), data_parallel_rank=0)
    path = tmp_path / "lookahead.kvcap"
    path.write_bytes(capture_record(encode_batch(batch, profile=VLLM_0_33_EVENTS)))
    argv = ["events", "audit", str(path), "--algo", key.split("/", 1)[1], "--seed", SEED, "--json"]
    code = cli.main([*argv, "--profile", "vllm-0.34"])
    out = capsys.readouterr().out
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert (code, summary["agrees"], summary["num_hash_lookahead_tokens"]) == (0, 1, 3)
    assert summary["profile"] == "vllm-0.34"
    code = cli.main([*argv, "--lookahead", "0"])
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]
    assert code == 1
    assert summary["likely"] == [{"setting": "num_hash_lookahead_tokens", "yours": 0, "server": 3}]
    code = cli.main([*argv, "--lookahead", "-1"])
    assert code == 2
    assert "--lookahead" in capsys.readouterr().err


# --- Mamba: blocks the group does not publish -------------------------------------------------

SCHEME = HashScheme.from_seed(algorithm="sha256_cbor", block_size=4, seed="0", profile=VLLM_0_26)
ROUTER = RouterSettings(algorithm="sha256_cbor", block_size=4, seed="0", profile=VLLM_0_26)


def _mamba_event(request: HashRequest, keep: list[int], keys: tuple[ExtraKey | None, ...]) -> Any:
    """What a Mamba group publishes for ``request``: the kept blocks' hashes and keys,
    every block's tokens."""
    digests = hash_prompt(SCHEME, request)
    return BlockStored(
        block_hashes=tuple(maybe_convert_block_hash(digests[i]) for i in keep),
        parent_block_hash=None,
        token_ids=request.prompt_token_ids_for_hashing[: len(digests) * 4],
        block_size=4,
        lora_id=None,
        medium="GPU",
        lora_name=request.lora_name,
        extra_keys=keys,
        group_idx=1,
        kv_cache_spec_kind="mamba",
    )


def _audit(event: BlockStored, router: RouterSettings = ROUTER, **options: Any) -> Any:
    batches = [KVEventBatch(ts=0.0, events=(event,))]
    return audit_batches(batches, router, AuditOptions(**options)).events[0]


TOKENS = tuple(range(100, 116))


def test_a_salt_on_a_block_mamba_leaves_out_is_unverifiable_not_disagrees() -> None:
    salted = HashRequest(prompt_token_ids=TOKENS, cache_salt="tenant-1")
    event = _mamba_event(salted, keep=[1, 3], keys=(None, None))  # the salt sat on block 0
    audit = _audit(event)
    assert audit.status is AuditStatus.UNVERIFIABLE
    assert "a cache salt or an image on a block it left out" in audit.reason
    assert audit.explanations == ()


def test_an_image_on_a_block_mamba_leaves_out_is_unverifiable() -> None:
    image = MultiModalFeature(identifier="img-1", offset=1, length=2)
    request = HashRequest(prompt_token_ids=TOKENS, mm_features=(image,))
    event = _mamba_event(request, keep=[2, 3], keys=(None, None))
    assert _audit(event).status is AuditStatus.UNVERIFIABLE
    # the keys of a kept block with an image are published: the event cannot place them
    kept = _mamba_event(request, keep=[0, 3], keys=(ExtraKey((("img-1", 1),)), None))
    assert _audit(kept).status is AuditStatus.UNVERIFIABLE


def test_mamba_blocks_without_keys_agree_and_a_wrong_setting_is_named() -> None:
    plain = HashRequest(prompt_token_ids=TOKENS)
    event = _mamba_event(plain, keep=[1, 3], keys=(None, None))
    assert _audit(event).status is AuditStatus.AGREES
    wrong = _audit(event, struct_replace_router(ROUTER, seed="7"), candidate_seeds=("0",))
    assert wrong.status is AuditStatus.DISAGREES
    assert wrong.explanations == ((SettingChange("seed", "7", "0"),),)
    algorithm = _audit(event, struct_replace_router(ROUTER, algorithm="sha256"))
    assert algorithm.status is AuditStatus.DISAGREES
    assert algorithm.explanations == ((SettingChange("algorithm", "sha256", "sha256_cbor"),),)
    lora = HashRequest(prompt_token_ids=TOKENS, lora_name="sql")
    keyed = _mamba_event(lora, keep=[3], keys=(ExtraKey(("sql",)),))
    assert _audit(keyed).status is AuditStatus.AGREES  # the LoRA name sits on every block


def _attention_event(request: HashRequest, keys: tuple[ExtraKey | None, ...]) -> BlockStored:
    digests = hash_prompt(SCHEME, request)
    return BlockStored(
        block_hashes=tuple(maybe_convert_block_hash(d) for d in digests),
        parent_block_hash=None,
        token_ids=request.prompt_token_ids_for_hashing[: len(digests) * 4],
        block_size=4,
        lora_id=None,
        medium="GPU",
        lora_name=request.lora_name,
        extra_keys=keys,
        group_idx=0,
        kv_cache_spec_kind="full_attention",
    )


def test_a_hybrid_models_attention_group_tells_the_keys_mamba_left_out() -> None:
    # vLLM publishes one event per group and step; the attention group publishes every
    # block's keys (the salt on block 0), so the Mamba event of the same step agrees,
    # whichever group comes first in the batch
    salted = HashRequest(prompt_token_ids=TOKENS, cache_salt="tenant-1")
    keys = (ExtraKey(("tenant-1",)), None, None, None)
    attention = _attention_event(salted, keys)
    mamba = _mamba_event(salted, keep=[1, 3], keys=(None, None))
    for events in ((mamba, attention), (attention, mamba)):
        report = audit_batches([KVEventBatch(ts=0.0, events=events)], ROUTER)
        assert [a.status for a in report.events] == [AuditStatus.AGREES] * 2
        assert [a.event_index for a in report.events] == [0, 1]  # stream order kept
    alone = audit_batches([KVEventBatch(ts=0.0, events=(mamba,))], ROUTER)
    assert alone.events[0].status is AuditStatus.UNVERIFIABLE
    # a wrong seed is still named on both
    wrong = audit_batches(
        [KVEventBatch(ts=0.0, events=(mamba, attention))],
        struct_replace_router(ROUTER, seed="7"),
        AuditOptions(candidate_seeds=("0",)),
    )
    assert wrong.likely_explanation() == (SettingChange("seed", "7", "0"),)
    assert wrong.count(AuditStatus.AGREES) == 0


# --- vLLM 0.34's own events (cache_replay goldens): clean under the server's settings ------

REPLAYS_034 = sorted((DATA_DIR / "vllm-0.34.0" / "cache_replay").glob("*.json"))


@pytest.mark.parametrize("path", REPLAYS_034, ids=[p.stem for p in REPLAYS_034])
def test_034_replays_audit_clean(path: Path) -> None:
    golden = json.loads(path.read_text())
    config, settings = golden["kv_cache_config"], golden["trace"]["replay"]
    batches = [
        KVEventBatch(ts=0.0, events=tuple(event_from_json(e) for e in record["events"]))
        for record in golden["records"]
        if record["events"]
    ]
    lora_paths = tuple(
        (op["lora_name"], op.get("lora_path", f"/adapters/{op['lora_name']}"))
        for op in golden["trace"]["ops"]
        if op.get("lora_name")
    )
    router = RouterSettings(
        algorithm=config["hash_fn"],
        block_size=config["hash_block_size"],
        seed=settings["pythonhashseed"],
        profile=VLLM_0_34,
        num_hash_lookahead_tokens=config["num_hash_lookahead_tokens"],
    )
    report = audit_batches(batches, router, AuditOptions(lora_paths=lora_paths))
    assert report.events
    assert report.all_agree, [a for a in report.events if a.status is not AuditStatus.AGREES]
    wrong = audit_batches(batches, replace(router, seed="7"), AuditOptions(lora_paths=lora_paths))
    assert not wrong.all_agree
    assert wrong.likely_explanation() == (SettingChange("seed", "7", settings["pythonhashseed"]),)
