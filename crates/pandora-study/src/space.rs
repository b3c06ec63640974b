//! Search spaces: user-facing parameters mapped to and from the unit cube `[0,1]^d`.
//!
//! Inside Pandora every objective is *maximized* over the unit cube in `f64`. A [`SearchSpace`]
//! is the boundary: [`SearchSpace::encode`] turns a user parameter set (a JSON object
//! `name → value`) into a point of `[0,1]^d`, [`SearchSpace::decode`] turns any point of the cube
//! (clamped) back into parameters, and [`SearchSpace::snap`] = `encode(decode(x))` maps the
//! optimizer's continuous point to the representable point that is actually evaluated. The
//! [`Direction`] of the objective is mapped the same way ([`Direction::to_internal`]).
//!
//! # Configuration
//!
//! A space deserializes from TOML or JSON. Every parameter has a `name` and a `type`; unknown
//! fields are rejected so that typos (`hihg = 1`) do not pass silently:
//!
//! ```toml
//! [[params]]
//! name = "lr"
//! type = "float"
//! low = 1e-4
//! high = 1e-1
//! log = true            # optional, default false; needs low > 0
//!
//! [[params]]
//! name = "layers"
//! type = "int"
//! low = 1
//! high = 8              # `log = true` is allowed too (needs low >= 1)
//!
//! [[params]]
//! name = "batch_size"
//! type = "ordinal"
//! values = [16, 32, 64, 128]   # ordered; numbers or strings, e.g. ["small", "medium", "large"]
//!
//! [[params]]
//! name = "optimizer"
//! type = "categorical"
//! choices = ["adam", "sgd", "rmsprop"]
//! ```
//!
//! The same in JSON: `{"params": [{"name": "lr", "type": "float", "low": 1e-4, "high": 0.1,
//! "log": true}, ...]}`. Call [`SearchSpace::validate`] (or build with [`SearchSpace::new`])
//! before use; errors name the parameter, e.g. `space.lr: log scale needs low > 0`.
//!
//! # Encodings
//!
//! | kind | coordinates | decode | encode |
//! |---|---|---|---|
//! | `float` | 1 | `low + x (high − low)`, or geometric for `log` | inverse map |
//! | `int` | 1 | the integer whose cell contains `x` (equal cells, see below) | centre of the cell |
//! | `ordinal` (k values) | 1 | value number `round(x (k − 1))` | `index / (k − 1)` |
//! | `categorical` (k choices) | k | the choice with the largest coordinate | one-hot |
//!
//! * **Bounds are exact**: `x = 0` decodes to `low` and `x = 1` to `high` (floats are
//!   interpolated as `(1 − x)·low + x·high` and clamped; log floats special-case the ends).
//! * **Int** parameters treat the integer `v` as the cell `[v − ½, v + ½]`. The range
//!   `[low − ½, high + ½]` is mapped linearly (or logarithmically for `log = true`) onto `[0,1]`,
//!   so on the linear scale every integer of `[low, high]` gets an equal share `1/(high − low + 1)`
//!   of the unit interval — the end points included, unlike naive `round(low + x (high − low))`,
//!   which gives them half shares. On the log scale every integer gets an equal share of the
//!   *log* range of its cell. Encoding returns the centre of the cell (in the mapped coordinate),
//!   which is half a cell away from any rounding boundary. To reproduce the papers' Pest Control
//!   encoding (`floor(5x)`), declare `int { low = 0, high = 4 }`.
//! * **Ordinal** parameters follow the papers' treatment of ordered discrete choices: one
//!   coordinate, normalized index `i/(k − 1)`, decoded by rounding to the nearest index (the end
//!   values therefore own half shares `[0, 1/(2(k−1))]` and `[1 − 1/(2(k−1)), 1]`).
//! * **Categorical** parameters use a **one-hot relaxation**: one coordinate per choice, decoded
//!   by argmax (ties go to the first choice). Why not a single ordinal-like coordinate: a
//!   stationary kernel on one coordinate would treat choice 0 as closer to choice 1 than to
//!   choice 2, an ordering that unordered choices do not have. One-hot keeps every pair of
//!   choices at the same distance, at the price of `k` dimensions (keep `k` small; use
//!   `ordinal` when the choices really are ordered). Snapped points are one-hot vertices.
//!
//! Coordinates are laid out in declaration order: each `float`, `int` and `ordinal` parameter
//! takes one coordinate, each `categorical` takes one per choice.

use pandora_core::optim::{DiscreteCoord, MixedSpace, OneHotBlock};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Integer bounds are limited to this magnitude so that every integer survives the round trip
/// through the unit interval exactly (`f64` has 53 bits; the rest is headroom for rounding).
pub const INT_BOUND_LIMIT: f64 = 1e12;

