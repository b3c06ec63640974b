"""Shared fixtures: the `pandora` CLI binary for the cross-checks with the Rust tool."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _find_cli():
    env = os.environ.get("PANDORA_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "pandora"
        if p.exists():
            return str(p)
    return shutil.which("pandora")


@pytest.fixture(scope="session")
def pandora_bin():
    """Path of the `pandora` binary. Skips when it is missing, unless PANDORA_REQUIRE_CLI=1 (CI),
    where a missing binary fails."""
    path = _find_cli()
    if path is None or not os.path.exists(path):
        if os.environ.get("PANDORA_REQUIRE_CLI") == "1":
            pytest.fail("the pandora CLI is required (PANDORA_BIN) but was not found")
        pytest.skip("pandora CLI not built (cargo build -p pandora-cli)")
    return path
