"""`pip install .` (repository root) and `pip install ./crates/pandora-py` build the same package:
the two pyproject.toml files must agree (paths taken relative to each file)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CRATE = ROOT / "crates" / "pandora-py"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - older interpreters
    tomllib = pytest.importorskip("tomli")


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def test_root_and_crate_pyproject_agree():
    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("not running from the source tree")
    root, crate = load(ROOT / "pyproject.toml"), load(CRATE / "pyproject.toml")
    assert root["build-system"] == crate["build-system"]
    assert root["project"] == crate["project"]
    rm, cm = dict(root["tool"]["maturin"]), dict(crate["tool"]["maturin"])
    # The root points maturin at the crate and its Python sources.
    assert (ROOT / rm.pop("manifest-path")).resolve() == (CRATE / "Cargo.toml").resolve()
    assert (CRATE / cm.pop("manifest-path", "Cargo.toml")).resolve() == \
        (CRATE / "Cargo.toml").resolve()
    assert (ROOT / rm.pop("python-source")).resolve() == \
        (CRATE / cm.pop("python-source")).resolve()
    assert (CRATE / "python" / "pandora" / "__init__.py").exists()
    assert rm == cm  # module-name, features, ...
    assert set(root.get("tool", {})) == {"maturin"}
