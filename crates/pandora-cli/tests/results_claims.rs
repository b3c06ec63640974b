//! The derived numbers in `docs/results.md` follow from the committed summary statistics.
//!
//! **What is checked.** `docs/results/claims.toml` lists each derived statement of the results
//! page (a ratio, a range of ratios, a difference of means against its 2 standard errors, a
//! spread, "in 17 of 18 cells") with the exact phrase of `results.md` that states it and the
//! numbers as printed. For every claim this test
//! 1. finds the phrase in `results.md` (runs of whitespace collapsed, so line breaks do not
//!    matter) and each stated number inside the phrase;
//! 2. computes the numbers from the summary files in `docs/results/` (CSV in the columns of
//!    `summary/final.csv` and `summary/stopping.csv`, read by column name);
//! 3. requires each computed number to round to the stated one at its printed precision: a
//!    number printed with `k` decimals (in the mantissa, for `7.3e3`) must lie within half a unit
//!    of its last digit, `0.5 · 10^(e − k)`, with a relative slack of 1e-9 for binary rounding.
//!
//! So a number edited in `results.md` without its summary (or the reverse) fails step 1 or 3.
//!
//! **Degenerate cases.** A missing file, row or column, a non-finite value, a zero divisor, an
//! empty list of pairs or a stated count that is not an integer is a failure of that claim, with
//! the claim's `id` and the field named.
//!
//! The checks are plain functions over text and tables, so the tests at the end can show that
//! each kind of failure is caught.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The repository root (two levels above this crate).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// `docs/results/claims.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsFile {
    claim: Vec<Claim>,
}

/// One derived statement of `results.md`.
#[derive(Debug, Clone, Deserialize)]
struct Claim {
    /// A unique name for messages.
    id: String,
    /// The summary file in `docs/results/` that the references point into.
    file: String,
    /// The exact phrase of `results.md` (whitespace runs collapsed).
    text: String,
    /// The numbers the phrase states, as printed, in the order the computation yields them.
    stated: Vec<String>,
    /// How the numbers follow from the file.
    #[serde(flatten)]
    computation: Computation,
}

/// The computation of a claim's numbers (`kind` in the TOML).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Computation {
    /// `a / b` of the one pair.
    Ratio { pairs: Vec<[String; 2]> },
    /// The lowest and the highest `a / b` over the pairs.
    RatioRange { pairs: Vec<[String; 2]> },
    /// `mean(a) − mean(b)` and `sqrt(se2(a)² + se2(b)²)` for the rows `a` and `b`.
    Separation {
        a: String,
        b: String,
        #[serde(default = "default_mean")]
        mean_column: String,
        #[serde(default = "default_se2")]
        se2_column: String,
    },
    /// max − min of the referenced values.
    Spread { refs: Vec<String> },
    /// One referenced value times `scale` (100 for a fraction stated in percent).
    Value {
        value: String,
        #[serde(default = "default_scale")]
        scale: f64,
    },
    /// The lowest and the highest of the referenced values, times `scale`.
    Range {
        refs: Vec<String>,
        #[serde(default = "default_scale")]
        scale: f64,
    },
    /// The sum of the referenced values (counts: "in 79 of 80 runs").
    Sum { refs: Vec<String> },
    /// The number of cells in which `target` is lower than every rule in `others`; a cell is a
    /// key with `{rule}` where the rule goes.
    LowestCount {
        target: String,
        others: Vec<String>,
        cells: Vec<String>,
        column: String,
    },
    /// The number of pairs within each group of rows whose means differ by more than the pair's
    /// 2 s.e. (`|mean(a) − mean(b)| > sqrt(se2(a)² + se2(b)²)`, the rule of `separation`),
    /// summed over the groups (one group per problem: pairs never cross problems).
    SeparatedPairs { groups: Vec<Vec<String>> },
    /// The number of pairs `(a, b)` in which `a`'s mean is *lower* than `b`'s by more than the
    /// pair's 2 s.e. (`mean(b) − mean(a) > sqrt(se2(a)² + se2(b)²)`: `a` separated ahead of `b`
    /// in regret), for one-sided statements ("no baseline is separated ahead of PBGI").
    SeparatedLower { pairs: Vec<[String; 2]> },
    /// The number of `rows` whose `mean_column` exceeds `factor` times its `se_column` (a
    /// paired difference larger than its own 2 s.e. with `factor = 2` on a 1-s.e. column).
    SeparatedCount {
        rows: Vec<String>,
        mean_column: String,
        se_column: String,
        factor: f64,
    },
}

