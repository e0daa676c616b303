//! P0103 unknown-setting.

crate::declare_rule! {
    /// ## What it catches
    /// A setting that the block does not take: `tools` on a `think`, `max_steps` on a `node`,
    /// `limits` on an `agent`, a misspelt `promt`, or an unknown key in a `server`, `model`,
    /// `tool` or `reader` block. The help names the closest setting the block does take.
    ///
    /// ## Why it matters
    /// An ignored setting is a silent bug: `max_step = 3` would leave an agent running the
    /// default 10 turns. Settings also say what a node is: a `think` is one model call, so
    /// tools belong to an `agent` (or an `act`, if they cause effects).
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Every node kind takes `when`, `timeout`, `retries`, `backoff` and `after`.
    pub static UNKNOWN_SETTING = {
        code: "P0103",
        name: "unknown-setting",
        severity: Error,
        summary: "a setting the block does not take",
    };
}
