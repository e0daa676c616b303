//! JSON Schema, once for all of pipec. The schemas pipec writes ([`build`], which the
//! lowering of types and the runtime's own answers use) and what they refer to
//! ([`refs`]); a server's schemas read as pipec types ([`read`]: what `pipec tools pull`
//! declares), and by the same reading whether a declared parameter fits what a server
//! takes ([`fit`]); an example value to show a person ([`example()`]); a value's schema as a
//! form a person fills in ([`form`]: what a served gate asks a client); the schemas a model
//! is shown, which the runtime sends and the checker sizes ([`shown`]); and, behind the
//! `validate` feature that only the runtime turns on, validating values ([`validate`],
//! with the jsonschema crate).
//!
//! The compiler builds this crate without `validate`: it depends on serde_json and
//! `pipec-base` alone.
#![warn(unreachable_pub)]

pub mod build;
pub mod declared;
pub mod example;
pub mod fit;
pub mod form;
pub mod read;
pub mod refs;
pub mod shown;
#[cfg(feature = "validate")]
pub mod validate;

pub use example::example;
