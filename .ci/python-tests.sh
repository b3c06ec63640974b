#!/usr/bin/env bash
# Python bindings: build the wheel into a fresh virtual environment and run the pytest suite
# (crates/pandora-py/tests), including the cross-checks against the `pandora` CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
export PATH="$work/venv/bin:$PATH"   # maturin on PATH for the PEP 517 build
"$py" -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2" pytest numpy pandas \
    optuna==5.0.0 psycopg2-binary==2.9.13 \
    optuna-dashboard==0.21.0   # tests/test_optuna*.py (PostgreSQL through psycopg2; the dashboard)
# The CLI for the cross-checks: the binary `cargo test --workspace` built for the CLI's
# integration tests (target/debug/pandora). Asking for exactly that build again is a no-op after
# `cargo test --workspace` (as in .ci/run), where `cargo build -p pandora-cli` would rebuild the
# workspace crates in another profile (about 1.5 min on 2 cores); run alone, it builds them.
cargo test --workspace --no-run --quiet
# Build the abi3 wheel with maturin and install it, as a user would: `pip install .` from the
# repository root, whose pyproject.toml points maturin at crates/pandora-py (test_packaging.py
# checks that it agrees with crates/pandora-py/pyproject.toml, so `pip install ./crates/pandora-py`
# builds the same package). Users get the release profile; CI builds in cargo's `dev` profile
# (dependencies at opt-level 3, as configured in the root Cargo.toml) so that the artifacts of
# the CLI build above are reused instead of compiling every dependency again in release mode
# (`--profile test` cannot be used: cargo would build the library as a test harness), and
# against the base interpreter so that pyo3 is not rebuilt for every fresh venv.
MATURIN_PEP517_ARGS="--profile dev" MATURIN_PEP517_USE_BASE_PYTHON=1 \
    "$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation .
rc=0
# Run from outside the source tree so that `import pandora` gets the installed wheel.
(cd "$work" && PANDORA_BIN="${CARGO_TARGET_DIR:-$root/target}/debug/pandora" PANDORA_REQUIRE_CLI=1 \
    "$py" -m pytest -q -p no:cacheprovider "$root/crates/pandora-py/tests") || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "python-tests: pytest collected no tests (crates/pandora-py/tests is missing or empty)" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi
echo "python-tests: passed in $(( $(date +%s) - start )) s"
