//! The leaves of pipec, used from every layer above and using nothing of pipec:
//! sources and spans, names and identifiers, URI templates, base64, hex digests, and the
//! nesting limits.
#![warn(unreachable_pub)]

pub mod authority;
pub mod base64;
pub mod digest;
pub mod identifiers;
pub mod names;
pub mod nesting;
pub mod numbers;
pub mod source;
pub mod uri;
