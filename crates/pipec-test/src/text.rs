//! How reports show things: line diffs of two texts (whole, or the changes with some
//! context), a stored error with its code.

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

/// The lines that differ, with two of context around them; a long line cut around 400
/// characters. A diff that takes too long is cut short (it is for reading).
pub(crate) fn changes(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_millis(100))
        .diff_lines(old, new);
    let mut out = String::new();
    for group in diff.grouped_ops(2) {
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Delete => "-",
                    similar::ChangeTag::Insert => "+",
                    similar::ChangeTag::Equal => " ",
                };
                out.push_str(sign);
                out.push_str(&shortened(change.value().trim_end_matches('\n')));
                out.push('\n');
            }
        }
        out.push_str("  ...\n");
    }
    out.trim_end().to_string()
}

/// A line cut to 400 characters.
fn shortened(line: &str) -> String {
    const MAX: usize = 400;
    if line.chars().count() <= MAX {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX).collect();
    format!("{cut}…")
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
