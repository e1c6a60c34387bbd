"""The package as a whole: importing, typing at run time, the error tree."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from beartype.roar import BeartypeCallHintParamViolation

import kvpure
from kvpure.errors import InvalidFieldError, KVPureError, KVPureValueError


def test_import_kvpure_does_not_import_torch() -> None:
    code = "import sys, kvpure, kvpure.cli; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "False"


def test_every_public_name_is_exported() -> None:
    for name in kvpure.__all__:
        assert hasattr(kvpure, name), name


def test_beartype_refuses_a_bad_argument_type() -> None:
    with pytest.raises(BeartypeCallHintParamViolation):
        InvalidFieldError(field=3, value=1, reason="x")  # type: ignore[arg-type]  # wrong on purpose


def test_invalid_field_error_names_the_field_and_is_a_value_error() -> None:
    err = InvalidFieldError(field="block_size", value=0, reason="must be at least 1")
    assert isinstance(err, KVPureValueError)
    assert isinstance(err, ValueError)
    assert isinstance(err, KVPureError)
    assert "block_size" in str(err)
    assert "0" in str(err)
    assert err.field == "block_size"


def test_errors_pickle_with_their_attributes() -> None:
    err = InvalidFieldError(field="num_blocks", value=-1, reason="must not be negative")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is InvalidFieldError
    assert str(back) == str(err)
    assert back.field == "num_blocks"
    assert back.value == -1
    assert back.message == err.message


def test_import_kvpure_loads_no_cli_json_or_cbor2() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kvpure; "
        "print(sorted(m for m in sys.modules if m in ('argparse', 'json', 'cbor2', 'torch') "
        "or m.startswith('kvpure.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_public_face_is_small_and_every_name_loads() -> None:
    import kvpure

    assert 45 <= len(kvpure.__all__) <= 60
    for name in kvpure.__all__:
        assert getattr(kvpure, name) is not None, name
    assert "get_kv_cache_config_from_groups" not in kvpure.__all__
    assert "DeviceUnavailableError" not in kvpure.__all__
