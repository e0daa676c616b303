//! P0807 content-on-template.

crate::declare_rule! {
    /// ## What it catches
    /// An entry of `resourceTemplates` with `text`, `blob` or `remoteContent`.
    ///
    /// ## Why it matters
    /// A template stands for many resources, so one content cannot be all of theirs: its
    /// reads are passed to the backend (`pipec serve --backend URL`), addressed by the URI's
    /// variables. Content written on it would never be served.
    ///
    /// ## Example
    /// ```yaml
    /// resourceTemplates:
    ///   'file:///project/src/{path}?mode=raw':
    ///     name: Project Source File
    ///     text: fn main() {}
    /// ```
    /// Remove `text`; give a fixed resource its content under `resources` instead.
    pub static CONTENT_ON_TEMPLATE = {
        code: "P0807",
        name: "content-on-template",
        severity: Error,
        summary: "a resource template with text, blob or remoteContent",
    };
}