/// One parameter of a search space, as declared in the configuration.
///
/// Serialized with an internal `type` tag in snake case; see the [module docs](self) for the
/// configuration syntax and the encodings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Param {
    /// A real number in `[low, high]`: `{ type = "float", name, low, high, log = false }`.
    Float {
        /// Parameter name (unique, non-empty).
        name: String,
        /// Lower bound (finite; `> 0` on the log scale).
        low: f64,
        /// Upper bound (finite, `> low`).
        high: f64,
        /// Logarithmic scale: `x = 0.5` decodes to the geometric midpoint `sqrt(low·high)`.
        #[serde(default)]
        log: bool,
    },
    /// An integer in `[low, high]`: `{ type = "int", name, low, high, log = false }`.
    Int {
        /// Parameter name (unique, non-empty).
        name: String,
        /// Lower bound (integral, `|low| ≤ 1e12`; `≥ 1` on the log scale).
        low: f64,
        /// Upper bound (integral, `> low`, `|high| ≤ 1e12`).
        high: f64,
        /// Logarithmic scale (each integer gets an equal share of the log range of its cell).
        #[serde(default)]
        log: bool,
    },
    /// Ordered choices: `{ type = "ordinal", name, values = [..] }`.
    Ordinal {
        /// Parameter name (unique, non-empty).
        name: String,
        /// At least two distinct numbers, strings or booleans, in their natural order.
        values: Vec<Value>,
    },
    /// Unordered choices: `{ type = "categorical", name, choices = [..] }` (one-hot encoded).
    Categorical {
        /// Parameter name (unique, non-empty).
        name: String,
        /// At least two distinct numbers, strings or booleans.
        choices: Vec<Value>,
    },
}

impl Param {
    /// The parameter's name.
    pub fn name(&self) -> &str {
        match self {
            Param::Float { name, .. }
            | Param::Int { name, .. }
            | Param::Ordinal { name, .. }
            | Param::Categorical { name, .. } => name,
        }
    }

    /// The number of unit-cube coordinates the parameter takes.
    pub fn dim(&self) -> usize {
        match self {
            Param::Categorical { choices, .. } => choices.len(),
            _ => 1,
        }
    }

    fn err(&self, reason: impl Into<String>) -> Error {
        Error::invalid(format!("space.{}", self.name()), reason)
    }

    /// Checks the declaration of this one parameter (not name uniqueness; see
    /// [`SearchSpace::validate`]).
    pub fn validate(&self) -> Result<()> {
        match self {
            Param::Float { low, high, log, .. } => {
                check_bounds(self, *low, *high)?;
                if *log && *low <= 0.0 {
                    return Err(self.err("log scale needs low > 0"));
                }
            }
            Param::Int { low, high, log, .. } => {
                check_bounds(self, *low, *high)?;
                if low.fract() != 0.0 || high.fract() != 0.0 {
                    return Err(self.err(format!(
                        "int bounds must be integers (got low = {low}, high = {high})"
                    )));
                }
                if low.abs() > INT_BOUND_LIMIT || high.abs() > INT_BOUND_LIMIT {
                    return Err(self.err(format!(
                        "int bounds must lie within ±{INT_BOUND_LIMIT:e} (use a float parameter)"
                    )));
                }
                if *log && *low < 1.0 {
                    return Err(self.err("log scale needs low > 0 (low >= 1 for int)"));
                }
            }
            Param::Ordinal { values, .. } => check_choices(self, "values", values)?,
            Param::Categorical { choices, .. } => check_choices(self, "choices", choices)?,
        }
        Ok(())
    }

    /// Encodes one value into `out` (which has length [`Param::dim`]).
    fn encode_into(&self, v: &Value, out: &mut [f64]) -> Result<()> {
        match self {
            Param::Float { low, high, log, .. } => {
                let x = v
                    .as_f64()
                    .ok_or_else(|| self.err(format!("expected a number, got {v}")))?;
                if !(x >= *low && x <= *high) {
                    return Err(self.err(format!("{x} is outside [{low}, {high}]")));
                }
                out[0] = if *log {
                    ((x.ln() - low.ln()) / (high.ln() - low.ln())).clamp(0.0, 1.0)
                } else {
                    ((x - low) / (high - low)).clamp(0.0, 1.0)
                };
            }
            Param::Int { low, high, log, .. } => {
                let x = match v.as_f64() {
                    Some(x) if x.fract() == 0.0 => x,
                    _ => return Err(self.err(format!("expected an integer, got {v}"))),
                };
                if !(x >= *low && x <= *high) {
                    return Err(self.err(format!("{x} is outside [{low}, {high}]")));
                }
                out[0] = int_encode(*low, *high, *log, x);
            }
            Param::Ordinal { values, .. } => {
                let i = find_choice(values, v)
                    .ok_or_else(|| self.err(format!("{v} is not one of the values")))?;
                out[0] = i as f64 / (values.len() - 1) as f64;
            }
            Param::Categorical { choices, .. } => {
                let i = find_choice(choices, v)
                    .ok_or_else(|| self.err(format!("{v} is not one of the choices")))?;
                out.fill(0.0);
                out[i] = 1.0;
            }
        }
        Ok(())
    }

