"""The hash audit against vLLM's own events (cache_replay and kv_events goldens).

Under the server's settings every BlockStored agrees; under a router's wrong
setting (seed, algorithm, block size, profile, hash form) the audit names
that setting and the server's value. The limits of what events let anyone
recompute are pinned down one by one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace as struct_replace

from kvpure.errors import InvalidFieldError
from kvpure.events import (
    AuditOptions,
    AuditStatus,
    BlockStored,
    ExtraKey,
    HashForm,
    KVEventBatch,
    ParentSource,
    SettingChange,
    audit_batches,
    decode_batch,
    iter_audit,
)
from kvpure.events.audit_check import hashed_keys
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    HashRequest,
    HashScheme,
    VllmHashProfile,
    get_hash_profile,
    hash_prompt,
    maybe_convert_block_hash,
    to_event_extra_keys,
)
from kvpure.interop.kv_events import event_from_json
from tests.conftest import GOLDEN_026, GOLDEN_033

REPLAY_DIR = GOLDEN_026 / "cache_replay"
REPLAYS = sorted(REPLAY_DIR.glob("*.json"))
ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")


@pytest.fixture(scope="module", params=[p.stem for p in REPLAYS])
def replay(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _replay(REPLAY_DIR / f"{request.param}.json")


def _replay(path: Path) -> dict[str, Any]:
    golden = json.loads(path.read_text())
    config, settings = golden["kv_cache_config"], golden["trace"]["replay"]
    ops = golden["trace"]["ops"]
    return {
        "batches": [
            KVEventBatch(ts=0.0, events=tuple(event_from_json(e) for e in record["events"]))
            for record in golden["records"]
            if record["events"]
        ],
        "algorithm": config["hash_fn"],
        "seed": settings["pythonhashseed"],
        "block_size": config["hash_block_size"],
        "lora_paths": tuple(
            (op["lora_name"], op.get("lora_path", f"/adapters/{op['lora_name']}"))
            for op in ops
            if op.get("lora_name")
        ),
        "int_hashes": settings["use_int_block_hashes"],
    }


REPLAY_DATA = {p.stem: _replay(p) for p in REPLAYS}


def _kv_events(path: Path) -> dict[str, Any]:
    golden = json.loads((path / "kv_events.json").read_text())
    return {
        name: [decode_batch(bytes.fromhex(b["frames_hex"][2])) for b in case["batches"]]
        for name, case in golden["cases"].items()
    }


KV_EVENTS = {"vllm-0.26": _kv_events(GOLDEN_026), "vllm-0.33": _kv_events(GOLDEN_033)}
SQL = (("sql", "/adapters/sql"),)


def _scheme(data: dict[str, Any], **changes: Any) -> HashScheme:
    settings = {
        "algorithm": data["algorithm"],
        "block_size": data["block_size"],
        "seed": data["seed"],
        "profile": VLLM_0_26,
    } | changes
    return HashScheme.from_seed(**settings)


def test_replays_audit_clean_under_the_servers_settings(replay: dict[str, Any]) -> None:
    options = AuditOptions(seed=replay["seed"], lora_paths=replay["lora_paths"])
    report = audit_batches(replay["batches"], _scheme(replay), options)
    assert report.events
    assert report.all_agree, [a for a in report.events if a.status is not AuditStatus.AGREES]
    assert report.likely_explanation() is None
    assert {a.parent for a in report.events} <= {
        ParentSource.ROOT,
        ParentSource.RECOMPUTED,
        ParentSource.PUBLISHED,
    }


@pytest.mark.parametrize("version", ["vllm-0.26", "vllm-0.33"])
@pytest.mark.parametrize("case", ["int_block_hashes", "bytes_block_hashes", "dp_rank_1_with_topic"])
def test_kv_events_audit_clean(version: str, case: str) -> None:
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=4, seed="0", profile=get_hash_profile(version)
    )
    report = audit_batches(KV_EVENTS[version][case], scheme, AuditOptions(lora_paths=SQL))
    assert report.all_agree
    assert (len(report.events), report.num_other_events) == (12, 12)


def _label(setting: str, value: object) -> str | int | None:
    """How the audit gives a setting's value: as data (a profile by its name)."""
    if isinstance(value, VllmHashProfile):
        return value.name
    assert value is None or isinstance(value, str | int)
    return value


_WRONG = st.sampled_from(["seed", "algorithm", "block_size", "profile"])


