//! Value parsers shared by the settings of every feature, so each feature
//! can keep its own setting types and still word errors the same way.

use std::path::PathBuf;
use std::time::Duration;

pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected on or off, got `{v}`")),
    }
}

/// A whole number from `min` to `max`. Callers narrow it to their type
/// (`max` fits it): one copy of the parser and its message, not one per type.
pub fn parse_range(v: &str, min: u64, max: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number from {min} to {max}, got `{v}`")),
    }
}

/// `parse_range` for a count that is a `usize`.
pub fn parse_count(v: &str, min: usize, max: usize) -> Result<usize, String> {
    parse_range(v, min as u64, max as u64).map(|n| n as usize)
}

/// Whole seconds, from `min` to a day.
pub fn parse_secs(v: &str, min: u64) -> Result<Duration, String> {
    parse_range(v, min, 86_400).map(Duration::from_secs)
}

pub fn parse_path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() || v.contains('\0') {
        return Err("expected a path".into());
    }
    Ok(PathBuf::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_their_bounds() {
        assert_eq!(parse_count("3", 1, 64), Ok(3));
        assert_eq!(
            parse_range("0", 1, 3600),
            Err("expected a number from 1 to 3600, got `0`".into())
        );
        assert_eq!(parse_secs("15", 1), Ok(Duration::from_secs(15)));
        assert!(parse_secs("86401", 1).is_err());
        assert_eq!(parse_bool("off"), Ok(false));
    }
}
