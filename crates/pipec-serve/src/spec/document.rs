//! A Resources document read into a [`Catalogue`]: the identification (`apiVersion`,
//! `kind`), the `service`, the `resources` keyed by URI and the `resourceTemplates` keyed
//! by URI template, each entry with its metadata and (for a resource) its content, and
//! the overlaps between what they serve. Every problem is reported; what is valid is kept.

use crate::catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, Service, StaticResource, TemplateDef,
    TemplateSource,
};
use pipec_base::source::Span;
use pipec_base::uri::{ServedOverlap, UriTemplate, served_overlaps};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_plan::served;

use super::uri_shape::{self, UriProblem};
use super::values::{Entries, Report};
use super::yaml_tree::YamlNode;
use pipec_base::base64;

pub const API_VERSION: &str = "reshapr.io/v1alpha1";
pub const KIND: &str = "Resources";

const TOP_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "service",
    "resources",
    "resourceTemplates",
];
const SERVICE_KEYS: &[&str] = &["name", "version"];
const META_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "mimeType",
    "icons",
    "annotations",
];
const CONTENT_KEYS: &[&str] = &["text", "blob", "remoteContent"];
const ICON_KEYS: &[&str] = &["src", "mimeType", "sizes"];
const ANNOTATION_KEYS: &[&str] = &["audience", "priority", "lastModified"];

/// The text of the file and the report its diagnostics go to.
pub(crate) struct Reader<'a> {
    pub text: &'a str,
    pub report: Report,
}

