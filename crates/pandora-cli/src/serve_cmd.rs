//! `pandora serve --storage URL [--bind ADDR] [--token-file FILE]`: the JSON HTTP API of
//! `pandora-serve` over one storage (docs/serve.md). This module only reads the arguments.

use anyhow::{Context, Result};
use std::net::SocketAddr;

/// The arguments of `pandora serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Storage URL (`sqlite:PATH` or `postgresql://...`); default: the PANDORA_STORAGE_URL
    /// environment variable.
    #[arg(long, value_name = "URL")]
    storage: Option<String>,
    /// Address to listen on. Anything but a loopback address needs --token-file.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    bind: SocketAddr,
    /// File holding the bearer token that every request must send
    /// (`Authorization: Bearer TOKEN`); at least 16 visible ASCII characters.
    #[arg(long, value_name = "FILE")]
    token_file: Option<String>,
    /// Largest request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Requests per second let through on average (all clients together).
    #[arg(long, value_name = "N", default_value_t = 200.0)]
    rate_limit: f64,
    /// Requests let through at once before the rate limit applies.
    #[arg(long, value_name = "N", default_value_t = 400)]
    rate_burst: u32,
    /// Requests per second one client (peer IP address; IPv6 by /64) is let through on average.
    #[arg(long, value_name = "N", default_value_t = 100.0)]
    client_rate_limit: f64,
    /// Requests one client is let through at once before its rate limit applies.
    #[arg(long, value_name = "N", default_value_t = 200)]
    client_rate_burst: u32,
}

/// Runs the server until SIGINT or SIGTERM.
pub fn main(args: Args) -> Result<()> {
    let storage = args
        .storage
        .or_else(|| std::env::var(crate::study_cmd::STORAGE_ENV).ok())
        .filter(|s| !s.trim().is_empty())
        .context("--storage URL: required (or the PANDORA_STORAGE_URL environment variable)")?;
    for (flag, rate) in [
        ("--rate-limit", args.rate_limit),
        ("--client-rate-limit", args.client_rate_limit),
    ] {
        if !(rate.is_finite() && rate > 0.0) {
            anyhow::bail!("{flag}: must be a number > 0, got {rate}");
        }
    }
    let mut options = pandora_serve::Options::new(storage);
    if let Some(file) = &args.token_file {
        let text = std::fs::read_to_string(file).with_context(|| format!("--token-file {file}"))?;
        let token = pandora_serve::Token::new(&text)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("--token-file {file}"))?;
        options.token = Some(token);
    }
    options.max_body_bytes = args.max_body_bytes;
    options.rate_per_second = args.rate_limit;
    options.rate_burst = args.rate_burst;
    options.client_rate_per_second = args.client_rate_limit;
    options.client_rate_burst = args.client_rate_burst;
    Ok(pandora_serve::run(options, args.bind)?)
}
