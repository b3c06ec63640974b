//! Sets `cfg(pandora_postgres)` when `PANDORA_TEST_POSTGRES_URL` is set at build time, and
//! `cfg(pandora_slurm)` when `PANDORA_TEST_SLURM` (the slurm.conf of a Slurm cluster the tests
//! may submit to, see .ci/slurm.sh) is. The PostgreSQL and Slurm tests carry
//! `#[cfg_attr(not(...), ignore = "...")]`, so that without a server or a cluster `cargo test`
//! reports them as ignored instead of as passed without having run. Cargo rebuilds the crate when
//! a variable changes.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pandora_postgres)");
    println!("cargo::rustc-check-cfg=cfg(pandora_slurm)");
    println!("cargo::rerun-if-env-changed=PANDORA_TEST_POSTGRES_URL");
    println!("cargo::rerun-if-env-changed=PANDORA_TEST_SLURM");
    if std::env::var_os("PANDORA_TEST_POSTGRES_URL").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=pandora_postgres");
    }
    if std::env::var_os("PANDORA_TEST_SLURM").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=pandora_slurm");
    }
}