fn default_mean() -> String {
    "mean".into()
}

fn default_scale() -> f64 {
    1.0
}

/// The lowest and the highest of the values of `refs`.
fn range(t: &Table, refs: &[String]) -> Result<(f64, f64), String> {
    let v = refs
        .iter()
        .map(|r| t.reference(r))
        .collect::<Result<Vec<_>, _>>()?;
    let lo = v.iter().copied().reduce(f64::min).ok_or("refs is empty")?;
    let hi = v.iter().copied().reduce(f64::max).ok_or("refs is empty")?;
    Ok((lo, hi))
}

fn default_se2() -> String {
    "se2".into()
}

/// A summary CSV: rows keyed by `problem|policy[|rule|lambda|fraction|statistic]` (`instance` in
/// place of `problem` in the freeze-thaw benchmark's files; `fraction` of the budget in the Optuna
/// comparison's, which have a row per sampler and fraction; `statistic` in the stopping rules'
/// runtime, a row per timed statistic).
#[derive(Debug, Clone)]
struct Table {
    columns: Vec<String>,
    rows: BTreeMap<String, Vec<String>>,
}

/// The columns that identify a row, in key order (those the file has).
const KEY_COLUMNS: [&str; 7] = [
    "problem",
    "instance",
    "policy",
    "rule",
    "lambda",
    "fraction",
    "statistic",
];

/// Splits one CSV line; fields may be double-quoted (`"pbgi_d(0.1,2)"`), with `""` for a quote.
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

/// Parses a summary CSV (header row first).
fn parse_table(text: &str) -> Result<Table, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let columns = csv_fields(lines.next().ok_or("empty file")?);
    let key_idx: Vec<usize> = KEY_COLUMNS
        .iter()
        .filter_map(|k| columns.iter().position(|c| c == k))
        .collect();
    if key_idx.is_empty() {
        return Err(
            "no key column (problem, instance, policy, rule, lambda, fraction, statistic)".into(),
        );
    }
    let mut rows = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let f = csv_fields(line);
        if f.len() != columns.len() {
            return Err(format!(
                "row {}: {} fields, header has {}",
                i + 2,
                f.len(),
                columns.len()
            ));
        }
        let key = key_idx
            .iter()
            .map(|&k| f[k].as_str())
            .collect::<Vec<_>>()
            .join("|");
        if rows.insert(key.clone(), f).is_some() {
            return Err(format!("duplicate row {key}"));
        }
    }
    Ok(Table { columns, rows })
}

impl Table {
    /// The value in `column` of the row `key`.
    fn value(&self, key: &str, column: &str) -> Result<f64, String> {
        let c = self
            .columns
            .iter()
            .position(|x| x == column)
            .ok_or_else(|| format!("no column '{column}'"))?;
        let row = self
            .rows
            .get(key)
            .ok_or_else(|| format!("no row '{key}'"))?;
        let v: f64 = row[c]
            .trim()
            .parse()
            .map_err(|_| format!("row '{key}' column '{column}': not a number: '{}'", row[c]))?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("row '{key}' column '{column}': not finite"))
        }
    }

    /// The value of a reference `KEY:COLUMN`.
    fn reference(&self, r: &str) -> Result<f64, String> {
        let (key, column) = r
            .rsplit_once(':')
            .ok_or_else(|| format!("reference '{r}' has no ':COLUMN'"))?;
        self.value(key, column)
    }

    fn ratio(&self, [a, b]: &[String; 2]) -> Result<f64, String> {
        let (x, y) = (self.reference(a)?, self.reference(b)?);
        if y == 0.0 {
            return Err(format!("'{b}' is zero"));
        }
        Ok(x / y)
    }
}