impl Reader<'_> {
    /// The whole document; `root` is `None` for an empty file.
    pub(super) fn document(&mut self, root: Option<&YamlNode>) -> Catalogue {
        let mut catalogue = Catalogue::default();
        let top = match root {
            Some(node) => self.report.mapping(
                node,
                "a Resources file",
                Some(TOP_KEYS),
                "a Resources file is a mapping of `apiVersion`, `kind`, `service`, `resources` and `resourceTemplates`",
            ),
            None => Some(Entries { entries: Vec::new() }),
        };
        let Some(top) = top else {
            return catalogue;
        };
        self.identification(&top, "apiVersion", API_VERSION, &r::WRONG_SPEC_API_VERSION);
        self.identification(&top, "kind", KIND, &r::WRONG_SPEC_KIND);
        catalogue.service = self.service(&top);
        if !top.has("resources") && !top.has("resourceTemplates") {
            let span = top
                .key_span("resources")
                .or(top.key_span("resourceTemplates"));
            self.report.push(
                Diagnostic::new(
                    &r::MISSING_SPEC_KEY,
                    self.report.file,
                    span.unwrap_or_default(),
                    "a Resources file declares `resources`, `resourceTemplates` or both",
                )
                .label("declares neither")
                .help("add `resources:` with an entry per URI, e.g. `'file:///project/readme.md': {name: README.MD, text: ...}`"),
            );
        }
        if let Some(node) = top.get("resources")
            && let Some(items) = self.report.mapping(
                node,
                "`resources`",
                None,
                "`resources` maps each URI to its resource: `'file:///project/readme.md':` and the keys below it",
            )
        {
            for (uri, key, value) in &items.entries {
                if let Some(resource) = self.resource(uri, key, value) {
                    catalogue.resources.push(resource);
                }
            }
        }
        let mut parsed: Vec<UriTemplate> = Vec::new();
        if let Some(node) = top.get("resourceTemplates")
            && let Some(items) = self.report.mapping(
                node,
                "`resourceTemplates`",
                None,
                "`resourceTemplates` maps each URI template to its template: `'file:///project/src/{path}':` and the keys below it",
            )
        {
            for (uri, key, value) in &items.entries {
                if let Some((template, def)) = self.template(uri, key, value) {
                    parsed.push(template);
                    catalogue.templates.push(def);
                }
            }
        }
        self.overlaps(&catalogue, &parsed);
        catalogue
    }

    /// `apiVersion` or `kind`, which must say exactly `expected`.
    fn identification(
        &mut self,
        top: &Entries<'_>,
        key: &str,
        expected: &str,
        rule: &'static pipec_diagnostic::Rule,
    ) {
        let file = self.report.file;
        let help = format!("write `{key}: {expected}`");
        match top.get(key) {
            None => self.report.push(
                Diagnostic::new(
                    rule,
                    file,
                    top.key_span(key).unwrap_or_default(),
                    format!(
                        "a Resources file says `{key}: {expected}`, and this one has no `{key}`"
                    ),
                )
                .label(format!("no `{key}`"))
                .help(help),
            ),
            Some(node) => {
                let Some(found) = self.report.text(node, &format!("`{key}`")) else {
                    return;
                };
                if found != expected {
                    self.report.push(
                        Diagnostic::new(
                            rule,
                            file,
                            node.span,
                            format!("`{key}` is `{found}`; pipec reads `{key}: {expected}`"),
                        )
                        .label(format!("not `{expected}`"))
                        .help(help),
                    );
                }
            }
        }
    }

    fn missing(&mut self, span: Span, message: String, label: &str, help: String) {
        let file = self.report.file;
        self.report.push(
            Diagnostic::new(&r::MISSING_SPEC_KEY, file, span, message)
                .label(label.to_string())
                .help(help),
        );
    }

    fn service(&mut self, top: &Entries<'_>) -> Option<Service> {
        let Some(node) = top.get("service") else {
            self.missing(
                top.key_span("service").unwrap_or_default(),
                "a Resources file names the `service` it belongs to".into(),
                "no `service`",
                "add `service:` with its `name` and `version` (e.g. `version: '1.0'`)".into(),
            );
            return None;
        };
        let entries = self.report.mapping(
            node,
            "`service`",
            Some(SERVICE_KEYS),
            "write `service:` with `name:` and `version:` below it",
        )?;
        let field = |reader: &mut Self, key: &str| {
            let value = entries
                .get(key)
                .and_then(|v| reader.report.text(v, &format!("`service.{key}`")));
            if value.is_none() && !entries.has(key) {
                reader.missing(
                    top.key_span("service").unwrap_or_default(),
                    format!("the `service` has no `{key}`"),
                    &format!("no `{key}`"),
                    format!("add `{key}:` under `service`"),
                );
            }
            value
        };
        let name = field(self, "name");
        let version = field(self, "version");
        Some(Service {
            name: name?,
            version: version?,
        })
    }

    /// The byte range of `[start, end)` of a key's text in the file: inside its quotes
    /// when the key is written without escapes, else the whole key.
    fn key_part(&self, key: &YamlNode, text: &str, start: usize, end: usize) -> Span {
        let raw = self
            .text
            .get(key.span.start as usize..key.span.end as usize)
            .unwrap_or("");
        let offset = if raw == text {
            Some(0)
        } else if raw.len() >= 2 && raw.get(1..raw.len() - 1) == Some(text) {
            Some(1)
        } else {
            None
        };
        match offset {
            Some(o) => Span::new(
                key.span.start + (o + start) as u32,
                key.span.start + (o + end) as u32,
            ),
            None => key.span,
        }
    }

    fn uri_problem(
        &mut self,
        rule: &'static pipec_diagnostic::Rule,
        key: &YamlNode,
        text: &str,
        p: UriProblem,
    ) {
        let span = self.key_part(key, text, p.start, p.end);
        let file = self.report.file;
        self.report.push(
            Diagnostic::new(rule, file, span, p.message)
                .label(p.label)
                .help(p.help),
        );
    }

    /// The metadata of a resource or template, and its entries for the caller's own keys.
    fn meta<'n>(
        &mut self,
        uri: &str,
        key: &YamlNode,
        value: &'n YamlNode,
        what: &str,
        known: &[&str],
    ) -> Option<(ResourceMeta, Entries<'n>)> {
        let entries = self.report.mapping(
            value,
            what,
            Some(known),
            "write its keys below the URI: `name:`, `title:`, `description:`, ...",
        )?;
        let name = entries
            .get("name")
            .and_then(|v| self.report.text(v, "`name`"));
        if name.is_none() && !entries.has("name") {
            self.missing(
                key.span,
                format!("{what} `{uri}` has no `name`"),
                "no `name`",
                "give it the short name clients show: `name: README.MD`".into(),
            );
        }
        let mut meta = ResourceMeta {
            name: name.unwrap_or_default(),
            ..ResourceMeta::default()
        };
        let text = |reader: &mut Self, k: &str| {
            entries
                .get(k)
                .and_then(|v| reader.report.text(v, &format!("`{k}`")))
        };
        meta.title = text(self, "title");
        meta.description = text(self, "description");
        meta.mime_type = text(self, "mimeType");
        if let Some(node) = entries.get("icons") {
            meta.icons = self.icons(node);
        }
        if let Some(node) = entries.get("annotations") {
            meta.annotations = self.annotations(node);
        }
        Some((meta, entries))
    }

    fn icons(&mut self, node: &YamlNode) -> Vec<Icon> {
        let Some(items) = self.report.sequence(
            node,
            "`icons`",
            "`icons` is a list: write each icon as `- src: https://...`",
        ) else {
            return Vec::new();
        };
        let mut icons = Vec::new();
        for item in items {
            let Some(entries) = self.report.mapping(
                item,
                "an icon",
                Some(ICON_KEYS),
                "write an icon as `- src: https://...` with `mimeType:` and `sizes:` below it",
            ) else {
                continue;
            };
            let src = entries
                .get("src")
                .and_then(|v| self.report.text(v, "an icon's `src`"));
            if src.is_none() && !entries.has("src") {
                self.missing(
                    item.span,
                    "an icon has no `src`".into(),
                    "no `src`",
                    "give the image's address: `src: https://example.com/icon.png`".into(),
                );
            }
            let mime_type = entries
                .get("mimeType")
                .and_then(|v| self.report.text(v, "an icon's `mimeType`"));
            let sizes = entries
                .get("sizes")
                .map(|v| {
                    self.report
                        .texts(
                            v,
                            "an icon's `sizes`",
                            "`sizes` is a list: `sizes: [\"48x48\"]`",
                        )
                        .into_iter()
                        .map(|(s, _)| s)
                        .collect()
                })
                .unwrap_or_default();
            let Some(src) = src else {
                continue;
            };
            if let Some(problem) = served::icon_source(&src)
                && let Some(at) = entries.get("src")
            {
                let file = self.report.file;
                self.report
                    .push(problem.at(&r::WRONG_SPEC_VALUE_TYPE, file, at.span));
            }
            icons.push(Icon {
                src,
                mime_type,
                sizes,
            });
        }
        icons
    }

    fn annotations(&mut self, node: &YamlNode) -> Option<Annotations> {
        let entries = self.report.mapping(
            node,
            "`annotations`",
            Some(ANNOTATION_KEYS),
            "write `annotations:` with `audience:`, `priority:` and `lastModified:` below it",
        )?;
        let mut annotations = Annotations::default();
        if let Some(list) = entries.get("audience") {
            for (who, span) in self.report.texts(
                list,
                "`audience`",
                "`audience` is a list: `audience: [user, assistant]`",
            ) {
                match served::audience(&who) {
                    Ok(()) => annotations.audience.push(who),
                    Err(problem) => {
                        let file = self.report.file;
                        self.report
                            .push(problem.at(&r::WRONG_SPEC_VALUE_TYPE, file, span));
                    }
                }
            }
        }
        if let Some(value) = entries.get("priority") {
            let help = "write a number from 0 (optional) to 1 (required), e.g. `priority: 0.8`";
            if let Some(p) = self.report.number(value, "`priority`", help) {
                match served::priority(p) {
                    Ok(p) => annotations.priority = Some(p),
                    Err(problem) => {
                        let file = self.report.file;
                        self.report.push(
                            problem
                                .at(&r::WRONG_SPEC_VALUE_TYPE, file, value.span)
                                .help(help),
                        );
                    }
                }
            }
        }
        if let Some(value) = entries.get("lastModified")
            && let Some(time) = self.report.text(value, "`lastModified`")
        {
            match served::last_modified(&time) {
                Ok(()) => annotations.last_modified = Some(time),
                Err(problem) => {
                    let file = self.report.file;
                    self.report.push(
                        problem
                            .at(&r::WRONG_SPEC_VALUE_TYPE, file, value.span)
                            .help(
                                "write the time in UTC, e.g. `lastModified: 2026-12-01T10:00:00Z`",
                            ),
                    );
                }
            }
        }
        Some(annotations)
    }

    fn resource(&mut self, uri: &str, key: &YamlNode, value: &YamlNode) -> Option<StaticResource> {
        let mut valid = true;
        if !uri_shape::has_scheme(uri) {
            self.uri_problem(
                &r::URI_WITHOUT_SCHEME,
                key,
                uri,
                uri_shape::scheme_problem(uri),
            );
            valid = false;
        }
        let known: Vec<&str> = META_KEYS
            .iter()
            .chain(["size"].iter())
            .chain(CONTENT_KEYS)
            .copied()
            .collect();
        let (mut meta, entries) = self.meta(uri, key, value, "the resource", &known)?;
        valid &= entries.get("name").is_some_and(|v| v.scalar().is_some());
        if let Some(node) = entries.get("size") {
            meta.size = self.report.count(
                node,
                "`size`",
                "write the content's size in bytes, e.g. `size: 1024`",
            );
        }
        let given: Vec<&str> = CONTENT_KEYS
            .iter()
            .copied()
            .filter(|k| entries.has(k))
            .collect();
        if given.len() > 1 {
            let file = self.report.file;
            let first = entries.key_span(given[0]).unwrap_or_default();
            let second = entries.key_span(given[1]).unwrap_or_default();
            self.report.push(
                Diagnostic::new(
                    &r::CONFLICTING_RESOURCE_CONTENT,
                    file,
                    second,
                    format!(
                        "the resource `{uri}` gives its content as {}: a read returns one",
                        given
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                )
                .label("a second content")
                .secondary(file, first, "the first")
                .help(format!(
                    "keep one of {}",
                    given
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
            valid = false;
        }
        let mut content = None;
        if let Some(node) = entries.get("text") {
            content = self.report.text(node, "`text`").map(Content::Text);
        }
        if let Some(node) = entries.get("blob")
            && let Some(encoded) = self.report.text(node, "`blob`")
        {
            match base64::decode(&encoded) {
                Ok(bytes) => content = content.or(Some(Content::Blob(bytes))),
                Err(why) => {
                    let file = self.report.file;
                    self.report.push(
                        Diagnostic::new(
                            &r::INVALID_BLOB,
                            file,
                            node.span,
                            format!("the `blob` of `{uri}` is not base64: {why}"),
                        )
                        .label("not base64")
                        .help(
                            "encode the bytes with the standard alphabet, e.g. `base64 -w0 file`",
                        ),
                    );
                    valid = false;
                }
            }
        }
        if let Some(node) = entries.get("remoteContent")
            && let Some(url) = self.report.text(node, "`remoteContent`")
        {
            content = content.or(Some(Content::Remote(url)));
        }
        valid.then(|| StaticResource {
            uri: uri.to_string(),
            meta,
            content,
            at: Some((self.report.file, key.span)),
        })
    }

    fn template(
        &mut self,
        uri: &str,
        key: &YamlNode,
        value: &YamlNode,
    ) -> Option<(UriTemplate, TemplateDef)> {
        let mut parsed = None;
        if !uri_shape::has_scheme(uri) {
            self.uri_problem(
                &r::URI_WITHOUT_SCHEME,
                key,
                uri,
                uri_shape::scheme_problem(uri),
            );
        } else {
            match uri_shape::check_template(uri) {
                Err(problem) => {
                    self.uri_problem(&r::UNSUPPORTED_TEMPLATE_EXPRESSION, key, uri, problem)
                }
                Ok(t) if !t.has_expressions() => {
                    let file = self.report.file;
                    self.report.push(
                        Diagnostic::new(
                            &r::TEMPLATE_WITHOUT_VARIABLE,
                            file,
                            key.span,
                            format!("the template `{uri}` has no variable, so it stands for one URI"),
                        )
                        .label("no `{variable}`")
                        .help("name the part that varies, e.g. `file:///project/src/{path}`, or move it to `resources`"),
                    );
                }
                Ok(t) => parsed = Some(t),
            }
        }
        let known: Vec<&str> = META_KEYS.iter().chain(CONTENT_KEYS).copied().collect();
        let (meta, entries) = self.meta(uri, key, value, "the template", &known)?;
        let mut valid = entries.get("name").is_some_and(|v| v.scalar().is_some());
        for content_key in CONTENT_KEYS {
            if let Some(span) = entries
                .key_span(content_key)
                .filter(|_| entries.has(content_key))
            {
                let file = self.report.file;
                self.report.push(
                    Diagnostic::new(
                        &r::CONTENT_ON_TEMPLATE,
                        file,
                        span,
                        format!("the template `{uri}` stands for many resources, so it has no `{content_key}`"),
                    )
                    .label("content on a template")
                    .help("remove it: a template's reads go to `pipec serve --backend URL`; fixed content belongs under `resources`"),
                );
                valid = false;
            }
        }
        let template = parsed?;
        valid.then(|| {
            (
                template,
                TemplateDef {
                    uri_template: uri.to_string(),
                    meta,
                    source: TemplateSource::Backend(None),
                    at: Some((self.report.file, key.span)),
                },
            )
        })
    }

    /// Warnings for templates that answer a fixed resource's URI, or a URI another
    /// template answers.
    fn overlaps(&mut self, catalogue: &Catalogue, parsed: &[UriTemplate]) {
        let file = self.report.file;
        let at =
            |a: &Option<(pipec_base::source::FileId, Span)>| a.map(|(_, s)| s).unwrap_or_default();
        let resources: Vec<&str> = catalogue.resources.iter().map(|r| r.uri.as_str()).collect();
        let templates: Vec<&UriTemplate> = parsed.iter().collect();
        for overlap in served_overlaps(&resources, &templates) {
            match overlap {
                ServedOverlap::Resource { template, resource } => {
                    let (def, resource) = (
                        &catalogue.templates[template],
                        &catalogue.resources[resource],
                    );
                    self.report.push(
                        Diagnostic::new(
                            &r::OVERLAPPING_SERVED_URIS,
                            file,
                            at(&def.at),
                            format!("the template `{}` matches the URI of the resource `{}`, which is served instead", def.uri_template, resource.uri),
                        )
                        .label("matches a fixed resource's URI")
                        .secondary(file, at(&resource.at), "this resource")
                        .help("give the template different literal text, so every URI has one entry"),
                    );
                }
                ServedOverlap::Templates {
                    earlier,
                    later,
                    uri,
                } => {
                    let (earlier_def, later_def) =
                        (&catalogue.templates[earlier], &catalogue.templates[later]);
                    self.report.push(
                        Diagnostic::new(
                            &r::OVERLAPPING_SERVED_URIS,
                            file,
                            at(&later_def.at),
                            format!("the templates `{}` and `{}` both match `{uri}`; the first one written serves it", earlier_def.uri_template, later_def.uri_template),
                        )
                        .label("overlaps an earlier template")
                        .secondary(file, at(&earlier_def.at), "which serves the URIs both match")
                        .help("give the templates different literal text, so every URI has one template"),
                    );
                }
            }
        }
    }
}
