//! P0604 effect-in-node.

crate::declare_rule! {
    /// ## What it catches
    /// A `node` whose `call` names a tool that is not read-only. A tool is `read_only = false`
    /// unless it says otherwise.
    ///
    /// ## Why it matters
    /// A `node` is deterministic and may run again on resume. Effects belong in an `act`, which
    /// journals the call and never silently repeats a non-idempotent one.
    ///
    /// ## Example
    /// ```pipe
    /// tool add_note(deal_id: string, text: string) -> Note from crm
    ///
    /// node note(deal_id: string = input.deal_id) -> Note {
    ///   call = add_note(deal_id: deal_id, text: "researched")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// tool add_note(deal_id: string, text: string) -> Note from crm
    ///
    /// act note(deal_id: string = input.deal_id) -> Note {
    ///   call = add_note(deal_id: deal_id, text: "researched")
    /// }
    /// ```
    /// If the tool only reads, declare it `read_only = true` instead.
    pub static EFFECT_IN_NODE = {
        code: "P0604",
        name: "effect-in-node",
        severity: Error,
        summary: "a node that calls a tool that may cause effects",
    };
}