@given(
    name=st.sampled_from(sorted(REPLAY_DATA)),
    setting=_WRONG,
    seed=st.text(min_size=1, max_size=8),
    algorithm=st.sampled_from(ALGORITHMS),
    block_size=st.sampled_from([1, 2, 3, 5, 8, 16]),
    other_seeds=st.lists(st.text(max_size=4), max_size=2),
)
def test_a_wrong_setting_is_named(
    name: str,
    setting: str,
    seed: str,
    algorithm: str,
    block_size: int,
    other_seeds: list[str],
) -> None:
    data = REPLAY_DATA[name]
    truth = {
        "seed": data["seed"],
        "algorithm": data["algorithm"],
        "block_size": data["block_size"],
        "profile": VLLM_0_26,
    }
    wrong = {
        "seed": seed,
        "algorithm": algorithm,
        "block_size": block_size,
        "profile": VLLM_0_33,
    }[setting]
    if wrong == truth[setting]:
        return
    scheme = _scheme(data, **{setting: wrong})
    router_seed = wrong if setting == "seed" else data["seed"]
    options = AuditOptions(
        seed=router_seed,  # type: ignore[arg-type]
        candidate_seeds=(*other_seeds, data["seed"]),
        lora_paths=data["lora_paths"],
    )
    report = audit_batches(data["batches"], scheme, options)
    keyed = any(
        any(e.extra_keys or ())
        for batch in data["batches"]
        for e in batch.events
        if isinstance(e, BlockStored)
    )
    if setting == "profile" and not keyed:
        assert report.all_agree  # the profile changes only hashes with extra keys
        return
    assert not report.all_agree
    server, yours = (_label(setting, value) for value in (truth[setting], wrong))
    assert report.likely_explanation() == (SettingChange(setting, yours, server),)
    for audit in report.events:
        if audit.status is not AuditStatus.AGREES and audit.explanations:
            assert audit.explanations == ((SettingChange(setting, yours, server),),)


@pytest.mark.parametrize(
    ("router", "server"), [("vllm-0.26", "vllm-0.33"), ("vllm-0.33", "vllm-0.26")]
)
def test_a_wrong_profile_is_named_on_the_kv_events(router: str, server: str) -> None:
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=4, seed="0", profile=get_hash_profile(router)
    )
    report = audit_batches(
        KV_EVENTS[server]["int_block_hashes"], scheme, AuditOptions(lora_paths=SQL)
    )
    assert report.likely_explanation() == (SettingChange("profile", router, server),)
    assert report.count(AuditStatus.AGREES) == 6  # the plain requests (b, d) in both groups


def test_the_hash_form_is_named() -> None:
    batches = KV_EVENTS["vllm-0.26"]["int_block_hashes"]
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=4, seed="0", profile=VLLM_0_26
    )  # pinned: the default is 0.34 now
    options = AuditOptions(lora_paths=SQL, hash_form=HashForm.BYTES)
    report = audit_batches(batches, scheme, options)
    assert report.count(AuditStatus.DISAGREES) == 12
    assert report.likely_explanation() == (SettingChange("hash_form", "bytes", "int"),)
    assert "carry int hashes" in report.events[0].reason
    matching = replace(options, hash_form=HashForm.INT)
    assert audit_batches(batches, scheme, matching).all_agree


def test_a_seed_only_reaches_root_blocks() -> None:
    data = REPLAY_DATA["partial_last_block"]  # bytes hashes: parents are published
    assert not data["int_hashes"]
    report = audit_batches(data["batches"], _scheme(data, seed="7"), AuditOptions(seed="7"))
    verdicts = [(a.parent, a.status) for a in report.events]
    assert verdicts == [
        (ParentSource.ROOT, AuditStatus.DISAGREES),
        (ParentSource.PUBLISHED, AuditStatus.AGREES),
        (ParentSource.PUBLISHED, AuditStatus.AGREES),
    ]


def test_int_chains_need_their_root() -> None:
    data = REPLAY_DATA["shared_system_prompt"]
    scheme = _scheme(data)
    full = audit_batches(data["batches"], scheme)
    assert [a.parent for a in full.events][:2] == [ParentSource.ROOT, ParentSource.RECOMPUTED]
    assert full.all_agree
    later = audit_batches(data["batches"][1:], scheme)  # the capture began after the root
    first = later.events[0]
    assert (first.status, first.parent) == (AuditStatus.UNVERIFIABLE, ParentSource.UNKNOWN)
    assert "no earlier event gave it" in first.reason
    # a child of a block that disagreed disagrees: the router cannot reproduce its prefix
    wrong = audit_batches(data["batches"], _scheme(data, seed="7"), AuditOptions(seed="7"))
    child = wrong.events[1]
    assert (child.status, child.parent) == (AuditStatus.DISAGREES, ParentSource.UNKNOWN)
    assert child.reason == "its parent block is one that disagreed"
    assert child.explanations == ((SettingChange("seed", "7", "0"),),)


