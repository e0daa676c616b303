//! Hydration: when a node starts, the references among its parameters that it declares a
//! content type for are read (through the attempt's fetch cache), capped by their
//! binding's `max_bytes` while reading (a reference kept upstream, `ref<T>`, by the cap
//! of the binding that kept it), parsed by MIME type and validated. A parameter declared
//! `ref<T>` keeps its reference; an optional one whose resource is not served is null.
//! An embedded resource (content a tool result carried in place) is read from its
//! reference, without a round trip to the server, and never heals: nothing can die.
//! A read the server answers with an error (or with nothing) may mean the link died:
//! `heal.rs` re-derives it when its producer may be called again.

pub(crate) mod heal;

use serde_json::Value;

use crate::bind::Params;
use crate::context::AttemptContext;
use crate::error::RuntimeError;
use crate::error::TryError;
use crate::progress::{Step, human_bytes};
use crate::resources::results::{items_of, resolved};
use crate::resources::{Resources, Served};
use crate::validate::Mode;
use heal::Failure;
use pipec_diagnostic::{self as codes, Rule};
use pipec_mcp::{Body, McpError, RequestOptions, ResourceContent};
use pipec_plan::{Node, Param, Source};
use pipec_store::{Embedded, Event, ResourceRef, Write};

/// The cap of a binding that declares none.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 16_000_000;

/// What the reading node is, for messages, events and the journal of heals.
pub(crate) struct Reader<'a> {
    pub shared: &'a AttemptContext,
    pub node: &'a Node,
    pub generation: u32,
    pub item: u32,
    /// The journal step of the unit (heal replays are numbered within it).
    pub step: u32,
    /// Events of the reads, committed with the unit's result.
    pub writes: &'a mut Vec<Write>,
}

/// A binding's caps and declared MIME type.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Caps {
    pub max_bytes: Option<u64>,
    pub max_total: Option<u64>,
    pub mime: Option<String>,
}

fn caps_of(src: &Source) -> Caps {
    match src {
        Source::Resource {
            max_bytes, mime, ..
        } => Caps {
            max_bytes: *max_bytes,
            max_total: None,
            mime: mime.clone(),
        },
        Source::Link {
            max_bytes,
            max_total,
            mime,
            ..
        } => Caps {
            max_bytes: *max_bytes,
            max_total: *max_total,
            mime: mime.clone(),
        },
        Source::Each { list, .. } => caps_of(list),
        _ => Caps::default(),
    }
}

/// The cap a read stops at, and whether it came with the reference (the `max_bytes` of
/// the `ref<T>` binding upstream that kept it) rather than from the reading binding.
#[derive(Clone, Copy)]
struct Cap {
    bytes: u64,
    from_reference: bool,
}

impl Cap {
    /// A parameter bound to an upstream value holding a `ref<T>` has no cap of its own:
    /// the one written where the reference was kept applies.
    fn of(caps: &Caps, r: &ResourceRef) -> Cap {
        Cap {
            bytes: caps.max_bytes.or(r.max_bytes).unwrap_or(DEFAULT_MAX_BYTES),
            from_reference: caps.max_bytes.is_none() && r.max_bytes.is_some(),
        }
    }
}

/// Whether a parameter's value is fetched: it holds references and is not `ref<T>`.
fn fetched(p: &Param, v: &Value) -> bool {
    if p.keep_ref {
        return false;
    }
    match v {
        Value::Array(items) => !items.is_empty() && items.iter().all(ResourceRef::is_ref),
        other => ResourceRef::is_ref(other),
    }
}

/// Whether any parameter of the node must be fetched before it runs.
pub(crate) fn needed(node: &Node, params: &Params) -> bool {
    node.params
        .iter()
        .any(|p| params.get(&p.name).is_some_and(|v| fetched(p, v)))
}