/// Computes a claim's numbers from its table.
fn compute(c: &Computation, t: &Table) -> Result<Vec<f64>, String> {
    match c {
        Computation::Ratio { pairs } => match pairs.as_slice() {
            [p] => Ok(vec![t.ratio(p)?]),
            _ => Err(format!("ratio needs one pair, has {}", pairs.len())),
        },
        Computation::RatioRange { pairs } => {
            let r = pairs
                .iter()
                .map(|p| t.ratio(p))
                .collect::<Result<Vec<_>, _>>()?;
            let lo = r.iter().copied().reduce(f64::min).ok_or("pairs is empty")?;
            let hi = r.iter().copied().reduce(f64::max).ok_or("pairs is empty")?;
            Ok(vec![lo, hi])
        }
        Computation::Separation {
            a,
            b,
            mean_column,
            se2_column,
        } => {
            let (d, e) = separation(t, a, b, mean_column, se2_column)?;
            Ok(vec![d, e])
        }
        Computation::Spread { refs } => {
            let (lo, hi) = range(t, refs)?;
            Ok(vec![hi - lo])
        }
        Computation::Value { value, scale } => Ok(vec![t.reference(value)? * scale]),
        Computation::Range { refs, scale } => {
            let (lo, hi) = range(t, refs)?;
            Ok(vec![lo * scale, hi * scale])
        }
        Computation::Sum { refs } => {
            if refs.is_empty() {
                return Err("refs is empty".into());
            }
            refs.iter()
                .map(|r| t.reference(r))
                .sum::<Result<f64, _>>()
                .map(|x| vec![x])
        }
        Computation::LowestCount {
            target,
            others,
            cells,
            column,
        } => lowest_count(t, target, others, cells, column).map(|n| vec![n as f64]),
        Computation::SeparatedPairs { groups } => {
            if groups.is_empty() || groups.iter().any(|g| g.len() < 2) {
                return Err("separated_pairs needs groups of at least two rows".into());
            }
            let mut n = 0;
            for rows in groups {
                for (i, a) in rows.iter().enumerate() {
                    for b in &rows[i + 1..] {
                        let (d, e) = separation(t, a, b, "mean", "se2")?;
                        n += usize::from(d.abs() > e);
                    }
                }
            }
            Ok(vec![n as f64])
        }
        Computation::SeparatedLower { pairs } => {
            if pairs.is_empty() {
                return Err("pairs is empty".into());
            }
            let mut n = 0;
            for [a, b] in pairs {
                let (d, e) = separation(t, b, a, "mean", "se2")?;
                n += usize::from(d > e);
            }
            Ok(vec![n as f64])
        }
        Computation::SeparatedCount {
            rows,
            mean_column,
            se_column,
            factor,
        } => {
            if rows.is_empty() {
                return Err("rows is empty".into());
            }
            let mut n = 0;
            for r in rows {
                n += usize::from(t.value(r, mean_column)? > factor * t.value(r, se_column)?);
            }
            Ok(vec![n as f64])
        }
    }
}

/// `mean(a) − mean(b)` and its 2 s.e. `sqrt(se2(a)² + se2(b)²)` for the rows `a` and `b`.
fn separation(
    t: &Table,
    a: &str,
    b: &str,
    mean_column: &str,
    se2_column: &str,
) -> Result<(f64, f64), String> {
    let d = t.value(a, mean_column)? - t.value(b, mean_column)?;
    let e = t.value(a, se2_column)?.hypot(t.value(b, se2_column)?);
    Ok((d, e))
}

