"""vLLM 0.33's async-scheduling checks on the V1 model runner, at the function level.

vLLM 0.33 (``VllmConfig.__post_init__``, vllm/config/vllm.py) sets
``v1_async_sched_incompat`` only when the V1 runner runs: a speculative
method outside ``EagleModelTypes``, ``NgramGPUTypes``, ``draft_model``,
``dspark`` and ``dflash``; else ``disable_padded_drafter_batch``; else
``pipeline_parallel_size > 1``. 0.33 falls back to V1 for ``suffix`` and
``custom_class`` drafting (what kvpure models), and also for EAGLE with
parallel drafting (P-EAGLE) and pipeline parallelism under
``external_launcher`` (``_get_v2_model_runner_unsupported_features``), which
kvpure's flags do not take. The last two reach the pipeline check, so it is
tested here with a 0.33 record whose V1 fallbacks include EAGLE.
"""

from __future__ import annotations

from dataclasses import replace

from kvpure.serve.rules import async_scheduling_refusal, default_async_scheduling, serve_rules

#: vLLM 0.33's list, from the source above (``mtp`` stands for every MTP model type)
V1_ASYNC_METHODS_0_33 = frozenset(
    {
        "eagle",
        "eagle3",
        "extract_hidden_states",
        "mtp",
        "dflash",
        "ngram_gpu",
        "draft_model",
        "dspark",
    }
)


def test_0_33s_v1_runner_methods_are_vllms() -> None:
    assert serve_rules("0.33").async_scheduling_speculative_methods == V1_ASYNC_METHODS_0_33
    assert serve_rules("0.33").v1_runner_speculative_methods == {"suffix", "custom_class"}


def test_a_draft_model_on_0_33s_v1_runner_keeps_async_scheduling() -> None:
    # a draft model that falls back to V1 (e.g. heterogeneous vocabularies in 0.33)
    rules = replace(serve_rules("0.33"), v1_runner_speculative_methods=frozenset({"draft_model"}))
    refusal = async_scheduling_refusal(
        rules,
        speculative_method="draft_model",
        disable_padded_drafter_batch=False,
        pipeline_parallel_size=1,
    )
    assert refusal is None
    assert default_async_scheduling(rules, pooling=False, speculative_method="draft_model")


def test_pipeline_parallelism_on_0_33s_v1_runner_turns_async_scheduling_off() -> None:
    rules = replace(serve_rules("0.33"), v1_runner_speculative_methods=frozenset({"eagle"}))

    def refusal(pp: int, padded_off: bool = False) -> str | None:
        return async_scheduling_refusal(
            rules,
            speculative_method="eagle",
            disable_padded_drafter_batch=padded_off,
            pipeline_parallel_size=pp,
        )

    assert refusal(1) is None
    assert refusal(2) == "pipeline parallelism on the V1 model runner"
    assert refusal(3) == "pipeline parallelism on the V1 model runner"
    assert refusal(2, padded_off=True) == "padded drafter off"  # vLLM's elif order
    assert default_async_scheduling(rules, pooling=False, speculative_method="eagle")
    assert not default_async_scheduling(
        rules, pooling=False, speculative_method="eagle", pipeline_parallel_size=2
    )
    # the V2 runner (EAGLE in the real 0.33 record) has no such check
    v2 = serve_rules("0.33")
    assert (
        async_scheduling_refusal(
            v2,
            speculative_method="eagle",
            disable_padded_drafter_batch=False,
            pipeline_parallel_size=2,
        )
        is None
    )
    # 0.26 has no V2 runner, and no pipeline check there (the V1 check is 0.33's)
    assert (
        async_scheduling_refusal(
            serve_rules("0.26"),
            speculative_method="eagle",
            disable_padded_drafter_batch=False,
            pipeline_parallel_size=2,
        )
        is None
    )
