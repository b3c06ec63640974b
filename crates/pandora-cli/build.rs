//! Sets a `cfg` for each external service the tests may use, from a variable set at build time:
//! `cfg(pandora_postgres)` when `PANDORA_TEST_POSTGRES_URL` is set, `cfg(pandora_slurm)` when
//! `PANDORA_TEST_SLURM` (the slurm.conf of a Slurm cluster the tests may submit to, see
//! .ci/slurm.sh) is, and `cfg(pandora_chromium)` when `PANDORA_TEST_CHROMIUM` (the path of a
//! Chromium binary, for the dashboard's browser test) is. Those tests carry
//! `#[cfg_attr(not(...), ignore = "...")]`, so that without the service `cargo test` reports them
//! as ignored instead of as passed without having run. Cargo rebuilds the crate when a variable
//! changes.

/// `(variable, cfg)` pairs.
const SERVICES: [(&str, &str); 3] = [
    ("PANDORA_TEST_POSTGRES_URL", "pandora_postgres"),
    ("PANDORA_TEST_SLURM", "pandora_slurm"),
    ("PANDORA_TEST_CHROMIUM", "pandora_chromium"),
];

fn main() {
    for (var, cfg) in SERVICES {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={var}");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
