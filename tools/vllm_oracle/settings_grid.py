"""The settings under which per-spec numbers are compared (shared, vLLM-free)."""

SETTINGS = [
    {"mml": 4096, "mnbt": 2048, "dcp": 1, "mode": "none", "async": False, "pp": 1},
    {"mml": 131072, "mnbt": 8192, "dcp": 1, "mode": "align", "async": True, "pp": 1},
    {"mml": 32768, "mnbt": 512, "dcp": 2, "mode": "all", "async": False, "pp": 2},
]