def test_the_seed_is_found_among_the_candidates() -> None:
    data = REPLAY_DATA["eviction_lru"]
    report = audit_batches(data["batches"], _scheme(data, algorithm="sha256"))
    assert report.likely_explanation() == (SettingChange("algorithm", "sha256", "sha256_cbor"),)
    with pytest.raises(InvalidFieldError, match="seed"):
        audit_batches(data["batches"], _scheme(data), AuditOptions(seed="1"))
    unknown = _scheme(data, seed="secret")
    report = audit_batches(data["batches"], unknown, AuditOptions(candidate_seeds=()))
    assert report.likely_explanation() is None  # the server's seed was not among the candidates
    assert report.count(AuditStatus.DISAGREES) == len(report.events)
    assert (
        not audit_batches(data["batches"], unknown, AuditOptions(diagnose=False))
        .events[0]
        .explanations
    )


def test_an_unset_seed_leaves_roots_unverifiable() -> None:
    data = REPLAY_DATA["eviction_lru"]
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=4, seed=None, random_none_hash=True, profile=VLLM_0_26
    )  # pinned: the default is 0.34 now
    report = audit_batches(data["batches"], scheme, AuditOptions(seed_unset=True))
    first = report.events[0]
    assert (first.status, first.reason) == (
        AuditStatus.UNVERIFIABLE,
        "NONE_HASH is random (PYTHONHASHSEED unset)",
    )
    assert first.explanations == ((SettingChange("seed", None, "0"),),)


# --- what events cannot tell: built from kvpure's hashes of a request ---------------------

SCHEME = HashScheme.from_seed(algorithm="sha256_cbor", block_size=4, seed="0")


def _stored(
    request: HashRequest,
    *,
    scheme: HashScheme = SCHEME,
    keep: list[int] | None = None,
    block_size: int | None = None,
    keys: tuple[ExtraKey | None, ...] | None = None,
    as_int: bool = True,
) -> BlockStored:
    digests = list(hash_prompt(scheme, request))
    size = block_size or scheme.block_size
    scale = size // scheme.block_size
    coarse = digests[scale - 1 :: scale]
    kept = [coarse[i] for i in (keep if keep is not None else range(len(coarse)))]
    blocks = len(coarse)
    return BlockStored(
        block_hashes=tuple(maybe_convert_block_hash(d, use_int_block_hashes=as_int) for d in kept),
        parent_block_hash=None,
        token_ids=request.prompt_token_ids_for_hashing[: blocks * size],
        block_size=size,
        lora_id=None,
        medium="GPU",
        lora_name=request.lora_name,
        extra_keys=keys if keys is not None else (None,) * len(kept),
    )


def _one(event: BlockStored, scheme: HashScheme = SCHEME, **options: Any) -> Any:
    return audit_batches(
        [KVEventBatch(ts=0.0, events=(event,))], scheme, AuditOptions(**options)
    ).events[0]


PLAIN = HashRequest(prompt_token_ids=tuple(range(100, 116)))


def test_masked_blocks_are_a_subsequence() -> None:
    event = _stored(PLAIN, keep=[1, 3])
    assert len(event.token_ids) == 16
    assert len(event.block_hashes) == 2
    assert _one(event).status is AuditStatus.AGREES
    # the blocks left out may carry keys (a salt, an image): a chain that differs is
    # unverifiable, never "disagrees", unless another setting reproduces it
    swapped = struct_replace(event, block_hashes=event.block_hashes[::-1])
    assert _one(swapped).status is AuditStatus.UNVERIFIABLE
    keyed = struct_replace(event, extra_keys=(ExtraKey(("x",)), None))
    audit = _one(keyed)
    assert audit.status is AuditStatus.UNVERIFIABLE
    assert "a cache salt or an image on a block it left out" in audit.reason


def test_hash_blocks_smaller_than_the_events_blocks() -> None:
    event = _stored(PLAIN, block_size=8)
    assert len(event.block_hashes) == 2
    assert _one(event).status is AuditStatus.AGREES  # hash block size 4 under 8-token blocks
    eight = HashScheme.from_seed(algorithm="sha256_cbor", block_size=8, seed="0")
    wrong = _one(event, eight, seed="0")
    assert wrong.status is AuditStatus.DISAGREES
    assert wrong.explanations == ((SettingChange("block_size", 8, 4),),)
    keyed = struct_replace(event, extra_keys=(ExtraKey(("x",)), None))
    assert "cannot be split" in _one(keyed).reason


