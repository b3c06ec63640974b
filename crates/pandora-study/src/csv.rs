//! CSV cells for `pandora export` and the experiment harness's CSV files: quoting (RFC 4180) and
//! spreadsheet formula neutralization, one function ([`field`]) for every text cell Pandora
//! writes.
//!
//! A spreadsheet opening a CSV file evaluates a cell that starts with `=`, `+`, `-` or `@` as a
//! formula (and some treat a leading tab or carriage return the same way). A study's CSV holds
//! text that others chose: parameter values of categorical parameters, worker names, error
//! messages taken from an objective's stderr; an experiment's CSV holds problem and policy
//! labels from its configuration. A cell such as `=HYPERLINK("http://evil", "x")` would
//! run when the file is opened. As OWASP recommends ("CSV Injection"), such a cell is prefixed
//! with a single quote, which spreadsheets show as text. Plain numbers (`-1.5`, `+2e-3`) are left
//! as they are, so numeric columns stay numeric.

/// One CSV cell: neutralized (see the module docs) and quoted if it holds `,`, `"` or a line end.
pub fn field(v: &str) -> String {
    let v = if v.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_plain_number(v) {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

/// `true` for a decimal number: optional sign, digits with at most one `.`, optional exponent.
fn is_plain_number(v: &str) -> bool {
    let v = v.strip_prefix(['+', '-']).unwrap_or(v);
    let (mantissa, exponent) = match v.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (v, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => {
            (digits(a) || a.is_empty()) && (digits(b) || b.is_empty()) && a.len() + b.len() > 0
        }
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_neutralized_and_numbers_kept() {
        for (cell, want) in [
            ("-1.5", "-1.5"),
            ("+2e-3", "+2e-3"),
            ("-7", "-7"),
            ("1E+10", "1E+10"),
            ("-.5", "-.5"),
            ("adam", "adam"),
            ("", ""),
            ("=1+1", "'=1+1"),
            ("+cmd", "'+cmd"),
            ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("-", "'-"),
            ("-inf", "'-inf"),
            ("1-2", "1-2"),
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"",
            ),
            ("a,b", "\"a,b\""),
            ("-1,5", "\"'-1,5\""),
        ] {
            assert_eq!(field(cell), want, "{cell:?}");
        }
    }
}
