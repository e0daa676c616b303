//! The server side of MCP: a [`Provider`] (what a server offers, in pipec's terms) served
//! over stdio or streamable HTTP, with listings, reads, completions, prompts, tools and both
//! eras' subscriptions. rmcp's server types stay inside this module.

mod ask;
mod card;
mod handler;
mod http;
mod provider;
mod stdio;
mod tasks;
mod updates;

pub use handler::{LIMIT_REACHED, Served};
pub use http::{HttpAccess, HttpLimits, HttpServer, bind_http};
pub use provider::{
    Abilities, Block, Body, CallContext, CallFailure, Hints, IconInfo, InputNeeded, LinkOut,
    ListedResource, ListedTemplate, Progress, ProgressUpdate, PromptArgumentSpec, PromptFailure,
    PromptMessageOut, PromptSpec, Provider, ProviderFuture, Question, ReadContent, ReadFailure,
    ServerIdentity, TaskFailure, TaskState, TaskSupport, TaskView, ToolAnswer, ToolReply, ToolSpec,
};
pub use stdio::serve_stdio;
pub use updates::{LimitReached, SubscriptionLimits, Updates, WatchHook};
