//! P0507 unbounded-fan-out.

crate::declare_rule! {
    /// ## What it catches
    /// An `each` over a list that a tool, a model or a set of links produces, with no `max:`
    /// bounding it here or upstream.
    ///
    /// ## Why it matters
    /// Something pipec does not control decides how long the list is, and every item is a run
    /// of the node, with its own model calls and fetches. `each(x, max: n)` fails the node on a
    /// longer list instead of running it a thousand times.
    ///
    /// ## Example
    /// ```pipe
    /// think expand(subject: string = each(research.recent_email_subjects)) -> Brief {
    ///   model = fast
    ///   prompt = "Expand on {{ subject }}."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think expand(subject: string = each(research.recent_email_subjects, max: 20)) -> Brief {
    ///   model = fast
    ///   prompt = "Expand on {{ subject }}."
    /// }
    /// ```
    pub static UNBOUNDED_FAN_OUT = {
        code: "P0507",
        name: "unbounded-fan-out",
        severity: Warning,
        summary: "an each over a list of unbounded length",
    };
}