    /// Decodes this parameter's coordinates (clamped to `[0,1]`).
    fn decode_from(&self, xs: &[f64]) -> Value {
        match self {
            Param::Float { low, high, log, .. } => {
                let x = clamp01(xs[0]);
                let v = if x <= 0.0 {
                    *low
                } else if x >= 1.0 {
                    *high
                } else if *log {
                    (low.ln() + x * (high.ln() - low.ln())).exp()
                } else {
                    (1.0 - x) * low + x * high
                };
                Value::from(v.clamp(*low, *high))
            }
            Param::Int { low, high, log, .. } => {
                Value::from(int_decode(*low, *high, *log, clamp01(xs[0])) as i64)
            }
            Param::Ordinal { values, .. } => {
                let k = values.len();
                let i = (clamp01(xs[0]) * (k - 1) as f64).round() as usize;
                values[i.min(k - 1)].clone()
            }
            Param::Categorical { choices, .. } => {
                let mut best = 0;
                for (i, &x) in xs.iter().enumerate() {
                    if clamp01(x) > clamp01(xs[best]) {
                        best = i;
                    }
                }
                choices[best].clone()
            }
        }
    }
}

/// Clamps to `[0,1]`; NaN maps to 0 (so it decodes to the lower bound / first choice).
fn clamp01(x: f64) -> f64 {
    if x >= 1.0 {
        1.0
    } else if x > 0.0 {
        x
    } else {
        0.0
    }
}

fn check_bounds(p: &Param, low: f64, high: f64) -> Result<()> {
    if !low.is_finite() || !high.is_finite() {
        return Err(p.err(format!(
            "bounds must be finite (got low = {low}, high = {high})"
        )));
    }
    if low >= high {
        return Err(p.err(format!("needs low < high (got low = {low}, high = {high})")));
    }
    Ok(())
}

fn check_choices(p: &Param, field: &str, items: &[Value]) -> Result<()> {
    if items.len() < 2 {
        return Err(p.err(format!("needs at least 2 {field}, got {}", items.len())));
    }
    for (i, v) in items.iter().enumerate() {
        if !matches!(v, Value::Number(_) | Value::String(_) | Value::Bool(_)) {
            return Err(p.err(format!(
                "{field} must be numbers, strings or booleans (got {v})"
            )));
        }
        if find_choice(&items[..i], v).is_some() {
            return Err(p.err(format!("duplicate entry {v} in {field}")));
        }
    }
    Ok(())
}

/// Index of `v` among `items`; numbers compare by value (so `32` matches `32.0`).
fn find_choice(items: &[Value], v: &Value) -> Option<usize> {
    items.iter().position(|c| match (c, v) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => c == v,
    })
}

/// The map of the extended int range `[low − ½, high + ½]` onto `[0,1]` (linear or log).
fn int_to_unit(low: f64, high: f64, log: bool, u: f64) -> f64 {
    let (a, b) = (low - 0.5, high + 0.5);
    if log {
        (u.ln() - a.ln()) / (b.ln() - a.ln())
    } else {
        (u - a) / (b - a)
    }
}

/// Centre (in the unit coordinate) of the cell `[v − ½, v + ½]` of the integer `v`.
fn int_encode(low: f64, high: f64, log: bool, v: f64) -> f64 {
    if !log {
        // Exact form of the general formula: (i + ½) / n.
        return (v - low + 0.5) / (high - low + 1.0);
    }
    let lo = int_to_unit(low, high, log, v - 0.5);
    let hi = int_to_unit(low, high, log, v + 0.5);
    (0.5 * (lo + hi)).clamp(0.0, 1.0)
}

/// The integer whose cell contains `x ∈ [0,1]`.
fn int_decode(low: f64, high: f64, log: bool, x: f64) -> f64 {
    let v = if log {
        let (a, b) = (low - 0.5, high + 0.5);
        (a.ln() + x * (b.ln() - a.ln())).exp().round()
    } else {
        low + (x * (high - low + 1.0)).floor()
    };
    v.clamp(low, high)
}

/// A search space: an ordered list of parameters mapped to the unit cube `[0,1]^d`.
///
/// See the [module docs](self) for the configuration syntax and the encodings. All methods
/// other than [`SearchSpace::validate`] assume a valid space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSpace {
    /// The parameters, in declaration order (this order fixes the coordinate layout).
    pub params: Vec<Param>,
}

impl SearchSpace {
    /// Builds a space and validates it.
    pub fn new(params: Vec<Param>) -> Result<Self> {
        let space = Self { params };
        space.validate()?;
        Ok(space)
    }

