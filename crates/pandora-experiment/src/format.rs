//! How the experiment reports write numbers.
//!
//! Every summary file of an experiment is text: CSV tables (`summary/*.csv`), a fixed-width
//! table printed at the end, and `summary.md`. CSV cells are quoted and neutralized by the one
//! [`pandora_study::csv::field`] that study exports use too; this module is the one place that decides
//! how a number becomes text, in three styles, one per kind of output:
//!
//! - [`fmt_number`]: fixed-width text tables, 4 decimals in `[1e-3, 1e4)` and scientific outside;
//! - [`fmt_sig3`]: markdown tables, 3 significant digits;
//! - [`label_number`]: labels and file names (`pbgi(0.001)`), the shortest exact form.
//!
//! It imports no other experiment module, so the summary, the stopping evaluation and the
//! configuration can all use it.

/// A number for a text table: 4 decimals in `[1e-3, 1e4)`, otherwise scientific with
/// `exp_digits` digits after the point (0 as `0`).
pub fn fmt_number(v: f64, exp_digits: usize) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e-3 && v.abs() < 1e4 {
        format!("{v:.4}")
    } else {
        format!("{v:.exp_digits$e}")
    }
}

/// A number for a markdown table: 3 significant digits, scientific below 1e-3 and from 1e5 on.
pub fn fmt_sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let (sci, exp) = crate::plot::sci3(v);
    if !(-3..5).contains(&exp) {
        return sci;
    }
    let decimals = (2 - exp).max(0) as usize;
    format!("{v:.decimals$}")
}

/// A number in a label: Rust's shortest exact form, or scientific when that is longer than 8
/// characters (`0.001`, `1e-5`, `1.2345678e-7`).
pub fn label_number(v: f64) -> String {
    let s = format!("{v}");
    if s.len() > 8 { format!("{v:e}") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_take_the_style_of_their_output() {
        assert_eq!(fmt_number(0.0, 3), "0");
        assert_eq!(fmt_number(12.5, 3), "12.5000");
        assert_eq!(fmt_number(1.5e-5, 2), "1.50e-5");
        assert_eq!(fmt_number(2e4, 3), "2.000e4");
        assert_eq!(label_number(0.001), "0.001");
        assert_eq!(label_number(1e-5), "0.00001");
        assert_eq!(label_number(1.2345678e-7), "1.2345678e-7");
    }
}