/// The number of cells in which the `target` rule's value is below every other rule's.
fn lowest_count(
    t: &Table,
    target: &str,
    others: &[String],
    cells: &[String],
    column: &str,
) -> Result<usize, String> {
    if cells.is_empty() || others.is_empty() {
        return Err("cells and others must not be empty".into());
    }
    let mut n = 0;
    for cell in cells {
        if !cell.contains("{rule}") {
            return Err(format!("cell '{cell}' has no {{rule}}"));
        }
        let mine = t.value(&cell.replace("{rule}", target), column)?;
        let mut lowest = true;
        for o in others {
            lowest &= mine < t.value(&cell.replace("{rule}", o), column)?;
        }
        n += usize::from(lowest);
    }
    Ok(n)
}

/// Half a unit of the last printed digit of `s` (`"2.05"` → 0.005, `"35"` → 0.5, `"7.3e3"` → 50).
fn tolerance(s: &str) -> Result<f64, String> {
    let (mantissa, exp) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (
            m,
            e.parse::<i32>()
                .map_err(|_| format!("bad exponent in '{s}'"))?,
        ),
        None => (s, 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
    Ok(0.5 * 10f64.powi(exp - decimals))
}

/// Collapses runs of whitespace to one space.
fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks one claim against the (normalized) results page and its table.
fn check(claim: &Claim, doc: &str, table: &Table) -> Result<(), String> {
    let text = normalize(&claim.text);
    if !doc.contains(&text) {
        return Err(format!("text not in results.md: \"{text}\""));
    }
    for s in &claim.stated {
        if !text.contains(s.as_str()) {
            return Err(format!("stated '{s}' is not in its text"));
        }
    }
    let got = compute(&claim.computation, table)?;
    if got.len() != claim.stated.len() {
        return Err(format!(
            "computes {} numbers, states {}",
            got.len(),
            claim.stated.len()
        ));
    }
    for (g, s) in got.iter().zip(&claim.stated) {
        let want: f64 = s
            .parse()
            .map_err(|_| format!("stated '{s}' is not a number"))?;
        let tol = tolerance(s)? * (1.0 + 1e-9) + 1e-12 * want.abs();
        if (g - want).abs() > tol {
            return Err(format!(
                "computed {g:.6} does not round to the stated {s} (± {tol:.3e})"
            ));
        }
    }
    Ok(())
}

/// Loads the claims and every summary file they name.
fn load() -> (Vec<Claim>, BTreeMap<String, Table>, String) {
    let dir = root().join("docs/results");
    let claims: ClaimsFile = toml::from_str(
        &std::fs::read_to_string(dir.join("claims.toml")).expect("docs/results/claims.toml"),
    )
    .expect("claims.toml parses");
    let mut tables = BTreeMap::new();
    for c in &claims.claim {
        if !tables.contains_key(&c.file) {
            let text = std::fs::read_to_string(dir.join(&c.file))
                .unwrap_or_else(|e| panic!("claim {}: file {}: {e}", c.id, c.file));
            let t = parse_table(&text).unwrap_or_else(|e| panic!("{}: {e}", c.file));
            tables.insert(c.file.clone(), t);
        }
    }
    let doc = std::fs::read_to_string(root().join("docs/results.md")).expect("docs/results.md");
    (claims.claim, tables, normalize(&doc))
}

/// The failures of all claims, as `id: message`.
fn failures(claims: &[Claim], tables: &BTreeMap<String, Table>, doc: &str) -> Vec<String> {
    claims
        .iter()
        .filter_map(|c| {
            let r = match tables.get(&c.file) {
                Some(t) => check(c, doc, t),
                None => Err(format!("file {} not loaded", c.file)),
            };
            r.err().map(|e| format!("{}: {e}", c.id))
        })
        .collect()
}

#[test]
fn every_claim_in_results_md_follows_from_the_summaries() {
    let (claims, tables, doc) = load();
    assert!(claims.len() >= 30, "only {} claims", claims.len());
    let mut ids: Vec<&str> = claims.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), claims.len(), "claim ids are not unique");
    let bad = failures(&claims, &tables, &doc);
    assert!(
        bad.is_empty(),
        "claims that do not hold:\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_number_changed_in_results_md_alone_is_caught() {
    let (claims, tables, doc) = load();
    let c = claims
        .iter()
        .find(|c| c.id == "fig4-cost-d8-vs-random")
        .expect("claim");
    // The page says 1.87 instead of 1.77: its phrase is no longer there.
    let edited = doc.replace("1.77 (MF-MES)", "1.87 (MF-MES)");
    assert!(
        check(c, &edited, &tables[&c.file])
            .unwrap_err()
            .contains("not in results.md")
    );
    // The page and the claim both say 1.87, the summary still gives 1.77.
    let mut c2 = c.clone();
    c2.text = c.text.replace("1.77", "1.87");
    c2.stated[0] = "1.87".into();
    assert!(
        check(&c2, &edited, &tables[&c.file])
            .unwrap_err()
            .contains("does not round")
    );
}