    /// Checks the declaration: at least one parameter; names non-empty (not blank) and unique;
    /// bounds finite with `low < high`; log scales with `low > 0`; int bounds integral and within
    /// [`INT_BOUND_LIMIT`]; at least two distinct scalar values/choices. Errors name the
    /// parameter (`space.<name>: <reason>`).
    pub fn validate(&self) -> Result<()> {
        if self.params.is_empty() {
            return Err(Error::invalid("space", "needs at least one parameter"));
        }
        for (i, p) in self.params.iter().enumerate() {
            if p.name().trim().is_empty() {
                return Err(Error::invalid(
                    format!("space.params[{i}]"),
                    "name must be non-empty",
                ));
            }
            if self.params[..i].iter().any(|q| q.name() == p.name()) {
                return Err(p.err("duplicate parameter name"));
            }
            p.validate()?;
        }
        Ok(())
    }

    /// The dimension `d` of the unit cube: one per float/int/ordinal parameter, one per choice of
    /// each categorical parameter.
    pub fn dim(&self) -> usize {
        self.params.iter().map(Param::dim).sum()
    }

    /// The parameter names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(Param::name)
    }

    /// Encodes a parameter set (a JSON object `name → value`) as a point of `[0,1]^d`.
    ///
    /// Errors name the parameter: missing, unknown, wrong type, out of bounds, unknown choice.
    /// Integers may be given as integral floats (`3.0`); ordinal values and categorical choices
    /// that are numbers match by numeric value.
    pub fn encode(&self, params: &Value) -> Result<Vec<f64>> {
        let obj: &Map<String, Value> = params.as_object().ok_or_else(|| {
            Error::invalid(
                "params",
                format!("expected an object name → value, got {params}"),
            )
        })?;
        if let Some(k) = obj
            .keys()
            .find(|k| !self.params.iter().any(|p| p.name() == *k))
        {
            return Err(Error::invalid(
                format!("space.{k}"),
                "unknown parameter (not in the search space)",
            ));
        }
        let mut out = vec![0.0; self.dim()];
        let mut off = 0;
        for p in &self.params {
            let v = obj.get(p.name()).ok_or_else(|| p.err("missing value"))?;
            p.encode_into(v, &mut out[off..off + p.dim()])?;
            off += p.dim();
        }
        Ok(out)
    }

    /// Decodes a point of the cube into a parameter set (a JSON object `name → value`).
    ///
    /// Coordinates are clamped to `[0,1]` (NaN counts as 0). Floats decode to numbers, ints to
    /// integers, ordinal and categorical parameters to the declared value.
    ///
    /// # Panics
    /// If `x.len() != self.dim()`.
    pub fn decode(&self, x: &[f64]) -> Value {
        assert_eq!(
            x.len(),
            self.dim(),
            "point dimension differs from the space's"
        );
        let mut obj = Map::new();
        let mut off = 0;
        for p in &self.params {
            obj.insert(p.name().to_owned(), p.decode_from(&x[off..off + p.dim()]));
            off += p.dim();
        }
        Value::Object(obj)
    }

    /// `encode(decode(x))`: the representable point that is evaluated when the optimizer
    /// proposes `x` (floats stay put up to rounding, ints move to their cell centre, ordinals to
    /// the nearest `i/(k − 1)`, categoricals to a one-hot vertex).
    ///
    /// # Panics
    /// If `x.len() != self.dim()`.
    pub fn snap(&self, x: &[f64]) -> Vec<f64> {
        assert_eq!(
            x.len(),
            self.dim(),
            "point dimension differs from the space's"
        );
        let mut out = vec![0.0; self.dim()];
        let mut off = 0;
        for p in &self.params {
            let d = p.dim();
            let v = p.decode_from(&x[off..off + d]);
            p.encode_into(&v, &mut out[off..off + d])
                .expect("a decoded value always encodes");
            off += d;
        }
        out
    }
}

/// Int parameters with more values than this are optimized as continuous coordinates (relaxed,
/// then snapped) instead of on their grid: a grid of this size is still cheap to sweep.
pub const INT_GRID_LIMIT: f64 = 100_000.0;

