//! P0809 priority-out-of-range.

crate::declare_rule! {
    /// ## What it catches
    /// An `annotations.priority` below 0 or above 1.
    ///
    /// ## Why it matters
    /// MCP defines the priority as a number from 0 (entirely optional) to 1 (effectively
    /// required); a client may refuse a listing with another value, or clamp it and rank the
    /// resource otherwise than meant.
    ///
    /// ## Example
    /// ```yaml
    ///     annotations:
    ///       priority: 8
    /// ```
    /// Write it as `priority: 0.8`.
    pub static PRIORITY_OUT_OF_RANGE = {
        code: "P0809",
        name: "priority-out-of-range",
        severity: Error,
        summary: "an annotations priority outside 0 to 1",
    };
}
