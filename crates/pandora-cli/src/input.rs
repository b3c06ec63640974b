//! Reading JSON requests from a file or stdin, with errors that name the offending field.

use anyhow::{Context, Result, anyhow};
use pandora_study::error::plain_words;
use serde::de::DeserializeOwned;
use std::io::Read;

/// Reads the request from `path`, or from stdin when `path` is `None` or `-`; `what` names the
/// request in error messages.
pub fn read(path: Option<&str>, what: &str) -> Result<String> {
    match path {
        None | Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .with_context(|| format!("reading the {what} from stdin"))?;
            Ok(s)
        }
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading {p}")),
    }
}

/// Parses JSON into `T`; a type error is reported as `field.path: reason`, in user words
/// ([`plain_words`]).
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let reason = plain_words(&e.inner().to_string());
        if path == "." {
            anyhow!("{reason}")
        } else {
            anyhow!("{path}: {reason}")
        }
    })
}
