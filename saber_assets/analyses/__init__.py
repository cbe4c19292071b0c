"""The paper's analyses of a built benchmark: pure functions here, thin assets in `assets.py`."""