impl SearchSpace {
    /// The valid points of the unit cube for the optimizer ([`MixedSpace`]): a one-hot block per
    /// categorical parameter, a grid per ordinal (`i/(k − 1)`) and int parameter (the cell
    /// centres that [`SearchSpace::snap`] returns; ints with more than [`INT_GRID_LIMIT`] values
    /// stay continuous), every float continuous. Every acquisition and stopping statistic is
    /// maximized over these points only (see `docs/studies.md`, "Mixed spaces"); for a space of
    /// floats only the result is all-continuous and the optimizer runs unchanged.
    pub fn mixed_space(&self) -> MixedSpace {
        let mut one_hot = Vec::new();
        let mut discrete = Vec::new();
        let mut off = 0;
        for p in &self.params {
            match p {
                Param::Float { .. } => {}
                Param::Int { low, high, log, .. } => {
                    if high - low < INT_GRID_LIMIT {
                        let n = (high - low) as usize + 1;
                        let values = (0..n)
                            .map(|i| int_encode(*low, *high, *log, low + i as f64))
                            .collect();
                        discrete.push(DiscreteCoord { index: off, values });
                    }
                }
                Param::Ordinal { values, .. } => {
                    let k = values.len();
                    let values = (0..k).map(|i| i as f64 / (k - 1) as f64).collect();
                    discrete.push(DiscreteCoord { index: off, values });
                }
                Param::Categorical { choices, .. } => one_hot.push(OneHotBlock {
                    start: off,
                    len: choices.len(),
                }),
            }
            off += p.dim();
        }
        MixedSpace::new(self.dim(), one_hot, discrete)
            .expect("a valid search space has disjoint coordinates and increasing grids")
    }
}

/// The direction of optimization of the user's objective. Pandora maximizes internally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Smaller is better (losses, errors); negated internally.
    Minimize,
    /// Larger is better (accuracies, rewards).
    Maximize,
}

impl Direction {
    /// Maps a user objective value to the internal (maximized) scale: `Minimize` ↦ `−v`.
    pub fn to_internal(self, v: f64) -> f64 {
        match self {
            Direction::Minimize => -v,
            Direction::Maximize => v,
        }
    }

