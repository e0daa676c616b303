//! `pipec ui`: a local web inspector over a store (a redb file or PostgreSQL). A page the
//! binary carries (`assets/`, no build step) lists the threads with their status and cost;
//! a thread's page shows its pipeline as a graph coloured by node state, a timeline of its
//! attempts, nodes, model calls, reads and waits, each node's value, error and usage, its
//! gates, links healed and events, and follows a running thread as it goes. From the page a
//! person answers a pending gate with a form made from the gate's type (checked and stored
//! as `pipec answer` does), cancels a thread, resumes it, or runs it again from a node.
//!
//! Who may use it is `pipec serve --http`'s rule: a loopback address by default, every
//! request with the token the command printed (the page reads it from the URL's fragment,
//! which browsers never send), a `Host` that names this server (against DNS rebinding), and
//! for actions an `Origin`, when a browser sends one, that is the page's own.

mod api;
mod assets;
mod http;

pub use http::{Ui, UiOptions, bind};
