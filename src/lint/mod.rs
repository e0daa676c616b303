//! Lint rules and their registry.

pub mod rules;
