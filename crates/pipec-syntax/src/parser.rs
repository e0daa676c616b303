//! From text to syntax tree: each piece of a file is parsed on its own by the grammar
//! (`grammar.rs`), and a piece that does not parse becomes one syntax error in words.
//!
//! The parser never fails. A file is cut into pieces at top-level declarations (the
//! lexer's `cuts`); each piece is parsed on its own, so a syntax error loses at most the
//! declaration it is in and every error of the file is reported in one run. A large file's
//! pieces are parsed on all available cores.

use super::ast::*;
use super::grammar::{self, Failure};
use super::lexer::{self, Comment, Scan};
use pipec_base::nesting::MAX_NESTING;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::{INVALID_LITERAL, NESTING_TOO_DEEP, SYNTAX_ERROR};

/// The result of parsing one file.
#[derive(Debug)]
pub struct Parsed {
    pub file: File,
    pub comments: Vec<Comment>,
    pub diagnostics: Vec<Diagnostic>,
    /// Declarations that did not parse, as (keyword, name): the checker knows these
    /// names exist, so their uses are not reported as unknown too.
    pub broken: Vec<(String, String)>,
}

/// Parses a whole file. Never fails: what could not be parsed is reported.
pub fn parse(file_id: FileId, text: &str) -> Parsed {
    let Scan {
        comments,
        unterminated,
        cuts,
        too_deep,
    } = lexer::scan(text);

    let mut bounds = Vec::with_capacity(cuts.len() + 2);
    bounds.push(0u32);
    bounds.extend(cuts.iter().copied());
    bounds.push(text.len() as u32);
    let pieces: Vec<(u32, u32)> = bounds
        .windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|(a, b)| a < b)
        .collect();

    let mut slots: Vec<Option<PieceResult>> = pieces
        .iter()
        .map(|(a, b)| {
            // A piece nested past the limit never reaches the grammar, whose recursion
            // follows the brackets.
            let at = too_deep.iter().find(|s| (*a..*b).contains(&s.start))?;
            Some(too_deep_piece(
                file_id,
                &text[*a as usize..*b as usize],
                *at,
            ))
        })
        .collect();
    let todo: Vec<(usize, (u32, u32))> = pieces
        .iter()
        .enumerate()
        .filter(|(i, _)| slots[*i].is_none())
        .map(|(i, p)| (i, *p))
        .collect();
    let todo_bytes: u32 = todo.iter().map(|(_, (a, b))| b - a).sum();
    let one = |(i, (a, b)): &(usize, (u32, u32))| (*i, parse_piece(file_id, text, *a, *b));
    // Asked only of a large file: the answer reads the cgroup's files, seven system
    // calls on every keystroke of the language server otherwise.
    let large = todo.len() > 64 && todo_bytes > 256 * 1024;
    let threads = if large {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        1
    };
    let parsed: Vec<(usize, PieceResult)> = if threads > 1 {
        let chunk = todo.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = todo
                .chunks(chunk)
                .map(|group| scope.spawn(move || group.iter().map(one).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    } else {
        todo.iter().map(one).collect()
    };
    for (i, r) in parsed {
        slots[i] = Some(r);
    }
    let results: Vec<PieceResult> = slots.into_iter().flatten().collect();

    // Sized once: a file of 10,000 declarations grown an item at a time held the last
    // two of fourteen copies at once.
    let mut file = File {
        items: Vec::with_capacity(results.iter().map(|r| r.items.len()).sum()),
        stray_docs: Vec::new(),
    };
    let mut diagnostics = Vec::new();
    let mut broken = Vec::new();
    for (span, raw) in &unterminated {
        let what = if *raw { "raw string" } else { "string" };
        let help = if *raw {
            "close it with a quote followed by the same number of `#`"
        } else {
            "close it with `\"` on the same line; for text over several lines use a raw string `#\"...\"#`"
        };
        diagnostics.push(
            Diagnostic::new(
                &INVALID_LITERAL,
                file_id,
                *span,
                format!("unterminated {what}"),
            )
            .label("this string never ends")
            .help(help),
        );
    }
    for result in results {
        broken.extend(result.broken);
        file.items.extend(result.items);
        file.stray_docs.extend(result.stray_docs);
        for diag in result.diagnostics {
            // A syntax error inside or after an unterminated string repeats what the
            // string error already said.
            let shadowed = diag.rule.code == SYNTAX_ERROR.code
                && diag.primary.as_ref().is_some_and(|p| {
                    unterminated.iter().any(|(s, _)| {
                        s.start <= p.span.start
                            && piece_of(&bounds, s.start) == piece_of(&bounds, p.span.start)
                    })
                });
            if !shadowed {
                diagnostics.push(diag);
            }
        }
    }
    Parsed {
        file,
        comments,
        diagnostics,
        broken,
    }
}

fn piece_of(bounds: &[u32], offset: u32) -> usize {
    bounds.partition_point(|b| *b <= offset)
}

#[derive(Default)]
struct PieceResult {
    items: Vec<Item>,
    stray_docs: Vec<Doc>,
    diagnostics: Vec<Diagnostic>,
    broken: Vec<(String, String)>,
}

fn parse_piece(file: FileId, text: &str, start: u32, end: u32) -> PieceResult {
    match grammar::parse_piece(file, text, start as usize, end as usize) {
        Ok(tree) => PieceResult {
            items: tree.items,
            stray_docs: tree.stray_docs,
            diagnostics: tree.diagnostics,
            broken: Vec::new(),
        },
        Err(failure) => PieceResult {
            items: Vec::new(),
            stray_docs: Vec::new(),
            diagnostics: vec![syntax_error(file, text, &failure)],
            broken: declared_names(&text[start as usize..end as usize]),
        },
    }
}

/// A piece whose brackets nest past [`MAX_NESTING`]: reported, and left out as a
/// piece that does not parse is.
fn too_deep_piece(file: FileId, src: &str, at: Span) -> PieceResult {
    let diagnostic = Diagnostic::new(
        &NESTING_TOO_DEEP,
        file,
        at,
        format!("brackets are nested more than {} deep", MAX_NESTING),
    )
    .label(format!("bracket {} opens here", MAX_NESTING + 1))
    .help("give deep values at run time (`--inputs FILE`), and name the inner parts of deep types");
    PieceResult {
        items: Vec::new(),
        stray_docs: Vec::new(),
        diagnostics: vec![diagnostic],
        broken: declared_names(src),
    }
}

/// The declarations a piece that failed to parse starts, by keyword and name.
fn declared_names(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let mut words = line.split_whitespace();
        let (Some(kw), Some(rest)) = (words.next(), words.next()) else {
            continue;
        };
        let kw = match kw {
            "type" | "enum" => "type",
            "server" | "model" | "tool" | "reader" | "node" | "think" | "agent" | "act"
            | "gate" => "value",
            "input" => "input",
            "link" => "link",
            _ => continue,
        };
        let name: String = if kw == "link" {
            rest.trim_start_matches('"')
                .split('"')
                .next()
                .unwrap_or("")
                .to_string()
        } else {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        if !name.is_empty() && !line.starts_with([' ', '\t']) {
            // A server is also known as one, so that routing does not report the
            // resources it would have served.
            if line.starts_with("server") {
                out.push(("server".to_string(), name.clone()));
            }
            out.push((kw.to_string(), name));
        }
    }
    out
}

// ---------------------------------------------------------------- syntax errors

fn syntax_error(file: FileId, text: &str, failure: &Failure) -> Diagnostic {
    let pos = pipec_base::source::floor_char_boundary(text, failure.at.min(text.len()));
    let mut expected: Vec<String> = failure.expected.iter().map(|e| e.to_string()).collect();
    expected.sort();
    // Literal tokens first: they are the most specific advice.
    expected.sort_by_key(|e| !e.starts_with('`'));
    let found = found_at(text, pos);
    let found_len = if found == "end of file" {
        0
    } else {
        text[pos..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(24)
            .map(char::len_utf8)
            .sum::<usize>()
            .max(text[pos..].chars().next().map_or(0, char::len_utf8))
    };
    let span = Span::new(pos as u32, (pos + found_len) as u32);
    let (message, label) = if expected.is_empty() {
        (
            format!("unexpected {found}"),
            "not expected here".to_string(),
        )
    } else {
        let words = join_or(&expected);
        (
            format!("expected {words}, found {found}"),
            format!("expected {words}"),
        )
    };
    let mut diag = Diagnostic::new(&SYNTAX_ERROR, file, span, message).label(label);
    if let Some(help) = syntax_help(text, pos, &expected) {
        diag = diag.help(help);
    }
    diag
}

fn found_at(src: &str, pos: usize) -> String {
    let rest = &src[pos..];
    match rest.chars().next() {
        None => "end of file".to_string(),
        Some('/') if rest.starts_with("///") => "a doc comment".to_string(),
        Some(c) if c.is_alphanumeric() || c == '_' => {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .take(24)
                .collect();
            format!("`{word}`")
        }
        Some('"') => "a string".to_string(),
        Some(c) => format!("`{c}`"),
    }
}

fn syntax_help(text: &str, at: usize, expected: &[String]) -> Option<String> {
    let rest = text.get(at..).unwrap_or("");
    let wants = |t: &str| expected.iter().any(|e| e == t);
    if rest.starts_with(['+', '*', '/', '%'])
        || (rest.starts_with('-')
            && !rest[1..].starts_with(|c: char| c.is_ascii_digit() || c == '>'))
    {
        return Some(
            "expressions have no arithmetic; compute values in an `exec` or `host` node".into(),
        );
    }
    if rest.starts_with(':') && wants("`=`") {
        return Some(
            "settings in a block are written `name = value`; records use `name: value`".into(),
        );
    }
    if rest.starts_with('=') && wants("`:`") {
        return Some("fields and record entries are written `name: value`".into());
    }
    let setting_like = rest.split_whitespace().nth(1) == Some("=")
        && rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    if wants("`{`") && setting_like {
        return Some(
            "settings belong in the declaration's block: open it with `{` before them".into(),
        );
    }
    if wants("`,`") && wants("`)`") {
        return Some("separate parameters and arguments with commas".into());
    }
    None
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one syntax error of `text`: its message, the text it underlines and its help.
    fn error(text: &str) -> (String, String, Option<String>) {
        let parsed = parse(FileId(0), text);
        let errors: Vec<_> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.rule.code == SYNTAX_ERROR.code)
            .collect();
        assert_eq!(errors.len(), 1, "{text}: {:#?}", parsed.diagnostics);
        let d = errors[0];
        let span = d.primary.as_ref().map(|p| p.span).unwrap_or_default();
        (
            d.message.clone(),
            text[span.start as usize..span.end as usize].to_string(),
            d.help.clone(),
        )
    }

    #[test]
    fn a_syntax_error_says_what_was_looked_for_where_the_text_went_wrong() {
        let cases: &[(&str, &str, &str)] = &[
            // A setting written like a record entry.
            (
                "server crm {\n  command: \"pipec-demo-crm\"\n}\n",
                "expected `=` or `{`, found `:`",
                ":",
            ),
            // Arithmetic, which expressions do not have.
            (
                "node a(x: int = 1) -> int {\n  return = x + 1\n}\n",
                "expected `,`, `}`, a name or an operator, found `+`",
                "+",
            ),
            // A missing `{` before a node's settings.
            (
                "think a(x: string = \"q\") -> string\n  model = m\n",
                "expected `?`, `[]`, `{` or `|`, found `model`",
                "model",
            ),
            // A block left open: what follows is the next declaration.
            (
                "server crm {\n  command = \"x\"\n\ntype T = int\n",
                "expected `,`, `}`, a name or an operator, found `type`",
                "type",
            ),
            // A doc comment where nothing can be documented.
            (
                "node a(x: int = 1) -> int {\n  return /// the value\n = x\n}\n",
                "expected `=` or `{`, found a doc comment",
                "///",
            ),
            // `[*]` must be followed by `.field`.
            (
                "node a(x: json = 1) -> json {\n  return = x[*]\n}\n",
                "expected `.`, found `}`",
                "}",
            ),
            (
                "output o = [1, 2\n",
                "expected `,`, `]`, a value or an operator, found end of file",
                "",
            ),
            ("input x string\n", "expected `:`, found `string`", "string"),
            (
                "tool t(x: int) crm\n",
                "expected `->` or `from`, found `crm`",
                "crm",
            ),
            (
                "serve {\n  reader x {}\n}\n",
                "expected `resource`, `template`, `prompt`, `tool` or `}`, found `reader`",
                "reader",
            ),
            (
                "types T = int\n",
                "expected a declaration, found `types`",
                "types",
            ),
            (
                "node a(x: int = 1, , y: int = 2) -> int {\n  return = x\n}\n",
                "expected `)` or a name, found `,`",
                ",",
            ),
        ];
        for (text, message, underlined) in cases {
            let (got, under, _) = error(text);
            assert_eq!(&got, message, "{text}");
            assert_eq!(&under, underlined, "{text}");
        }
    }

    #[test]
    fn a_syntax_error_gives_help_for_the_usual_slips() {
        let (_, _, help) = error("server crm {\n  command: \"x\"\n}\n");
        assert!(help.is_some_and(|h| h.contains("`name = value`")));
        let (_, _, help) = error("node a(x: int = 1) -> int {\n  return = x + 1\n}\n");
        assert!(help.is_some_and(|h| h.contains("no arithmetic")));
        let (_, _, help) = error("node a(x: int = 1 y: int = 2) -> int {\n  return = x\n}\n");
        assert!(help.is_some_and(|h| h.contains("commas")));
    }

    #[test]
    fn one_broken_declaration_loses_only_itself() {
        let text = "input a: int\n\nnode b(x: int = ) -> int {\n  return = x\n}\n\noutput c = a\n";
        let parsed = parse(FileId(0), text);
        let kinds: Vec<_> = parsed.file.items.iter().map(|i| i.kind.keyword()).collect();
        assert_eq!(kinds, ["input", "output"]);
        assert_eq!(parsed.broken, [("value".to_string(), "b".to_string())]);
        assert_eq!(parsed.diagnostics.len(), 1);
    }

    #[test]
    fn spans_end_at_the_last_token_not_at_the_comments_after_it() {
        let text = "output o = a.b // the answer\n\n/// first\r\n///  second\ninput a: { b: int } // why\n";
        let parsed = parse(FileId(0), text);
        let span_text = |s: Span| &text[s.start as usize..s.end as usize];
        let items = &parsed.file.items;
        assert_eq!(span_text(items[0].span), "output o = a.b");
        assert_eq!(span_text(items[1].span), "input a: { b: int }");
        let doc = items[1].doc.as_ref().expect("documented");
        assert_eq!(doc.text, "first\n second");
        assert_eq!(span_text(doc.span), "/// first\r\n///  second");
    }

    #[test]
    fn operators_fold_by_precedence_and_postfixes_bind_tightest() {
        let text = "output o = !a.b || c && d == e ?? f ?? g\n";
        let parsed = parse(FileId(0), text);
        let ItemKind::Output(out) = &parsed.file.items[0].kind else {
            panic!("{:#?}", parsed.file)
        };
        fn shape(e: &Expr) -> String {
            match &e.kind {
                ExprKind::Binary(op, l, r) => format!("({} {op:?} {})", shape(l), shape(r)),
                ExprKind::Not(x) => format!("!{}", shape(x)),
                ExprKind::Field(x, f) => format!("{}.{}", shape(x), f.name),
                ExprKind::Name(n) => n.name.clone(),
                other => format!("{other:?}"),
            }
        }
        assert_eq!(
            shape(&out.value),
            "(!a.b Or (c And (d Eq (e Coalesce (f Coalesce g)))))"
        );
    }

    #[test]
    fn keywords_are_names_where_no_declaration_starts_and_literals_read_whole() {
        let text = concat!(
            "type T { type: string, from: int, input: bool }\n",
            "output o = { input: input.x, trueish: true, n: -1.5, s: 200kb, raw: ##\"a \"# b\"## }\n",
            "output l = [a [*].b, [1]]\n",
        );
        let parsed = parse(FileId(0), text);
        assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
        let ItemKind::Type(t) = &parsed.file.items[0].kind else {
            panic!()
        };
        let TypeDeclBody::Record(r) = &t.body else {
            panic!()
        };
        let names: Vec<_> = r.fields.iter().map(|f| f.name.name.as_str()).collect();
        assert_eq!(names, ["type", "from", "input"]);
        let ItemKind::Output(o) = &parsed.file.items[1].kind else {
            panic!()
        };
        let ExprKind::Record(entries) = &o.value.kind else {
            panic!()
        };
        assert!(matches!(entries[1].value.kind, ExprKind::Bool(true)));
        assert!(matches!(entries[2].value.kind, ExprKind::Float(v) if v == -1.5));
        assert!(matches!(entries[3].value.kind, ExprKind::Size(..)));
        let ExprKind::Str(raw) = &entries[4].value.kind else {
            panic!()
        };
        assert_eq!(raw.value, "a \"# b");
        let ItemKind::Output(l) = &parsed.file.items[2].kind else {
            panic!()
        };
        let ExprKind::List(items) = &l.value.kind else {
            panic!()
        };
        // `a [*].b` is one splat; `[1]` after it is the list's next item.
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0].kind, ExprKind::Splat(..)));
    }
}
