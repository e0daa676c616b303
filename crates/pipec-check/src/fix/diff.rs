//! Unified diffs of what fixes would change (`pipec check --diff`), in the format `patch`
//! and `git apply` read: `--- a/NAME`, `+++ b/NAME`, hunks with three lines of context.

/// The lines of context around each change.
const CONTEXT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Line<'a> {
    Same(&'a str),
    Gone(&'a str),
    Added(&'a str),
}

/// A unified diff from `before` to `after`, both shown as `name`; empty when they are
/// equal.
pub fn unified(name: &str, before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    let a: Vec<&str> = before.split_inclusive('\n').collect();
    let b: Vec<&str> = after.split_inclusive('\n').collect();
    let lines = line_diff(&a, &b);
    let mut out = format!("--- a/{name}\n+++ b/{name}\n");
    // Positions (0-based) in `a` and `b` of each entry.
    let mut pos = Vec::with_capacity(lines.len());
    let (mut i, mut j) = (0usize, 0usize);
    for l in &lines {
        pos.push((i, j));
        match l {
            Line::Same(_) => {
                i += 1;
                j += 1;
            }
            Line::Gone(_) => i += 1,
            Line::Added(_) => j += 1,
        }
    }
    let changed: Vec<usize> = (0..lines.len())
        .filter(|k| !matches!(lines[*k], Line::Same(_)))
        .collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(lines.len());
        let hunk = &lines[start..end];
        let a_len = hunk.iter().filter(|l| !matches!(l, Line::Added(_))).count();
        let b_len = hunk.iter().filter(|l| !matches!(l, Line::Gone(_))).count();
        let (a_at, b_at) = pos[start];
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a_at, a_len),
            range(b_at, b_len)
        ));
        for l in hunk {
            let (mark, text) = match l {
                Line::Same(t) => (' ', t),
                Line::Gone(t) => ('-', t),
                Line::Added(t) => ('+', t),
            };
            out.push(mark);
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    out
}

/// `start,len` as a hunk header writes it (1-based; an empty range names the line before).
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

/// The lines of `a` and `b` aligned by a longest common subsequence, after the common
/// beginning and end are set aside (fixes change a few lines of a file, so what is left
/// in the middle is small).
fn line_diff<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut out: Vec<Line> = a[..head].iter().map(|l| Line::Same(l)).collect();
    // lcs[i][j]: the longest common subsequence of ma[i..] and mb[j..].
    let w = mb.len() + 1;
    let mut lcs = vec![0u32; (ma.len() + 1) * w];
    for i in (0..ma.len()).rev() {
        for j in (0..mb.len()).rev() {
            lcs[i * w + j] = if ma[i] == mb[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < ma.len() || j < mb.len() {
        if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
            out.push(Line::Same(ma[i]));
            i += 1;
            j += 1;
        } else if i < ma.len() && (j == mb.len() || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            // Removals before additions, as diff(1) shows a changed line.
            out.push(Line::Gone(ma[i]));
            i += 1;
        } else {
            out.push(Line::Added(mb[j]));
            j += 1;
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| Line::Same(l)));
    out
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn one_changed_line_with_context() {
        let before = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let after = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            unified("x.pipe", before, after),
            "--- a/x.pipe\n+++ b/x.pipe\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
    }

    #[test]
    fn a_removed_line_and_far_apart_changes() {
        let before: String = (1..=20).map(|n| format!("{n}\n")).collect();
        let after = before
            .replacen("2\n", "", 1)
            .replacen("19\n", "nineteen\n", 1);
        let d = unified("f", &before, &after);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,4 @@\n 1\n-2\n 3\n"), "{d}");
        assert!(d.contains("-19\n+nineteen\n"), "{d}");
        assert_eq!(unified("f", "same\n", "same\n"), "");
    }

    #[test]
    fn a_last_line_without_newline_is_marked() {
        let d = unified("f", "a\nb", "a\nc");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
    }
}