#[test]
fn a_value_changed_in_a_summary_alone_is_caught() {
    let (claims, tables, doc) = load();
    let c = claims
        .iter()
        .find(|c| c.id == "stopping-1d-rule-lowest")
        .expect("claim");
    let mut t = tables[&c.file].clone();
    check(c, &doc, &t).expect("holds as committed");
    // UCB-LCB falls below the PBGI rule in one more cell: 16 of 18, not 17.
    let row = t
        .rows
        .get_mut("gp-d1-linear|LogEIPC|ucb-lcb|0.1")
        .expect("row");
    let col = t
        .columns
        .iter()
        .position(|x| x == "mean_r")
        .expect("column");
    row[col] = "0.1".into();
    assert!(check(c, &doc, &t).unwrap_err().contains("does not round"));
    // A missing row names the row.
    t.rows.remove("gp-d1-linear|LogEIPC|gss|0.1");
    assert!(
        check(c, &doc, &t)
            .unwrap_err()
            .contains("gp-d1-linear|LogEIPC|gss|0.1")
    );
}

#[test]
fn precision_is_the_printed_one() {
    assert_eq!(tolerance("35").unwrap(), 0.5);
    assert!((tolerance("2.05").unwrap() - 0.005).abs() < 1e-15);
    assert!((tolerance("7.3e3").unwrap() - 50.0).abs() < 1e-9);
    let t = parse_table("problem,policy,mean,se2\np,\"a,b\",2.0,0.3\np,c,1.0,0.4\n").unwrap();
    assert_eq!(t.value("p|a,b", "mean").unwrap(), 2.0);
    let sep = Computation::Separation {
        a: "p|a,b".into(),
        b: "p|c".into(),
        mean_column: default_mean(),
        se2_column: default_se2(),
    };
    let got = compute(&sep, &t).unwrap();
    assert!(
        (got[0] - 1.0).abs() < 1e-12 && (got[1] - 0.5).abs() < 1e-12,
        "{got:?}"
    );
    let claim = |stated: &str| Claim {
        id: "x".into(),
        file: "f".into(),
        text: format!("by {stated} against 0.5"),
        stated: vec![stated.into(), "0.5".into()],
        computation: sep.clone(),
    };
    let doc = "it differs by 1.0 against 0.5 and by 1.04 against 0.5 and by 1.1 against 0.5";
    check(&claim("1.0"), doc, &t).expect("1.0 holds");
    check(&claim("1.04"), doc, &t).expect_err("1.04 claims more digits than 1.0 rounds to");
    check(&claim("1.1"), doc, &t).expect_err("1.1 is off by a unit of the last digit");
    assert!(
        t.value("p|c", "median")
            .unwrap_err()
            .contains("no column 'median'")
    );
}