    /// Maps an internal (maximized) value back to the user's scale; inverse of
    /// [`Direction::to_internal`].
    pub fn from_internal(self, v: f64) -> f64 {
        self.to_internal(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small deterministic generator (64-bit LCG, high bits) for property-style tests.
    struct Lcg(u64);

    impl Lcg {
        fn next_f64(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }

        fn point(&mut self, d: usize) -> Vec<f64> {
            (0..d).map(|_| self.next_f64()).collect()
        }
    }

    fn float(name: &str, low: f64, high: f64, log: bool) -> Param {
        Param::Float {
            name: name.into(),
            low,
            high,
            log,
        }
    }

    fn int(name: &str, low: f64, high: f64, log: bool) -> Param {
        Param::Int {
            name: name.into(),
            low,
            high,
            log,
        }
    }

    fn mixed() -> SearchSpace {
        SearchSpace::new(vec![
            float("lr", 1e-4, 1e-1, true),
            float("momentum", 0.1, 0.99, false),
            int("layers", 1.0, 5.0, false),
            int("units", 16.0, 1024.0, true),
            Param::Ordinal {
                name: "batch".into(),
                values: vec![json!(16), json!(32), json!(64), json!(128)],
            },
            Param::Categorical {
                name: "opt".into(),
                choices: vec![json!("adam"), json!("sgd"), json!("rmsprop")],
            },
        ])
        .unwrap()
    }

    fn err_string(r: Result<impl std::fmt::Debug>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn layout_and_dim() {
        let s = mixed();
        assert_eq!(s.dim(), 5 + 3);
        let names: Vec<_> = s.names().collect();
        assert_eq!(names, ["lr", "momentum", "layers", "units", "batch", "opt"]);
    }

    #[test]
    fn bounds_decode_exactly() {
        let s = SearchSpace::new(vec![
            float("a", 0.1, 0.7, false),
            float("b", 1e-5, 3.3, true),
            int("c", -3.0, 7.0, false),
            int("d", 2.0, 1000.0, true),
        ])
        .unwrap();
        assert_eq!(
            s.decode(&[0.0; 4]),
            json!({"a": 0.1, "b": 1e-5, "c": -3, "d": 2})
        );
        assert_eq!(
            s.decode(&[1.0; 4]),
            json!({"a": 0.7, "b": 3.3, "c": 7, "d": 1000})
        );
        // Outside the cube clamps; NaN counts as 0.
        assert_eq!(
            s.decode(&[-0.5, 2.0, f64::NAN, 7.0]),
            json!({"a": 0.1, "b": 3.3, "c": -3, "d": 1000})
        );
        // Encoding the bounds of floats gives the corners.
        assert_eq!(
            s.encode(&json!({"a": 0.1, "b": 3.3, "c": 0, "d": 10}))
                .unwrap()[..2],
            [0.0, 1.0]
        );
    }

    #[test]
    fn float_linear_and_log() {
        let s = SearchSpace::new(vec![
            float("x", -2.0, 6.0, false),
            float("lr", 1e-4, 1.0, true),
        ])
        .unwrap();
        let v = s.decode(&[0.5, 0.5]);
        assert_eq!(v["x"], json!(2.0));
        // Geometric midpoint on the log scale.
        let lr = v["lr"].as_f64().unwrap();
        assert!((lr - 1e-2).abs() < 1e-15, "{lr}");
        let q = s.decode(&[0.25, 0.25]);
        assert!((q["lr"].as_f64().unwrap() - 1e-3).abs() < 1e-16);
        let x = s.encode(&json!({"x": 4.0, "lr": 1e-3})).unwrap();
        assert!(
            (x[0] - 0.75).abs() < 1e-15 && (x[1] - 0.25).abs() < 1e-15,
            "{x:?}"
        );
    }

    #[test]
    fn int_linear_covers_every_integer_equally() {
        for (low, high) in [(0.0, 1.0), (1.0, 5.0), (-7.0, 12.0), (0.0, 99.0)] {
            let s = SearchSpace::new(vec![int("n", low, high, false)]).unwrap();
            let n = (high - low + 1.0) as usize;
            let grid = 100_000;
            let mut counts = vec![0usize; n];
            for j in 0..=grid {
                let v = s.decode(&[j as f64 / grid as f64])["n"].as_i64().unwrap();
                counts[(v - low as i64) as usize] += 1;
            }
            let share = (grid + 1) as f64 / n as f64;
            for (i, &c) in counts.iter().enumerate() {
                assert!(
                    (c as f64 - share).abs() <= 2.0,
                    "[{low}, {high}]: integer {} hit {c} times, expected {share}",
                    low as i64 + i as i64
                );
            }
        }
    }

    #[test]
    fn int_log_cells_have_equal_log_width() {
        let (low, high) = (1.0f64, 100.0f64);
        let s = SearchSpace::new(vec![int("n", low, high, true)]).unwrap();
        let grid = 1_000_000;
        let mut counts = vec![0usize; 100];
        for j in 0..=grid {
            let v = s.decode(&[j as f64 / grid as f64])["n"].as_i64().unwrap();
            counts[(v - 1) as usize] += 1;
        }
        let total = (high + 0.5).ln() - (low - 0.5).ln();
        for (i, &c) in counts.iter().enumerate() {
            let v = 1.0 + i as f64;
            let expect = ((v + 0.5).ln() - (v - 0.5).ln()) / total * (grid + 1) as f64;
            assert!((c as f64 - expect).abs() <= 2.0, "{v}: {c} vs {expect}");
        }
        // Every integer is hit, and the log midpoint of the cells sits at x = 0.5.
        assert!(counts.iter().all(|&c| c > 0));
        let mid = ((low - 0.5) * (high + 0.5)).sqrt().round() as i64;
        assert_eq!(s.decode(&[0.5])["n"], json!(mid));
    }

    #[test]
    fn int_round_trips_every_integer() {
        for log in [false, true] {
            for (low, high) in [(1.0, 2.0), (1.0, 300.0), (3.0, 1e12)] {
                let s = SearchSpace::new(vec![int("n", low, high, log)]).unwrap();
                let mut vals: Vec<f64> = (0..300)
                    .map(|i| low + i as f64)
                    .filter(|&v| v <= high)
                    .collect();
                vals.extend((0..300).map(|i| high - i as f64).filter(|&v| v >= low));
                for v in vals {
                    let x = s.encode(&json!({"n": v as i64})).unwrap();
                    assert!((0.0..=1.0).contains(&x[0]));
                    assert_eq!(
                        s.decode(&x)["n"],
                        json!(v as i64),
                        "log={log} [{low}, {high}]"
                    );
                }
            }
        }
        // Integral floats are accepted; linear ints encode to cell centres.
        let s = SearchSpace::new(vec![int("n", 0.0, 3.0, false)]).unwrap();
        assert_eq!(s.encode(&json!({"n": 2.0})).unwrap(), [0.625]);
    }

    #[test]
    fn ordinal_rounds_to_nearest_index() {
        let s = SearchSpace::new(vec![Param::Ordinal {
            name: "size".into(),
            values: vec![json!("s"), json!("m"), json!("l")],
        }])
        .unwrap();
        let dec = |x: f64| s.decode(&[x])["size"].clone();
        assert_eq!(dec(0.0), json!("s"));
        assert_eq!(dec(0.24), json!("s"));
        assert_eq!(dec(0.26), json!("m"));
        assert_eq!(dec(0.74), json!("m"));
        assert_eq!(dec(0.76), json!("l"));
        assert_eq!(dec(1.0), json!("l"));
        assert_eq!(s.encode(&json!({"size": "m"})).unwrap(), [0.5]);
        assert_eq!(s.encode(&json!({"size": "l"})).unwrap(), [1.0]);
        assert_eq!(s.snap(&[0.3]), [0.5]);
        // Numeric values match by value and decode to the declared value.
        let t = SearchSpace::new(vec![Param::Ordinal {
            name: "b".into(),
            values: vec![json!(16), json!(32), json!(64)],
        }])
        .unwrap();
        assert_eq!(t.encode(&json!({"b": 32.0})).unwrap(), [0.5]);
        assert_eq!(t.decode(&[0.5]), json!({"b": 32}));
    }

    #[test]
    fn categorical_is_one_hot_argmax() {
        let s = SearchSpace::new(vec![
            float("x", 0.0, 1.0, false),
            Param::Categorical {
                name: "c".into(),
                choices: vec![json!("a"), json!(2), json!(true)],
            },
        ])
        .unwrap();
        assert_eq!(s.dim(), 4);
        assert_eq!(s.decode(&[0.5, 0.1, 0.9, 0.3])["c"], json!(2));
        assert_eq!(s.decode(&[0.5, 0.1, 0.2, 0.3])["c"], json!(true));
        // Ties (and clamped ties) go to the first choice.
        assert_eq!(s.decode(&[0.5, 0.0, 0.0, 0.0])["c"], json!("a"));
        assert_eq!(s.decode(&[0.5, 1.5, 3.0, 0.2])["c"], json!("a"));
        assert_eq!(
            s.encode(&json!({"x": 0.5, "c": true})).unwrap(),
            [0.5, 0.0, 0.0, 1.0]
        );
        assert_eq!(s.snap(&[0.5, 0.4, 0.6, 0.1]), [0.5, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn property_round_trips_on_random_points() {
        let s = mixed();
        let mut rng = Lcg(42);
        for _ in 0..2000 {
            let x = rng.point(s.dim());
            let p = s.decode(&x);
            let y = s.encode(&p).unwrap();
            assert_eq!(y, s.snap(&x));
            // decode(encode(p)) == p: discrete parts exactly, floats to rounding.
            let q = s.decode(&y);
            for k in ["layers", "units", "batch", "opt"] {
                assert_eq!(p[k], q[k], "{k} at {x:?}");
            }
            for k in ["lr", "momentum"] {
                let (a, b) = (p[k].as_f64().unwrap(), q[k].as_f64().unwrap());
                assert!((a - b).abs() <= 1e-12 * a.abs(), "{k}: {a} vs {b}");
            }
            // Snapping is idempotent and stays in the cube; floats barely move.
            let z = s.snap(&y);
            for (a, b) in y.iter().zip(&z) {
                assert!((a - b).abs() < 1e-12);
                assert!((0.0..=1.0).contains(a));
            }
            assert!((y[0] - x[0]).abs() < 1e-12 && (y[1] - x[1]).abs() < 1e-12);
            // Every decoded value is within bounds.
            let lr = p["lr"].as_f64().unwrap();
            assert!((1e-4..=1e-1).contains(&lr));
            let units = p["units"].as_i64().unwrap();
            assert!((16..=1024).contains(&units));
        }
    }

    #[test]
    fn encode_errors_name_the_parameter() {
        let s = mixed();
        let ok = json!({"lr": 0.01, "momentum": 0.5, "layers": 2, "units": 64, "batch": 32, "opt": "sgd"});
        assert!(s.encode(&ok).is_ok());
        let with = |k: &str, v: Value| {
            let mut o = ok.clone();
            o[k] = v;
            err_string(s.encode(&o))
        };
        assert_eq!(
            with("lr", json!(1.0)),
            "space.lr: 1 is outside [0.0001, 0.1]"
        );
        assert!(with("lr", json!("fast")).starts_with("space.lr: expected a number"));
        assert!(with("layers", json!(2.5)).starts_with("space.layers: expected an integer"));
        assert!(with("layers", json!(9)).starts_with("space.layers: 9 is outside"));
        assert!(with("batch", json!(48)).starts_with("space.batch: 48 is not one of"));
        assert!(with("opt", json!("adagrad")).starts_with("space.opt: \"adagrad\" is not one of"));
        let mut missing = ok.clone();
        missing.as_object_mut().unwrap().remove("units");
        assert_eq!(err_string(s.encode(&missing)), "space.units: missing value");
        let mut extra = ok.clone();
        extra["dropout"] = json!(0.1);
        assert!(err_string(s.encode(&extra)).starts_with("space.dropout: unknown parameter"));
        assert!(err_string(s.encode(&json!([1, 2]))).starts_with("params: expected an object"));
    }

    #[test]
    fn validation_errors_name_the_parameter() {
        let bad = |p: Param| err_string(SearchSpace::new(vec![float("ok", 0.0, 1.0, false), p]));
        assert_eq!(
            bad(float("lr", 0.0, 1.0, true)),
            "space.lr: log scale needs low > 0"
        );
        assert!(bad(float("x", 1.0, 1.0, false)).starts_with("space.x: needs low < high"));
        assert!(
            bad(float("x", 0.0, f64::INFINITY, false))
                .starts_with("space.x: bounds must be finite")
        );
        assert!(
            bad(float("x", f64::NAN, 1.0, false)).starts_with("space.x: bounds must be finite")
        );
        assert!(bad(int("n", 0.5, 3.0, false)).starts_with("space.n: int bounds must be integers"));
        assert!(bad(int("n", 0.0, 3.0, true)).starts_with("space.n: log scale needs low > 0"));
        assert!(bad(int("n", 0.0, 1e13, false)).starts_with("space.n: int bounds must lie within"));
        let one = Param::Ordinal {
            name: "o".into(),
            values: vec![json!(1)],
        };
        assert_eq!(bad(one), "space.o: needs at least 2 values, got 1");
        let dup = Param::Categorical {
            name: "c".into(),
            choices: vec![json!(1), json!(1.0)],
        };
        assert_eq!(bad(dup), "space.c: duplicate entry 1.0 in choices");
        let nested = Param::Categorical {
            name: "c".into(),
            choices: vec![json!(1), json!([2])],
        };
        assert!(bad(nested).starts_with("space.c: choices must be numbers, strings or booleans"));
        assert_eq!(
            bad(float("ok", 0.0, 2.0, false)),
            "space.ok: duplicate parameter name"
        );
        assert_eq!(
            bad(float(" ", 0.0, 2.0, false)),
            "space.params[1]: name must be non-empty"
        );
        assert_eq!(
            err_string(SearchSpace::new(vec![])),
            "space: needs at least one parameter"
        );
    }

    #[test]
    fn parses_config() {
        let cfg = json!({"params": [
            {"name": "lr", "type": "float", "low": 1e-4, "high": 0.1, "log": true},
            {"name": "momentum", "type": "float", "low": 0.1, "high": 0.99},
            {"name": "layers", "type": "int", "low": 1, "high": 5},
            {"name": "units", "type": "int", "low": 16, "high": 1024, "log": true},
            {"name": "batch", "type": "ordinal", "values": [16, 32, 64, 128]},
            {"name": "opt", "type": "categorical", "choices": ["adam", "sgd", "rmsprop"]}
        ]});
        let s: SearchSpace = serde_json::from_value(cfg.clone()).unwrap();
        s.validate().unwrap();
        assert_eq!(s, mixed());
        // Serialization round-trips.
        let back: SearchSpace = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        // Typos and unknown kinds are rejected.
        let typo = json!({"params": [{"name": "x", "type": "float", "low": 0, "hihg": 1}]});
        assert!(serde_json::from_value::<SearchSpace>(typo).is_err());
        let extra =
            json!({"params": [{"name": "x", "type": "int", "low": 0, "high": 1, "step": 2}]});
        assert!(serde_json::from_value::<SearchSpace>(extra).is_err());
        let kind = json!({"params": [{"name": "x", "type": "uniform", "low": 0, "high": 1}]});
        assert!(serde_json::from_value::<SearchSpace>(kind).is_err());
        let top = json!({"params": [], "seed": 1});
        assert!(serde_json::from_value::<SearchSpace>(top).is_err());
    }

    /// The optimizer's valid points are exactly the snapped points: every projection is a fixed
    /// point of `snap`, every snapped point is valid, and the layout matches the encoding.
    #[test]
    fn mixed_space_describes_the_snapped_points() {
        let s = mixed();
        let m = s.mixed_space();
        assert_eq!(m.dim(), s.dim());
        assert_eq!(m.one_hot().len(), 1);
        assert_eq!((m.one_hot()[0].start, m.one_hot()[0].len), (5, 3));
        let grids: Vec<(usize, usize)> = m
            .discrete()
            .iter()
            .map(|c| (c.index, c.values.len()))
            .collect();
        assert_eq!(grids, vec![(2, 5), (3, 1009), (4, 4)]);
        assert_eq!(m.continuous_coords(), vec![0, 1]);
        let mut rng = Lcg(7);
        for _ in 0..500 {
            let x = rng.point(s.dim());
            let p = m.project(&x);
            // Exact on the discrete coordinates; floats move by rounding only.
            let q = s.snap(&p);
            assert!(
                q.iter().zip(&p).all(|(a, b)| (a - b).abs() <= 1e-12),
                "{x:?}"
            );
            assert_eq!(q[2..], p[2..], "{x:?}");
            assert!(m.is_valid(&s.snap(&x)), "{x:?}");
        }
        // Floats only: all-continuous (the optimizer runs unchanged).
        let floats = SearchSpace::new(vec![float("a", 0.0, 1.0, false)]).unwrap();
        assert!(floats.mixed_space().is_continuous());
    }

    #[test]
    fn direction_maps_to_maximization() {
        assert_eq!(Direction::Minimize.to_internal(2.5), -2.5);
        assert_eq!(Direction::Maximize.to_internal(2.5), 2.5);
        for d in [Direction::Minimize, Direction::Maximize] {
            assert_eq!(d.from_internal(d.to_internal(-1.25)), -1.25);
        }
        let d: Direction = serde_json::from_value(json!("minimize")).unwrap();
        assert_eq!(d, Direction::Minimize);
        assert_eq!(
            serde_json::to_value(Direction::Maximize).unwrap(),
            json!("maximize")
        );
    }
}
