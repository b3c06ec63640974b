//! CSV cells: the one function ([`field`]) every text cell Pandora writes goes through, kept in
//! `pandora_study::csv` so that `pandora export` and `pandora serve` write the same cells.

pub use pandora_study::csv::field;