#[test]
fn values_ranges_and_sums_with_an_empty_key_field() {
    // The freeze-thaw files: keyed by instance, policy and λ (empty for a policy without one).
    let t = parse_table(
        "instance,policy,lambda,spent,stopped\n\
         i,gittins,0.05,0.023,16\ni,gittins,0.01,0.05,15\ni,asha,,0.3,0\n",
    )
    .unwrap();
    let value = Computation::Value {
        value: "i|gittins|0.05:spent".into(),
        scale: 100.0,
    };
    assert!((compute(&value, &t).unwrap()[0] - 2.3).abs() < 1e-12);
    let refs = |keys: &[&str], col: &str| keys.iter().map(|k| format!("{k}:{col}")).collect();
    let r = Computation::Range {
        refs: refs(&["i|gittins|0.05", "i|gittins|0.01", "i|asha|"], "spent"),
        scale: 1.0,
    };
    assert_eq!(compute(&r, &t).unwrap(), vec![0.023, 0.3]);
    let sum = Computation::Sum {
        refs: refs(&["i|gittins|0.05", "i|gittins|0.01"], "stopped"),
    };
    assert_eq!(compute(&sum, &t).unwrap(), vec![31.0]);
    let claim = |stated: &str| Claim {
        id: "x".into(),
        file: "f".into(),
        text: format!("stopped itself in {stated} of 32 runs"),
        stated: vec![stated.into()],
        computation: sum.clone(),
    };
    let doc = "it stopped itself in 31 of 32 runs; it stopped itself in 30 of 32 runs";
    check(&claim("31"), doc, &t).expect("31 holds");
    check(&claim("30"), doc, &t).expect_err("30 is not the sum");
    let empty = Computation::Sum { refs: vec![] };
    assert!(compute(&empty, &t).unwrap_err().contains("empty"));
}

#[test]
fn optuna_files_are_keyed_by_fraction_of_the_budget() {
    // examples/python/optuna_compare.py --csv: a row per sampler and fraction of the budget.
    let text = "problem,policy,fraction,cost,n,mean,se2\n\
                gp8,pandora,0.5,750,16,1.5,0.3\ngp8,pandora,1,1500,16,1.0,0.3\n\
                gp8,tpe,1,1500,16,2.0,0.4\n";
    let t = parse_table(text).unwrap();
    let sep = Computation::Separation {
        a: "gp8|tpe|1".into(),
        b: "gp8|pandora|1".into(),
        mean_column: "mean".into(),
        se2_column: "se2".into(),
    };
    let got = compute(&sep, &t).unwrap();
    assert!(
        (got[0] - 1.0).abs() < 1e-12 && (got[1] - 0.5).abs() < 1e-12,
        "{got:?}"
    );
    let dup = "problem,policy,fraction,mean\ngp8,tpe,1,2.0\ngp8,tpe,1,2.1\n";
    assert!(
        parse_table(dup)
            .unwrap_err()
            .contains("duplicate row gp8|tpe|1")
    );
}

#[test]
fn separated_pairs_count_both_directions_and_separated_lower_one() {
    // b is 1.0 below a with 2 s.e. 0.5 (separated); c is 0.3 below a (not separated).
    let t =
        parse_table("problem,policy,mean,se2\np,a,2.0,0.3\np,b,1.0,0.4\np,c,1.7,0.3\n").unwrap();
    let key = |q: &str| format!("p|{q}");
    let pairs = Computation::SeparatedPairs {
        groups: vec![vec![key("a"), key("b"), key("c")]],
    };
    // a–b separated, a–c not, b–c: 0.7 against 0.5, separated.
    assert_eq!(compute(&pairs, &t).unwrap(), vec![2.0]);
    let lower = |pairs: &[(&str, &str)]| Computation::SeparatedLower {
        pairs: pairs.iter().map(|(a, b)| [key(a), key(b)]).collect(),
    };
    // b is ahead of a and of c; a is ahead of nobody; c is not separated from a.
    assert_eq!(
        compute(&lower(&[("b", "a"), ("b", "c")]), &t).unwrap(),
        vec![2.0]
    );
    assert_eq!(
        compute(&lower(&[("a", "b"), ("c", "a"), ("a", "c")]), &t).unwrap(),
        vec![0.0]
    );
    assert!(compute(&lower(&[]), &t).unwrap_err().contains("empty"));
}
