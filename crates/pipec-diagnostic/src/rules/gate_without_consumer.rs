//! P0504 gate-without-consumer.

crate::declare_rule! {
    /// ## What it catches
    /// A gate whose answer no parameter reads and no output prints. `after = [gate]` waits for
    /// the answer but ignores it, so it does not count as reading it.
    ///
    /// ## Why it matters
    /// The run pauses for a person whose answer changes nothing: what follows runs whether they
    /// approve or not. Usually a parameter bound to the gate and a `when` on its answer are
    /// missing.
    ///
    /// ## Example
    /// ```pipe
    /// gate review(summary: DealSummary = research) -> Approval {
    ///   message = "Approve the research on {{ summary.deal_id }}?"
    /// }
    ///
    /// think consume(summary: DealSummary = research) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// gate review(summary: DealSummary = research) -> Approval {
    ///   message = "Approve the research on {{ summary.deal_id }}?"
    /// }
    ///
    /// think consume(
    ///   ack: Approval = review,
    ///   summary: DealSummary = research,
    /// ) -> Brief {
    ///   when = ack.approved
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    pub static GATE_WITHOUT_CONSUMER = {
        code: "P0504",
        name: "gate-without-consumer",
        severity: Warning,
        summary: "a gate whose answer nothing reads",
    };
}