impl Reader<'_> {
    fn resources(&self) -> &Resources {
        &self.shared.resources
    }

    fn error(&self, param: &str, rule: &'static Rule, message: String) -> TryError {
        TryError::Fatal(
            self.coded(param, rule, message)
                .stored(Some(&self.node.name)),
        )
    }

    fn coded(&self, param: &str, rule: &'static Rule, message: String) -> RuntimeError {
        RuntimeError::new(
            rule,
            self.shared.scrubber.scrub(&format!(
                "the parameter `{param}` of `{}`: {message}",
                self.node.name
            )),
        )
    }

    fn transient(&self, param: &str, message: String) -> TryError {
        TryError::Transient {
            rule: &codes::MCP_SERVER_FAILED,
            message: self.shared.scrubber.scrub(&format!(
                "the parameter `{param}` of `{}`: {message}",
                self.node.name
            )),
        }
    }

    /// Fetches the parameters named in `only` (all when `None`) that need it.
    pub(crate) async fn hydrate(
        &mut self,
        params: &mut Params,
        only: Option<&[String]>,
    ) -> Result<(), TryError> {
        let node = self.node;
        for p in &node.params {
            if only.is_some_and(|names| !names.contains(&p.name)) {
                continue;
            }
            let Some(v) = params.get(&p.name).cloned() else {
                continue;
            };
            if !fetched(p, &v) {
                continue;
            }
            let caps = caps_of(&p.source);
            let value = match v {
                Value::Array(refs) => self.fetch_list(p, &refs, &caps).await?,
                one => {
                    let r = ResourceRef::from_value(&one).ok_or_else(|| {
                        self.error(
                            &p.name,
                            &codes::INTERNAL_ERROR,
                            "a damaged reference".into(),
                        )
                    })?;
                    match self.fetch(&p.name, &r, &caps).await {
                        Ok((contents, _)) => {
                            self.parse(&p.name, &r.uri, &contents, &p.schema, &caps)?
                        }
                        // An optional parameter whose resource the server does not
                        // serve receives null.
                        Err(TryError::Fatal(e))
                            if p.optional && e.code == codes::RESOURCE_NOT_FOUND.code =>
                        {
                            Value::Null
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            params.insert(p.name.clone(), value);
        }
        Ok(())
    }

    /// One reference read and parsed into `schema` (a reader called by a model), and
    /// its size.
    pub(crate) async fn read_value(
        &mut self,
        label: &str,
        r: &ResourceRef,
        caps: &Caps,
        schema: &Value,
    ) -> Result<(Value, u64), TryError> {
        let (contents, size) = self.fetch(label, r, caps).await?;
        Ok((self.parse(label, &r.uri, &contents, schema, caps)?, size))
    }

    /// Several references into a list: each within `max_bytes`, all within `max_total`.
    async fn fetch_list(
        &mut self,
        p: &Param,
        refs: &[Value],
        caps: &Caps,
    ) -> Result<Value, TryError> {
        let plan = self.shared.plan.clone();
        let item_schema = items_of(&plan, &p.schema).cloned().unwrap_or(Value::Null);
        let mut out = Vec::new();
        let mut total = 0u64;
        for v in refs {
            let r = ResourceRef::from_value(v).ok_or_else(|| {
                self.error(
                    &p.name,
                    &codes::INTERNAL_ERROR,
                    "a damaged reference".into(),
                )
            })?;
            let (contents, size) = self.fetch(&p.name, &r, caps).await?;
            total += size;
            if let Some(cap) = caps.max_total
                && total > cap
            {
                return Err(self.error(
                    &p.name,
                    &codes::RESOURCE_TOO_LARGE,
                    format!(
                        "its {} resources come to more than its `max_total` of {} (reached at {}, {} so far)",
                        refs.len(),
                        human_bytes(cap),
                        r.uri,
                        human_bytes(total)
                    ),
                ));
            }
            out.push(self.parse(&p.name, &r.uri, &contents, &item_schema, caps)?);
        }
        let list = Value::Array(out);
        if let Err(e) = self.shared.validators.check(&p.schema, &list, Mode::Open) {
            return Err(self.error(
                &p.name,
                &codes::RESOURCE_PARSE_FAILED,
                format!("the list does not fit `{}`: {e}", p.type_name),
            ));
        }
        Ok(list)
    }

    /// One reference's contents and their decoded size, healing a dead link once (and a
    /// link whose URI lost a secret to the scrubber, before it is read).
    async fn fetch(
        &mut self,
        param: &str,
        r: &ResourceRef,
        caps: &Caps,
    ) -> Result<(std::sync::Arc<Vec<ResourceContent>>, u64), TryError> {
        if let Some(embedded) = &r.embedded {
            return self.embedded(param, r, embedded, caps);
        }
        // A reference healed earlier (in this attempt or before) is read at its new URI.
        let current = match r.origin.as_ref().and_then(|o| self.resources().heal_of(o)) {
            Some(h) => h.to,
            None => r.clone(),
        };
        let cap = Cap::of(caps, r);
        let first = match self.shared.scrubber.placeholder_in(&current.uri) {
            // The store keeps a link as the scrubber left it: a URI that held a secret
            // (a link of a call given one) holds `secret(NAME)` after a resume, and
            // reading that would read another resource. Its producer, called again with
            // the secret, gives the link back.
            Some(name) => format!(
                "its URI held the secret `{name}`, which pipec does not store, so it is read again from a new call"
            ),
            None if self
                .resources()
                .dead_links
                .kills(current.kind.as_deref(), &current.uri) =>
            {
                "the server answered `resource not found` (a dead link the test injected)"
                    .to_string()
            }
            None => match self.read(param, &current, cap).await {
                Ok(ok) => return Ok(ok),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Dead(cause)) => format!("the server answered `{cause}`"),
            },
        };
        let healed = heal::heal(self, param, &current, &first).await?;
        self.resources().cache.forget(&current.server, &current.uri);
        match self.read(param, &healed, cap).await {
            Ok(ok) => Ok(ok),
            Err(Failure::Fatal(e)) => Err(e),
            Err(Failure::Dead(second)) => Err(self.error(
                param,
                &codes::RESOURCE_EXPIRED,
                format!(
                    "{} is dead ({first}); `{}` was called again and gave {}, and reading that failed too: `{second}`",
                    current.uri,
                    current
                        .producing_call
                        .as_ref()
                        .map_or("its producer", |c| c.tool.as_str()),
                    healed.uri
                ),
            )),
        }
    }

    /// The content an embedded resource carried, within the binding's cap as a read
    /// would be.
    fn embedded(
        &self,
        param: &str,
        r: &ResourceRef,
        embedded: &Embedded,
        caps: &Caps,
    ) -> Result<(std::sync::Arc<Vec<ResourceContent>>, u64), TryError> {
        let body = match (&embedded.text, &embedded.blob) {
            (Some(t), _) => Body::Text(t.clone()),
            (None, Some(b)) => Body::Blob(pipec_base::base64::decode(b).map_err(|e| {
                self.error(
                    param,
                    &codes::RESOURCE_PARSE_FAILED,
                    format!("the embedded content of {} is not base64: {e}", r.uri),
                )
            })?),
            (None, None) => {
                return Err(self.error(
                    param,
                    &codes::RESOURCE_NOT_FOUND,
                    format!(
                        "{} was a {} block without content, which cannot be read",
                        r.uri, embedded.block
                    ),
                ));
            }
        };
        let content = ResourceContent {
            uri: r.uri.clone(),
            mime: r.mime.clone(),
            body,
        };
        let size = content.len() as u64;
        let cap = Cap::of(caps, r);
        if size > cap.bytes {
            return Err(self.too_large(param, &r.uri, Some(size), cap));
        }
        Ok((std::sync::Arc::new(vec![content]), size))
    }

    /// A read through the cache. `Dead` is an answer that may mean the link expired.
    async fn read(
        &mut self,
        param: &str,
        r: &ResourceRef,
        cap: Cap,
    ) -> Result<(std::sync::Arc<Vec<ResourceContent>>, u64), Failure> {
        // The message holding the content is larger than the content (JSON escaping,
        // base64): the transport stops at twice the cap, the content is counted after.
        let limit = (cap.bytes as usize)
            .saturating_mul(2)
            .saturating_add(64 * 1024);
        let options = RequestOptions {
            timeout: None,
            limit: Some(limit.min(crate::resources::servers::DEFAULT_MAX_MESSAGE_BYTES)),
            task: false,
        };
        let resources = &self.shared.resources;
        let started = std::time::Instant::now();
        let got = resources
            .cache
            .get(&r.server, &r.uri, || {
                crate::resources::servers::Servers::read(
                    &resources.servers,
                    &r.server,
                    &r.uri,
                    options,
                )
            })
            .await;
        match got {
            Ok((contents, served)) => {
                let size: u64 = contents.iter().map(|c| c.len() as u64).sum();
                let ms = match served {
                    Served::Cached => 0,
                    _ => u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                };
                self.note_read(r, size, served, ms);
                if contents.is_empty() {
                    return Err(Failure::Dead("no contents".into()));
                }
                if size > cap.bytes {
                    return Err(Failure::Fatal(self.too_large(
                        param,
                        &r.uri,
                        Some(size),
                        cap,
                    )));
                }
                Ok((contents, size))
            }
            Err(e) => Err(self.classify(param, r, e, cap)),
        }
    }

    fn too_large(&self, param: &str, uri: &str, size: Option<u64>, cap: Cap) -> TryError {
        let size = match size {
            Some(s) => format!("is {}, over", human_bytes(s)),
            None => "is larger than".to_string(),
        };
        let mut e = RuntimeError::new(
            &codes::RESOURCE_TOO_LARGE,
            format!(
                "the parameter `{param}` of `{}`: {uri} {size} its `max_bytes` of {}; reading stopped at the cap",
                self.node.name,
                human_bytes(cap.bytes)
            ),
        );
        e = e.help(if cap.from_reference {
            format!(
                "`{param}` holds a reference kept upstream (`ref<T>`): raise `max_bytes` on the binding that kept it, or bind a smaller slice of it"
            )
        } else {
            format!("raise `max_bytes` on the binding of `{param}`, or bind a smaller slice of it")
        });
        TryError::Fatal(e.stored(Some(&self.node.name)))
    }

    /// What a failed read means: a candidate expiry (the server answered with an error
    /// code that can mean "not found"), or a failure no replay can fix.
    fn classify(&self, param: &str, r: &ResourceRef, e: McpError, cap: Cap) -> Failure {
        match &e {
            McpError::Server { code, .. } if heal::may_mean_expired(*code) => {
                Failure::Dead(self.shared.scrubber.scrub(&server_answer(&e)))
            }
            McpError::TooLarge { size, .. } => {
                // The message was larger than twice the cap: the content can only be
                // larger than the cap.
                Failure::Fatal(self.too_large(param, &r.uri, *size, cap))
            }
            McpError::Start { .. }
            | McpError::StartTimeout { .. }
            | McpError::Closed { .. }
            | McpError::Timeout { .. }
            | McpError::Garbage { .. } => {
                Failure::Fatal(self.transient(param, format!("reading {}: {e}", r.uri)))
            }
            McpError::Http { status, .. } if *status >= 500 => {
                Failure::Fatal(self.transient(param, format!("reading {}: {e}", r.uri)))
            }
            McpError::Http {
                server,
                status: status @ (401 | 403),
                ..
            } => Failure::Fatal(TryError::Fatal(
                self.coded(
                    param,
                    &codes::MCP_SERVER_FAILED,
                    format!("reading {}: {e}", r.uri),
                )
                .help(format!(
                    "HTTP {status} refuses the credentials pipec sent: check the `headers` of the server `{server}` and the secrets they name"
                ))
                .stored(Some(&self.node.name)),
            )),
            _ => Failure::Fatal(self.error(
                param,
                &codes::MCP_SERVER_FAILED,
                format!("reading {}: {e}", r.uri),
            )),
        }
    }

    fn note_read(&mut self, r: &ResourceRef, bytes: u64, served: Served, ms: u64) {
        let cached = served == Served::Cached;
        self.writes.push(Write::Event(Event::ResourceRead {
            node: self.node.name.clone(),
            item: self.item,
            server: r.server.clone(),
            uri: r.uri.clone(),
            bytes,
            cached,
            ms,
        }));
        if let Some(p) = &self.shared.progress {
            p.step(Step::Read {
                node: &self.node.name,
                uri: &r.uri,
                bytes,
                cached,
            });
        }
    }

    /// Contents into the declared type: text into `string`, JSON (whatever MIME type
    /// labels it, text/plain included) into anything, a blob into `bytes`.
    fn parse(
        &self,
        param: &str,
        uri: &str,
        contents: &[ResourceContent],
        schema: &Value,
        caps: &Caps,
    ) -> Result<Value, TryError> {
        let plan = &self.shared.plan;
        let value = match contents {
            [one] => self.parse_one(param, uri, one, schema, caps)?,
            several => match items_of(plan, schema) {
                Some(item) => Value::Array(
                    several
                        .iter()
                        .map(|c| self.parse_one(param, uri, c, item, caps))
                        .collect::<Result<_, _>>()?,
                ),
                None => {
                    return Err(self.error(
                        param,
                        &codes::RESOURCE_PARSE_FAILED,
                        format!(
                            "{uri} has {} contents, and only a list parameter takes several",
                            several.len()
                        ),
                    ));
                }
            },
        };
        self.shared
            .validators
            .check(schema, &value, Mode::Open)
            .map_err(|e| {
                self.error(
                    param,
                    &codes::RESOURCE_PARSE_FAILED,
                    format!("the content of {uri} does not fit its type: {e}"),
                )
            })?;
        Ok(value)
    }

    fn parse_one(
        &self,
        param: &str,
        uri: &str,
        c: &ResourceContent,
        schema: &Value,
        caps: &Caps,
    ) -> Result<Value, TryError> {
        let s = resolved(&self.shared.plan, schema);
        let is_string = s.get("type").and_then(Value::as_str) == Some("string");
        let is_bytes =
            is_string && s.get("contentEncoding").and_then(Value::as_str) == Some("base64");
        let mime = c
            .mime
            .as_deref()
            .or(caps.mime.as_deref())
            .unwrap_or("")
            .to_ascii_lowercase();
        let essence = mime.split(';').next().unwrap_or("").trim().to_string();
        if is_bytes {
            let raw: &[u8] = match &c.body {
                Body::Text(t) => t.as_bytes(),
                Body::Blob(b) => b,
            };
            return Ok(Value::String(pipec_base::base64::encode(raw)));
        }
        let text = match &c.body {
            Body::Text(t) => t.as_str(),
            Body::Blob(b) => std::str::from_utf8(b).map_err(|_| {
                self.error(
                    param,
                    &codes::RESOURCE_PARSE_FAILED,
                    format!(
                        "{uri} is binary ({}), and its parameter is not `bytes`",
                        or_unknown(&essence)
                    ),
                )
            })?,
        };
        if is_string {
            return Ok(Value::String(text.to_string()));
        }
        let json_like = essence.is_empty()
            || essence == "application/json"
            || essence.ends_with("+json")
            || essence.starts_with("text/");
        if !json_like {
            return Err(self.error(
                param,
                &codes::RESOURCE_PARSE_FAILED,
                format!(
                    "{uri} is `{essence}`, which pipec does not parse into `{}`; declare the parameter `string` or `bytes`",
                    schema_name(schema)
                ),
            ));
        }
        serde_json::from_str(text).map_err(|e| {
            self.error(
                param,
                &codes::RESOURCE_PARSE_FAILED,
                format!("{uri} is not JSON ({e})"),
            )
        })
    }
}

fn or_unknown(mime: &str) -> &str {
    if mime.is_empty() {
        "no MIME type"
    } else {
        mime
    }
}

fn schema_name(schema: &Value) -> String {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .map_or_else(|| "its type".to_string(), str::to_string)
}

/// The server's answer to a failed read, for messages.
fn server_answer(e: &McpError) -> String {
    match e {
        McpError::Server { code, message, .. } => format!("{code}: {message}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_the_caps_are_written() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(200_000), "200 KB");
        assert_eq!(human_bytes(5_140_570), "5.1 MB");
    }
}
