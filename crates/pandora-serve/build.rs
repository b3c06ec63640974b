//! Sets `cfg(pandora_postgres)` when `PANDORA_TEST_POSTGRES_URL` is set at build time, as in
//! `pandora-study`: the PostgreSQL tests carry `#[cfg_attr(not(pandora_postgres), ignore = "...")]`,
//! so that without a server `cargo test` reports them as ignored instead of as passed without
//! having run. Cargo rebuilds the crate when the variable changes.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pandora_postgres)");
    println!("cargo::rerun-if-env-changed=PANDORA_TEST_POSTGRES_URL");
    if std::env::var_os("PANDORA_TEST_POSTGRES_URL").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=pandora_postgres");
    }
}
