//! Standard normal distribution and log-space helpers, accurate far in the tails.
//!
//! All functions take and return `f64`, never allocate or panic, and return no `NaN` for
//! finite input (the single documented exception is [`log1mexp`] for `x > 0`, outside its
//! domain). Transcendental functions come from `libm`, so results are bit-identical across
//! platforms.
//!
//! | function | formula |
//! |---|---|
//! | [`norm_pdf`], [`log_norm_pdf`] | `φ(z) = exp(−z²/2)/√(2π)` |
//! | [`norm_cdf`], [`log_norm_cdf`] | `Φ(z) = ½·erfc(−z/√2)` |
//! | [`norm_sf`], [`log_norm_sf`] | `1 − Φ(z) = Φ(−z)` |
//! | [`mills_ratio`] | `R(x) = Φ(−x)/φ(x)` |
//! | [`erfcx`] | `exp(x²)·erfc(x)` |
//! | [`h`], [`log_h`], [`dlog_h`] | `h(z) = φ(z) + z·Φ(z)`, `log h`, `Φ/h` |
//! | [`log1mexp`], [`log1pexp`] | `log(1 − eˣ)`, `log(1 + eˣ)` |

mod logexp;
mod normal;

pub use logexp::{log1mexp, log1pexp};
pub use normal::{
    dlog_h, erfcx, h, log_h, log_norm_cdf, log_norm_pdf, log_norm_sf, mills_ratio, norm_cdf,
    norm_pdf, norm_sf,
};

#[cfg(test)]
mod tests;
