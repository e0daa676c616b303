//! P0002 invalid-literal.

crate::declare_rule! {
    /// ## What it catches
    /// A literal that cannot be read: a number with an unknown unit (`12qq`), a negative
    /// size, a fractional duration, an unknown escape (`"\q"`), an unterminated string.
    ///
    /// ## Why it matters
    /// Sizes and durations carry units so that `max_bytes: 5m` cannot mean five bytes; a
    /// literal pipec cannot read would otherwise become a silent default.
    ///
    /// ## Example
    /// ```pipe
    /// input limit: int = 12qq
    /// input note: string = "tab:\q"
    /// ```
    /// Write it as:
    /// ```pipe
    /// input limit: int = 12
    /// input note: string = "tab:\t"
    /// ```
    /// Sizes take `b kb mb gb kib mib gib` (`kb` is 1,000 bytes, `kib` 1,024); durations
    /// take `ms s m h d`.
    pub static INVALID_LITERAL = {
        code: "P0002",
        name: "invalid-literal",
        severity: Error,
        summary: "a number, size, duration or string that cannot be read",
    };
}
