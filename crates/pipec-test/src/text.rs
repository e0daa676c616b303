//! How reports show things: a line diff of two texts, a stored error with its code.

/// Every line of `old` and `new`, those only in `old` marked `-`, those only in `new`
/// marked `+`.
pub(crate) fn line_diff(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::new();
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => "-",
            similar::ChangeTag::Insert => "+",
            similar::ChangeTag::Equal => " ",
        };
        out.push_str(sign);
        out.push_str(change.value().trim_end_matches('\n'));
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// `CODE in `node`: message`.
pub(crate) fn coded(e: &pipec_store::StoredError) -> String {
    format!(
        "{} {}{}",
        e.code,
        e.node
            .as_ref()
            .map_or(String::new(), |n| format!("in `{n}`: ")),
        e.message
    )
}
