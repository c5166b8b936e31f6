//! Value parsers shared by the settings of every feature, so each feature
//! can keep its own setting types and still word errors the same way.

use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected on or off, got `{v}`")),
    }
}

/// A whole number from `min` to `max`.
pub fn parse_range<T>(v: &str, min: T, max: T) -> Result<T, String>
where
    T: FromStr + PartialOrd + Display,
{
    match v.parse::<T>() {
        Ok(n) if min <= n && n <= max => Ok(n),
        _ => Err(format!("expected a number from {min} to {max}, got `{v}`")),
    }
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
        assert_eq!(parse_range("3", 1usize, 64), Ok(3));
        assert_eq!(
            parse_range("0", 1u64, 3600),
            Err("expected a number from 1 to 3600, got `0`".into())
        );
        assert_eq!(parse_secs("15", 1), Ok(Duration::from_secs(15)));
        assert!(parse_secs("86401", 1).is_err());
        assert_eq!(parse_bool("off"), Ok(false));
    }
}
