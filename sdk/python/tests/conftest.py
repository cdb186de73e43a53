"""Shared fixtures: the test vectors both SDKs read (sdk/test-vectors.json) and the hub the jest driver started
(test/sdk/python/python-sdk.test.ts passes its URLs in the environment)."""

import json
import pathlib

import pytest

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "test-vectors.json"


@pytest.fixture(scope="session")
def vectors():
    return json.loads(VECTORS.read_text(encoding="utf-8"))
