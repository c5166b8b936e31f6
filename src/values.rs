//! Value parsers shared by every setting.
