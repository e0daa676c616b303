//! P0811 wrong-spec-value-type.

crate::declare_rule! {
    /// ## What it catches
    /// A key of a Resources file whose value is not of the kind it takes: a list where a
    /// text goes (`name: [a, b]`), a text where a list goes (`icons: logo.png`), a
    /// `priority` or `size` that is not a number, an `audience` other than `user` or
    /// `assistant`, a `lastModified` that is not an ISO 8601 time, a mapping key that is
    /// not a text. (A `serve` block reports the same values as P0203.)
    ///
    /// ## Why it matters
    /// reShapr refuses such a file; serving it anyway would mean guessing what was meant.
    ///
    /// ## Example
    /// ```yaml
    ///     icons:
    ///       src: file:///assets/icons/md-file-icon.png
    /// ```
    /// `icons` is a list; write it as:
    /// ```yaml
    ///     icons:
    ///       - src: file:///assets/icons/md-file-icon.png
    /// ```
    pub static WRONG_SPEC_VALUE_TYPE = {
        code: "P0811",
        name: "wrong-spec-value-type",
        severity: Error,
        summary: "a Resources file key whose value is of the wrong type",
    };
}
