# Sourced by .ci/run: makes Debian's `chromium` available to the dashboard's browser test
# (crates/pandora-cli/tests/dashboard.rs), installing the package if it is absent and we are
# root, and exports PANDORA_TEST_CHROMIUM (its path) so that the test is built to run.
#
# If PANDORA_TEST_CHROMIUM is already set, that browser is used and nothing is installed.

ensure_chromium() {
    if [ -n "${PANDORA_TEST_CHROMIUM:-}" ]; then
        return 0
    fi
    local bin
    if ! bin=$(command -v chromium); then
        [ "$(id -u)" -eq 0 ] || die "chromium not found and not root: install Debian's chromium package (or set PANDORA_TEST_CHROMIUM)"
        echo ".ci/run: installing chromium from Debian packages" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >&2 || die "apt-get update failed"
        apt-get install -y -q --no-install-recommends chromium >&2 || die "apt-get install chromium failed"
        bin=$(command -v chromium) || die "chromium installed but not on PATH"
    fi
    export PANDORA_TEST_CHROMIUM=$bin
    echo ".ci/run: $("$bin" --version 2>/dev/null || echo chromium) for the dashboard test" >&2
}
