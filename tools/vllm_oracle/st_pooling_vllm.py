"""Whether vLLM's ``get_pooling_config`` finds a Sentence Transformers pooling config.

vLLM's ``ModelConfig._get_default_runner_type`` (vllm/config/model.py) returns
"pooling" before it looks at the architecture when
``get_pooling_config(model, revision)`` (vllm/transformers_utils/config.py) returns
a truthy value. This runs that function of the release on model folders made
from the ``modules.json`` cases below and writes whether each was truthy.

    PYTHONPATH=/path/to/vllm-X:/path/to/oracle_deps .venv/bin/python \\
        tools/vllm_oracle/st_pooling_vllm.py X.Y.Z tests/data/vllm-X.Y.Z-oracle/st_pooling.json

``tests/test_sentence_transformers.py`` reads what it wrote.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

TRANSFORMER = {
    "idx": 0,
    "name": "0",
    "path": "",
    "type": "sentence_transformers.models.Transformer",
}
POOLING_V2 = {
    "idx": 1,
    "name": "1",
    "path": "1_Pooling",
    "type": "sentence_transformers.models.Pooling",
}
POOLING_V5 = {
    "idx": 1,
    "name": "1",
    "path": "1_Pooling",
    "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
}
NORMALIZE = {
    "idx": 2,
    "name": "2",
    "path": "2_Normalize",
    "type": "sentence_transformers.models.Normalize",
}
DENSE = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
LAST_TOKEN = {"pooling_mode_lasttoken": True, "pooling_mode_mean_tokens": False}

# name -> (modules.json content or None for no file, 1_Pooling/config.json or None)
CASES: dict[str, tuple[Any, Any]] = {
    "no modules.json": (None, None),
    "Qwen3-Embedding (v2 types, last token, normalize)": (
        [TRANSFORMER, POOLING_V2, NORMALIZE],
        LAST_TOKEN,
    ),
    "v2 pooling, mean": ([TRANSFORMER, POOLING_V2], {"pooling_mode_mean_tokens": True}),
    "v2 pooling, its config.json missing": ([TRANSFORMER, POOLING_V2], None),
    "v5 pooling type": ([TRANSFORMER, POOLING_V5, NORMALIZE], LAST_TOKEN),
    "no pooling module": ([TRANSFORMER, NORMALIZE], None),
    "transformer and dense only": ([TRANSFORMER, DENSE], None),
    "an empty list": ([], None),
}


def main(version: str, out: str) -> None:
    from vllm.transformers_utils.config import get_pooling_config

    results: dict[str, bool] = {}
    for name, (modules, pooling) in CASES.items():
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            (root / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
            if modules is not None:
                (root / "modules.json").write_text(json.dumps(modules))
            if pooling is not None:
                (root / "1_Pooling").mkdir()
                (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
            results[name] = bool(get_pooling_config(str(root), revision=None))
    cases = {
        name: {"modules": modules, "pooling_config": pooling, "pooling_runner": results[name]}
        for name, (modules, pooling) in CASES.items()
    }
    Path(out).write_text(json.dumps({"vllm_version": version, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
