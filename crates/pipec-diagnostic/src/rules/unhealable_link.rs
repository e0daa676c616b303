//! P0307 unhealable-link.

crate::declare_rule! {
    /// ## What it catches
    /// A node that reads a link (`resource(ref: ...)`, `resources(ref: ...)`) after waiting for a
    /// gate, where the link was produced before the gate by a tool that is not idempotent.
    ///
    /// ## Why it matters
    /// A gate can pause a run for days, and links may expire in the meantime (signed URLs,
    /// temporary exports). pipec heals a dead link by repeating the call that produced it, but
    /// only for an idempotent tool (`read_only` implies `idempotent`). Otherwise the read fails
    /// with R0102 resource-expired and the run cannot go on.
    ///
    /// ## Example
    /// ```pipe
    /// tool export_emails(deal_id: string) -> Export from crm {
    ///   links = ["email-history"] // neither read-only nor idempotent
    /// }
    ///
    /// act export(deal_id: string = input.deal_id) -> Export {
    ///   call = export_emails(deal_id: deal_id)
    /// }
    ///
    /// gate review(export: Export = export) -> Approval {
    ///   message = "Brief the team on {{ export.deal_id }}?"
    /// }
    ///
    /// think consume(
    ///   ack: Approval = review,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   when = ack.approved
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as, when repeating the export is safe:
    /// ```pipe
    /// tool export_emails(deal_id: string) -> Export from crm {
    ///   idempotent = true
    ///   links = ["email-history"]
    /// }
    /// ```
    /// When it is not, read the history in a node before the gate, so that no link has to
    /// outlive the pause.
    pub static UNHEALABLE_LINK = {
        code: "P0307",
        name: "unhealable-link",
        severity: Warning,
        summary: "a link read after a gate from a tool that cannot safely be called again",
    };
}
