//! Per-path rules from the config: cache and header rules, redirects, error
//! pages, SPA fallback, listing. Filled in by the UI-serving work.

#[derive(Debug, Clone, Default)]
pub struct Rules {}

impl Rules {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, _key: &str, _value: &str) -> Result<bool, String> {
        Ok(false)
    }
}
