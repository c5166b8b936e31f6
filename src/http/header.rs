//! Header lines.