def test_published_keys_are_needed() -> None:
    event = struct_replace(_stored(PLAIN), extra_keys=None)
    audit = _one(event)
    assert audit.status is AuditStatus.UNVERIFIABLE
    assert "extra_keys is null" in audit.reason
    short = struct_replace(_stored(PLAIN), extra_keys=(None,))
    assert "1 extra-key entries for 4 hashes" in _one(short).reason


def test_inconsistent_events_are_unverifiable() -> None:
    event = _stored(PLAIN)
    cases = {
        "whole blocks": struct_replace(event, token_ids=event.token_ids[:-1]),
        "token ids for 3 blocks": struct_replace(event, token_ids=event.token_ids[:12]),
        "mixes int and bytes": struct_replace(event, block_hashes=(*event.block_hashes[:3], b"x")),
        "no block hashes": struct_replace(event, block_hashes=(), extra_keys=()),
        "not a positive": struct_replace(event, block_size=0),
    }
    for text, bad in cases.items():
        audit = _one(bad)
        assert audit.status is AuditStatus.UNVERIFIABLE, text
        assert text in audit.reason


LORA = HashRequest(
    prompt_token_ids=tuple(range(8)), lora_name="sql", lora_path="/a/sql", cache_salt="s"
)


def test_033_needs_the_lora_path() -> None:
    scheme = replace(SCHEME, profile=VLLM_0_33)
    tagged = hash_prompt(scheme, LORA)
    assert len(tagged) == 2
    published = to_event_extra_keys(
        VLLM_0_33, [(("lora", "sql", "/a/sql"), ("cache_salt", "s")), (("lora", "sql", "/a/sql"),)]
    )
    assert published == (("sql", "s"), ("sql",))
    event = _stored(LORA, scheme=scheme, keys=(ExtraKey(("sql", "s")), ExtraKey(("sql",))))
    missing = _one(event, scheme)
    assert missing.status is AuditStatus.UNVERIFIABLE
    assert "LoRA path" in missing.reason
    assert _one(event, scheme, lora_paths=(("sql", "/a/sql"),)).status is AuditStatus.AGREES
    wrong_path = _one(event, scheme, lora_paths=(("sql", "/b/sql"),))
    assert wrong_path.status is AuditStatus.DISAGREES
    no_name = struct_replace(event, extra_keys=(ExtraKey(("other", "s")), ExtraKey(("sql",))))
    assert "do not start with the LoRA name" in _one(no_name, scheme).reason


_KEY_ITEM = st.one_of(
    st.tuples(st.just("mm"), st.text(max_size=4), st.integers(-9, 9)),
    st.tuples(st.just("cache_salt"), st.text(max_size=4)),
    st.tuples(st.just("prompt_embeds"), st.binary(min_size=32, max_size=32)),
)


@given(lora=st.none() | st.text(max_size=4), items=st.lists(_KEY_ITEM, max_size=4))
def test_033_keys_are_re_tagged_exactly(lora: str | None, items: list[tuple[object, ...]]) -> None:
    tagged = ((("lora", lora, "/p"),) if lora is not None else ()) + tuple(items)
    published = to_event_extra_keys(VLLM_0_33, [tagged or None])
    assert published is not None
    event = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1,),
        block_size=1,
        lora_id=None,
        medium=None,
        lora_name=lora,
        extra_keys=tuple(None if k is None else ExtraKey(k) for k in published),
    )
    keys, assumed = hashed_keys(event, VLLM_0_33, {} if lora is None else {lora: "/p"}, 1)
    assert (keys, assumed) == ([tagged or None], False)


def test_iter_audit_yields_as_the_stream_goes() -> None:
    batches = KV_EVENTS["vllm-0.26"]["bytes_block_hashes"]
    verdicts = list(iter_audit(batches, SCHEME, AuditOptions(lora_paths=SQL)))
    assert len(verdicts) == sum(len(b.events) for b in batches)
    assert sum(v is None for v in verdicts) == 12


def test_the_servers_seed_is_printed_as_given_when_yours_is_unknown() -> None:
    # only the router's side may be an unknown seed (named by its NONE_HASH)
    change = SettingChange("seed", None, 0, yours_none_hash="ab" * 32)
    assert change.value_text(change.server) == "0"
    assert change.value_text(None) == "unset"
    assert change.value_text(None, yours=True) == "unknown (NONE_HASH abababababababab...)"
    assert SettingChange("block_size", 16, 32).value_text(32) == "32"
