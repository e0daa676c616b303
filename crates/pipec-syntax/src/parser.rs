//! From text to syntax tree: pest parses each piece of a file, this module turns the
//! pairs into the AST and pest's errors into diagnostics in words.
//!
//! The parser never fails. A file is cut into pieces at top-level declarations (the
//! lexer's `cuts`); each piece is parsed on its own, so a syntax error loses at most the
//! declaration it is in and every error of the file is reported in one run. Pieces are
//! parsed on all available cores.

use std::sync::Mutex;

use pest::Parser as _;
use pest::iterators::{Pair, Pairs};

use super::ast::*;
use super::lexer::{self, Comment, Scan};
use super::literal::{self, Number};
use pipec_base::nesting::MAX_NESTING;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::{INVALID_LITERAL, NESTING_TOO_DEEP, SYNTAX_ERROR};

#[derive(pest_derive::Parser)]
#[grammar = "grammar/pipe.pest"]
struct PipeParser;

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
    // Pieces kept one by one for reuse are parsed one by one.
    let run = if super::reuse::enabled() { 1 } else { RUN };
    parse_in_runs(file_id, text, run)
}

/// [`parse`], with runs of at most `run` pieces parsed together.
fn parse_in_runs(file_id: FileId, text: &str, run: usize) -> Parsed {
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

    let comment_spans: Vec<(u32, u32)> = comments
        .iter()
        .map(|c| (c.span.start, c.span.end))
        .collect();
    let comment_spans = &comment_spans;
    // Pieces unchanged since the last parse of this file (when reuse is on) are taken
    // from it; the others are parsed, in parallel when there are many.
    let reuse = super::reuse::enabled();
    let last = if reuse {
        super::reuse::take(file_id)
    } else {
        std::collections::HashMap::new()
    };
    let mut slots: Vec<Option<PieceResult>> = pieces
        .iter()
        .map(|(a, b)| {
            // A piece nested past the limit never reaches pest, whose recursion follows
            // the brackets.
            if let Some(at) = too_deep.iter().find(|s| (*a..*b).contains(&s.start)) {
                return Some(too_deep_piece(
                    file_id,
                    &text[*a as usize..*b as usize],
                    *at,
                ));
            }
            let old = last.get(&text[*a as usize..*b as usize])?;
            let (items, stray_docs) = super::reuse::moved(old, *a);
            Some(PieceResult {
                items,
                stray_docs,
                ..PieceResult::default()
            })
        })
        .collect();
    let todo: Vec<(usize, (u32, u32))> = pieces
        .iter()
        .enumerate()
        .filter(|(i, _)| slots[*i].is_none())
        .map(|(i, p)| (i, *p))
        .collect();
    let todo_bytes: u32 = todo.iter().map(|(_, (a, b))| b - a).sum();
    // Runs of pieces next to one another are parsed together (see `parse_run`).
    let runs = runs_of(&todo, run);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parsed: Vec<(usize, PieceResult)> =
        if threads > 1 && todo.len() > 64 && todo_bytes > 64 * 1024 {
            let chunk = runs.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = runs
                    .chunks(chunk)
                    .map(|group| {
                        scope.spawn(move || {
                            group
                                .iter()
                                .flat_map(|run| parse_run(file_id, text, comment_spans, run))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        } else {
            runs.iter()
                .flat_map(|run| parse_run(file_id, text, comment_spans, run))
                .collect()
        };
    for (i, r) in parsed {
        slots[i] = Some(r);
    }
    let results: Vec<PieceResult> = slots.into_iter().flatten().collect();
    if reuse && results.len() == pieces.len() {
        let mut keep = std::collections::HashMap::new();
        for ((a, b), r) in pieces.iter().zip(&results) {
            if r.diagnostics.is_empty() && r.broken.is_empty() {
                keep.insert(
                    text[*a as usize..*b as usize].to_string(),
                    super::reuse::CleanPiece {
                        base: *a,
                        items: r.items.clone(),
                        stray_docs: r.stray_docs.clone(),
                    },
                );
            }
        }
        super::reuse::keep(file_id, keep);
    }

    let mut file = File {
        items: Vec::new(),
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

/// How many pieces next to one another are parsed in one go.
const RUN: usize = 32;

/// The pieces to parse, in runs of at most `max` that follow one another in the file.
fn runs_of(todo: &[(usize, (u32, u32))], max: usize) -> Vec<&[(usize, (u32, u32))]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for k in 1..=todo.len() {
        let ends = k == todo.len()
            || k - start == max
            || todo[k].0 != todo[k - 1].0 + 1
            || todo[k].1.0 != todo[k - 1].1.1;
        if ends {
            runs.push(&todo[start..k]);
            start = k;
        }
    }
    runs
}

/// Parses a run of pieces that follow one another: in one go when the run parses (one
/// parser state and one walk for all of them, its declarations kept by the run's first
/// piece), else piece by piece, so that a syntax error is found and told exactly as it
/// is for a piece on its own.
fn parse_run(
    file: FileId,
    text: &str,
    comments: &[(u32, u32)],
    run: &[(usize, (u32, u32))],
) -> Vec<(usize, PieceResult)> {
    let one = |(i, (a, b)): &(usize, (u32, u32))| (*i, parse_piece(file, text, comments, *a, *b));
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return Vec::new();
    };
    if run.len() == 1 {
        return vec![one(first)];
    }
    let (start, end) = (first.1.0, last.1.1);
    let together = PipeParser::parse(Rule::piece, &text[start as usize..end as usize])
        .ok()
        .map(|pairs| built(file, text, comments, start, pairs))
        .filter(|r| within_pieces(r, run));
    match together {
        Some(result) => {
            let mut all = vec![(first.0, result)];
            all.extend(run[1..].iter().map(|(i, _)| (*i, PieceResult::default())));
            all
        }
        None => run.iter().map(one).collect(),
    }
}

/// Whether every declaration (with its doc comment) and stray doc comment of a run's
/// parse lies within one piece: then each piece alone parses to the same. A doc comment
/// left at the end of a piece would otherwise document the next piece's declaration, and
/// a declaration keyword at the start of a line inside a bracket (where the file is cut)
/// would hide the two syntax errors its pieces make alone.
fn within_pieces(result: &PieceResult, run: &[(usize, (u32, u32))]) -> bool {
    let inside = |span: Span| {
        let k = run.partition_point(|(_, (a, _))| *a <= span.start);
        k > 0 && span.end <= run[k - 1].1.1
    };
    result
        .items
        .iter()
        .all(|i| inside(i.doc.as_ref().map_or(i.span, |d| d.span.to(i.span))))
        && result.stray_docs.iter().all(|d| inside(d.span))
}

/// The tree of a piece (or a run of pieces) that parsed from `start`.
fn built(
    file: FileId,
    text: &str,
    comments: &[(u32, u32)],
    start: u32,
    pairs: Pairs<'_, Rule>,
) -> PieceResult {
    let mut b = Builder {
        file,
        base: start,
        text,
        comments,
        diagnostics: Vec::new(),
        nesting: 0,
        too_deep: false,
    };
    let (items, stray_docs) = b.piece(pairs);
    PieceResult {
        items,
        stray_docs,
        diagnostics: b.diagnostics,
        broken: Vec::new(),
    }
}

/// Serialises the detailed re-parse of failing pieces: pest's switch for detailed errors
/// is process-wide.
static DETAIL: Mutex<()> = Mutex::new(());

fn parse_piece(
    file: FileId,
    text: &str,
    comments: &[(u32, u32)],
    start: u32,
    end: u32,
) -> PieceResult {
    let src = &text[start as usize..end as usize];
    match PipeParser::parse(Rule::piece, src) {
        Ok(pairs) => built(file, text, comments, start, pairs),
        Err(_) => {
            let detailed = {
                let _guard = DETAIL.lock().unwrap_or_else(|e| e.into_inner());
                pest::set_error_detail(true);
                let r = PipeParser::parse(Rule::piece, src);
                pest::set_error_detail(false);
                r
            };
            let diagnostics = match detailed {
                Err(err) => vec![syntax_diagnostic(file, text, start, src, &err)],
                Ok(_) => Vec::new(),
            };
            PieceResult {
                items: Vec::new(),
                stray_docs: Vec::new(),
                diagnostics,
                broken: declared_names(src),
            }
        }
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

fn syntax_diagnostic(
    file: FileId,
    text: &str,
    base: u32,
    src: &str,
    err: &pest::error::Error<Rule>,
) -> Diagnostic {
    let mut pos = match err.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((p, _)) => p,
    };
    let mut expected: Vec<String> = Vec::new();
    let attempts = err.parse_attempts();
    // pest places the error where the last *rule* failed; the detailed attempts know
    // the furthest *token* it tried, which is where the text actually goes wrong.
    let deeper = attempts.as_ref().filter(|a| a.max_position > pos);
    if let Some(a) = deeper {
        pos = a.max_position;
    } else if let pest::error::ErrorVariant::ParsingError { positives, .. } = &err.variant {
        for rule in positives {
            if let Some(words) = describe_rule(*rule) {
                expected.push(words.to_string());
            }
        }
    }
    if let Some(attempts) = &attempts {
        for token in attempts.expected_tokens() {
            // The token type is not exported by pest; only exact strings are useful
            // here (not character ranges or built-in rules).
            if format!("{token:?}").starts_with("Sensitive") {
                let token = token.to_string();
                let token = token.trim();
                if !token.is_empty() && !token.starts_with("//") && token != "_" {
                    expected.push(format!("`{token}`"));
                }
            }
        }
    }
    let pos = pipec_base::source::floor_char_boundary(src, pos.min(src.len()));
    simplify_expected(&mut expected);

    let found = found_at(src, pos);
    let found_len = if found == "end of file" {
        0
    } else {
        src[pos..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(24)
            .map(char::len_utf8)
            .sum::<usize>()
            .max(src[pos..].chars().next().map_or(0, char::len_utf8))
    };
    let start = base + pos as u32;
    let span = Span::new(start, start + found_len as u32);
    let message = if expected.is_empty() {
        format!("unexpected {found}")
    } else {
        format!("expected {}, found {found}", join_or(&expected))
    };
    let mut diag =
        Diagnostic::new(&SYNTAX_ERROR, file, span, message).label(if expected.is_empty() {
            "not expected here".to_string()
        } else {
            format!("expected {}", join_or(&expected))
        });
    if let Some(help) = syntax_help(text, start as usize, &expected) {
        diag = diag.help(help);
    }
    diag
}

/// Makes the list of expected things short enough to read: operators become "an
/// operator", and what could only continue an expression is dropped beside them.
fn simplify_expected(expected: &mut Vec<String>) {
    const OPERATORS: &[&str] = &[
        "`!=`", "`&&`", "`<=`", "`<`", "`==`", "`>=`", "`>`", "`??`", "`||`",
    ];
    const CONTINUATIONS: &[&str] = &["`(`", "`.`", "`[*]`", "`[`"];
    // In a type, `<` opens `ref<T>`/`map<T>`; it is not worth suggesting there.
    if expected.iter().any(|e| e == "`[]`") {
        expected.retain(|e| !matches!(e.as_str(), "`<`" | "`>`" | "`[`" | "`.`"));
    }
    let has_operator = expected
        .iter()
        .any(|e| OPERATORS.contains(&e.as_str()) || e == "an operator");
    if has_operator {
        expected
            .retain(|e| !OPERATORS.contains(&e.as_str()) && !CONTINUATIONS.contains(&e.as_str()));
        expected.push("an operator".into());
    }
    if expected.len() > 1 {
        expected.retain(|e| e != "a doc comment");
    }
    let has = |t: &str| expected.iter().any(|e| e == t);
    let (brace, paren) = (has("`{`"), has("`(`"));
    expected.retain(|e| {
        !(brace && (e == "a block `{ ... }`" || e == "a record `{ ... }`"))
            && !(paren && e == "a parameter list `(...)`")
    });
    expected.sort();
    expected.dedup();
    // Literal tokens first: they are the most specific advice.
    expected.sort_by_key(|e| !e.starts_with('`'));
}

fn found_at(src: &str, pos: usize) -> String {
    let rest = &src[pos..];
    match rest.chars().next() {
        None => "end of file".to_string(),
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

fn describe_rule(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::ident | Rule::arg_name => "a name",
        Rule::doc => "a doc comment",
        Rule::number => "a number",
        Rule::string | Rule::string_body => "a string",
        Rule::raw_string | Rule::raw_open | Rule::raw_body | Rule::raw_close => "a raw string",
        Rule::true_lit | Rule::false_lit => "a boolean",
        Rule::null_lit => "`null`",
        Rule::import_decl
        | Rule::type_decl
        | Rule::enum_decl
        | Rule::input_decl
        | Rule::output_decl
        | Rule::server_decl
        | Rule::model_decl
        | Rule::link_decl
        | Rule::tool_decl
        | Rule::reader_decl
        | Rule::node_decl
        | Rule::serve_decl
        | Rule::test_decl
        | Rule::kw_import
        | Rule::kw_type
        | Rule::kw_enum
        | Rule::kw_input
        | Rule::kw_output
        | Rule::kw_server
        | Rule::kw_model
        | Rule::kw_link
        | Rule::kw_tool
        | Rule::kw_reader
        | Rule::kw_serve
        | Rule::node_kind => "a declaration",
        Rule::EOI => "a declaration",
        Rule::kw_as | Rule::wire_name => "`as`",
        Rule::kw_from => "`from`",
        Rule::kw_resource
        | Rule::kw_template
        | Rule::kw_prompt
        | Rule::serve_entry
        | Rule::serve_prompt => "`resource`, `template` or `prompt`",
        Rule::alias_body => "`=`",
        Rule::variant => "an enum variant",
        Rule::params => "a parameter list `(...)`",
        Rule::param => "a parameter",
        Rule::returns => "`->`",
        Rule::block => "a block `{ ... }`",
        Rule::setting => "a setting",
        Rule::type_expr
        | Rule::type_term
        | Rule::paren_type
        | Rule::generic_type
        | Rule::type_name
        | Rule::record_type => "a type",
        Rule::field => "a field",
        Rule::list_mark => "`[]`",
        Rule::optional_mark => "`?`",
        Rule::expr | Rule::paren_expr => "a value",
        Rule::not_op => "`!`",
        Rule::coalesce_op
        | Rule::or_op
        | Rule::and_op
        | Rule::eq_op
        | Rule::ne_op
        | Rule::le_op
        | Rule::ge_op
        | Rule::lt_op
        | Rule::gt_op => "an operator",
        Rule::field_access => "`.`",
        Rule::splat_access => "`[*]`",
        Rule::call_args => "`(`",
        Rule::arg => "an argument",
        Rule::record_lit | Rule::record_entry => "a record `{ ... }`",
        Rule::list_lit => "a list `[...]`",
        _ => return None,
    })
}

// ---------------------------------------------------------------- building the tree

struct Builder<'t> {
    file: FileId,
    base: u32,
    /// The whole file, and the (start, end) of its comments, for tight spans.
    text: &'t str,
    comments: &'t [(u32, u32)],
    diagnostics: Vec<Diagnostic>,
    /// How many expressions (or types) the builder is inside; 0 between them.
    nesting: usize,
    /// Whether the expression (or type) being built nests past the limit: its inner
    /// part was replaced by an error, and the outermost one is reported and replaced.
    too_deep: bool,
}

impl Builder<'_> {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span::new(self.base + s.start() as u32, self.base + s.end() as u32)
    }

    /// The span of a rule up to its last token. pest includes the whitespace and
    /// comments skipped before an optional part that did not match; labels must not
    /// underline them.
    fn tight_span(&self, pair: &Pair<'_, Rule>) -> Span {
        let full = self.span(pair);
        let bytes = self.text.as_bytes();
        let mut end = full.end as usize;
        loop {
            while end > full.start as usize && bytes[end - 1].is_ascii_whitespace() {
                end -= 1;
            }
            match self.comments.binary_search_by_key(&(end as u32), |c| c.1) {
                Ok(i) if self.comments[i].0 >= full.start => end = self.comments[i].0 as usize,
                _ => break,
            }
        }
        Span::new(full.start, end as u32)
    }

    fn ident(&self, pair: Pair<'_, Rule>) -> Ident {
        Ident {
            name: pair.as_str().to_string(),
            span: self.span(&pair),
        }
    }

    fn piece(&mut self, mut pairs: Pairs<'_, Rule>) -> (Vec<Item>, Vec<Doc>) {
        let mut items = Vec::new();
        let mut stray = Vec::new();
        let Some(piece) = pairs.next() else {
            return (items, stray);
        };
        let mut docs: Vec<Pair<'_, Rule>> = Vec::new();
        for pair in piece.into_inner() {
            match pair.as_rule() {
                Rule::doc => docs.push(pair),
                Rule::EOI => {}
                _ => {
                    let doc = self.take_doc(&mut docs);
                    if let Some(item) = self.item(pair, doc) {
                        items.push(item);
                    }
                }
            }
        }
        if let Some(doc) = self.take_doc(&mut docs) {
            stray.push(doc);
        }
        (items, stray)
    }

    fn take_doc(&self, docs: &mut Vec<Pair<'_, Rule>>) -> Option<Doc> {
        if docs.is_empty() {
            return None;
        }
        let mut text = String::new();
        let first = self.span(&docs[0]);
        let mut last = first;
        for (i, d) in docs.drain(..).enumerate() {
            if i > 0 {
                text.push('\n');
            }
            let body = d.as_str().trim_start_matches('/');
            let body = body.strip_suffix('\r').unwrap_or(body);
            text.push_str(body.strip_prefix(' ').unwrap_or(body));
            last = self.span(&d);
        }
        Some(Doc {
            text,
            span: first.to(last),
        })
    }

    fn item(&mut self, pair: Pair<'_, Rule>, doc: Option<Doc>) -> Option<Item> {
        let span = self.tight_span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner();
        let kind = match rule {
            Rule::import_decl => {
                inner.next(); // kw
                let path = self.string(inner.next()?);
                let alias = inner
                    .find(|p| p.as_rule() == Rule::ident)
                    .map(|p| self.ident(p));
                ItemKind::Import(Import { path, alias })
            }
            Rule::type_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let body = inner.next()?;
                let body = match body.as_rule() {
                    Rule::record_type => TypeDeclBody::Record(self.record_type(body)),
                    _ => TypeDeclBody::Alias(self.type_expr(body.into_inner().next()?)),
                };
                ItemKind::Type(TypeDecl { name, body })
            }
            Rule::enum_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let mut variants = Vec::new();
                let mut docs = Vec::new();
                for p in inner {
                    match p.as_rule() {
                        Rule::doc => docs.push(p),
                        Rule::variant => {
                            let doc = self.take_doc(&mut docs);
                            let span = self.span(&p);
                            let v = p.into_inner().next()?;
                            let (name, quoted) = match v.as_rule() {
                                Rule::string => (self.string(v).value, true),
                                _ => (v.as_str().to_string(), false),
                            };
                            variants.push(Variant {
                                doc,
                                name,
                                quoted,
                                span,
                            });
                        }
                        _ => {}
                    }
                }
                let stray_docs = self.take_doc(&mut docs).into_iter().collect();
                ItemKind::Enum(EnumDecl {
                    name,
                    variants,
                    stray_docs,
                })
            }
            Rule::input_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let ty = self.type_expr(inner.next()?);
                let default = inner.next().map(|p| self.expr(p));
                ItemKind::Input(InputDecl { name, ty, default })
            }
            Rule::output_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let mut ty = None;
                let mut value = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::type_expr => ty = Some(self.type_expr(p)),
                        Rule::expr => value = Some(self.expr(p)),
                        _ => {}
                    }
                }
                ItemKind::Output(OutputDecl {
                    name,
                    ty,
                    value: value?,
                })
            }
            Rule::server_decl | Rule::model_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let body = self.block(inner.next()?);
                let decl = BlockDecl { name, body };
                if rule == Rule::server_decl {
                    ItemKind::Server(decl)
                } else {
                    ItemKind::Model(decl)
                }
            }
            Rule::test_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let body = self.block(inner.next()?);
                ItemKind::Test(BlockDecl { name, body })
            }
            Rule::link_decl => {
                inner.next();
                let kind = self.string(inner.next()?);
                let ty = self.type_expr(inner.next()?);
                let template = self.string(inner.next()?);
                ItemKind::Link(LinkDecl { kind, ty, template })
            }
            Rule::tool_decl | Rule::reader_decl => {
                inner.next();
                let name = self.ident(inner.next()?);
                let params = self.params(inner.next()?);
                let mut returns = None;
                let mut server = None;
                let mut body = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::returns => {
                            returns = p.into_inner().next().map(|t| self.type_expr(t));
                        }
                        Rule::ident => server = Some(self.ident(p)),
                        Rule::block => body = Some(self.block(p)),
                        _ => {}
                    }
                }
                let decl = ToolDecl {
                    name,
                    params,
                    returns,
                    server: server?,
                    body,
                };
                if rule == Rule::tool_decl {
                    ItemKind::Tool(decl)
                } else {
                    ItemKind::Reader(decl)
                }
            }
            Rule::node_decl => {
                let kw = inner.next()?;
                let kind = NodeKind::from_keyword(kw.as_str())?;
                let kind_span = self.span(&kw);
                let name = self.ident(inner.next()?);
                let params = self.params(inner.next()?);
                let mut returns = None;
                let mut body = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::returns => {
                            returns = p.into_inner().next().map(|t| self.type_expr(t));
                        }
                        Rule::block => body = Some(self.block(p)),
                        _ => {}
                    }
                }
                ItemKind::Node(NodeDecl {
                    kind,
                    kind_span,
                    name,
                    params,
                    returns,
                    body: body?,
                })
            }
            Rule::serve_decl => {
                let mut entries = Vec::new();
                let mut prompts = Vec::new();
                let mut tools = Vec::new();
                let mut docs = Vec::new();
                for p in inner {
                    match p.as_rule() {
                        Rule::doc => docs.push(p),
                        Rule::serve_entry => {
                            let doc = self.take_doc(&mut docs);
                            let span = self.tight_span(&p);
                            let mut e = p.into_inner();
                            let kw = e.next()?;
                            let kind = if kw.as_rule() == Rule::kw_resource {
                                ServeEntryKind::Resource
                            } else {
                                ServeEntryKind::Template
                            };
                            let uri = self.string(e.next()?);
                            let body = self.block(e.next()?);
                            entries.push(ServeEntry {
                                doc,
                                kind,
                                uri,
                                body,
                                span,
                            });
                        }
                        Rule::serve_tool => {
                            let doc = self.take_doc(&mut docs);
                            let span = self.tight_span(&p);
                            let mut e = p.into_inner();
                            let keyword = self.span(&e.next()?);
                            let body = self.block(e.next()?);
                            tools.push(ServeTool {
                                doc,
                                keyword,
                                body,
                                span,
                            });
                        }
                        Rule::serve_prompt => {
                            let doc = self.take_doc(&mut docs);
                            let span = self.tight_span(&p);
                            let mut e = p.into_inner();
                            let _kw = e.next()?;
                            let name = self.ident(e.next()?);
                            let params = self.params(e.next()?);
                            let body = self.block(e.next()?);
                            prompts.push(ServePrompt {
                                doc,
                                name,
                                params,
                                body,
                                span,
                            });
                        }
                        _ => {}
                    }
                }
                let stray_docs = self.take_doc(&mut docs).into_iter().collect();
                ItemKind::Serve(ServeDecl {
                    entries,
                    prompts,
                    tools,
                    stray_docs,
                })
            }
            _ => return None,
        };
        Some(Item { doc, kind, span })
    }

    fn params(&mut self, pair: Pair<'_, Rule>) -> Params {
        let span = self.span(&pair);
        let mut params = Vec::new();
        let mut docs = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::doc => docs.push(p),
                Rule::param => {
                    let doc = self.take_doc(&mut docs);
                    if let Some(param) = self.param(p, doc) {
                        params.push(param);
                    }
                }
                _ => {}
            }
        }
        Params {
            params,
            stray_docs: self.take_doc(&mut docs).into_iter().collect(),
            span,
        }
    }

    fn param(&mut self, pair: Pair<'_, Rule>, doc: Option<Doc>) -> Option<Param> {
        let span = self.tight_span(&pair);
        let mut inner = pair.into_inner();
        let name = self.ident(inner.next()?);
        let ty = self.type_expr(inner.next()?);
        let mut wire_name = None;
        let mut value = None;
        for p in inner {
            match p.as_rule() {
                Rule::wire_name => {
                    wire_name = p
                        .into_inner()
                        .find(|x| x.as_rule() == Rule::string)
                        .map(|s| self.string(s));
                }
                Rule::expr => value = Some(self.expr(p)),
                _ => {}
            }
        }
        Some(Param {
            doc,
            name,
            ty,
            wire_name,
            value,
            span,
        })
    }

    fn block(&mut self, pair: Pair<'_, Rule>) -> Block {
        let span = self.span(&pair);
        let mut settings = Vec::new();
        let mut docs = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::doc => docs.push(p),
                Rule::setting => {
                    let doc = self.take_doc(&mut docs);
                    let span = self.tight_span(&p);
                    let mut inner = p.into_inner();
                    let Some(name) = inner.next().map(|n| self.ident(n)) else {
                        continue;
                    };
                    let value = match inner.next() {
                        Some(v) if v.as_rule() == Rule::block => SettingValue::Block(self.block(v)),
                        Some(v) => SettingValue::Expr(self.expr(v)),
                        None => continue,
                    };
                    settings.push(Setting {
                        doc,
                        name,
                        value,
                        span,
                    });
                }
                _ => {}
            }
        }
        Block {
            settings,
            stray_docs: self.take_doc(&mut docs).into_iter().collect(),
            span,
        }
    }

    fn record_type(&mut self, pair: Pair<'_, Rule>) -> RecordType {
        let span = self.span(&pair);
        let mut fields = Vec::new();
        let mut docs = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::doc => docs.push(p),
                Rule::field => {
                    let doc = self.take_doc(&mut docs);
                    let span = self.tight_span(&p);
                    let mut inner = p.into_inner();
                    let (Some(name), Some(ty)) = (inner.next(), inner.next()) else {
                        continue;
                    };
                    fields.push(Field {
                        doc,
                        name: self.ident(name),
                        ty: self.type_expr(ty),
                        span,
                    });
                }
                _ => {}
            }
        }
        RecordType {
            fields,
            stray_docs: self.take_doc(&mut docs).into_iter().collect(),
            span,
        }
    }

    fn type_expr(&mut self, pair: Pair<'_, Rule>) -> TypeExpr {
        self.nesting += 1;
        let ty = self.type_expr_inner(pair);
        self.nesting -= 1;
        self.outermost_type(ty)
    }

    fn type_expr_inner(&mut self, pair: Pair<'_, Rule>) -> TypeExpr {
        let span = self.tight_span(&pair);
        let mut terms = Vec::new();
        let mut optional = false;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::type_term => terms.push(self.type_term(p)),
                Rule::optional_mark => optional = true,
                _ => {}
            }
        }
        let base = if terms.len() == 1 {
            terms.pop().unwrap_or_else(|| error_type(span))
        } else if terms.is_empty() {
            error_type(span)
        } else {
            let s = terms[0].span.to(terms[terms.len() - 1].span);
            self.bounded_type(TypeExpr {
                kind: TypeExprKind::Union(terms),
                span: s,
            })
        };
        if optional {
            self.bounded_type(TypeExpr {
                kind: TypeExprKind::Optional(Box::new(base)),
                span,
            })
        } else {
            base
        }
    }

    fn type_term(&mut self, pair: Pair<'_, Rule>) -> TypeExpr {
        let mut inner = pair.into_inner();
        let Some(atom) = inner.next() else {
            return error_type(Span::default());
        };
        let mut ty = self.type_atom(atom);
        for mark in inner {
            let end = self.span(&mark).end;
            ty = self.bounded_type(TypeExpr {
                span: Span::new(ty.span.start, end),
                kind: TypeExprKind::List(Box::new(ty)),
            });
        }
        ty
    }

    fn type_atom(&mut self, pair: Pair<'_, Rule>) -> TypeExpr {
        let span = self.tight_span(&pair);
        let kind = match pair.as_rule() {
            Rule::paren_type => match pair.into_inner().next() {
                Some(t) => TypeExprKind::Paren(Box::new(self.type_expr(t))),
                None => return error_type(span),
            },
            Rule::record_type => TypeExprKind::Record(self.record_type(pair)),
            Rule::string => TypeExprKind::Literal(self.string(pair)),
            Rule::generic_type => {
                let mut inner = pair.into_inner();
                match (inner.next(), inner.next()) {
                    (Some(name), Some(arg)) => {
                        TypeExprKind::Generic(self.ident(name), Box::new(self.type_expr(arg)))
                    }
                    _ => return error_type(span),
                }
            }
            _ => TypeExprKind::Name(pair.into_inner().map(|p| self.ident(p)).collect()),
        };
        self.bounded_type(TypeExpr { kind, span })
    }

    fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        self.nesting += 1;
        let e = self.fold(pair);
        self.nesting -= 1;
        self.outermost_expr(e)
    }

    /// Folds the flat operator sequence pest gives (`unary (infix unary)*`) by operator
    /// precedence, with explicit stacks rather than recursion, so that a long chain of
    /// operators cannot overflow the stack before its depth is measured. Postfix
    /// operators bind tightest, then `!`, then `??` (right-associative), the comparisons,
    /// `&&` and `||` (all left-associative).
    fn fold(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let whole = self.span(&pair);
        let mut operands: Vec<Expr> = Vec::new();
        let mut operators: Vec<BinOp> = Vec::new();
        let mut nots: Vec<Span> = Vec::new();
        let mut current: Option<Expr> = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::not_op => nots.push(self.span(&p)),
                Rule::field_access | Rule::splat_access | Rule::call_args => {
                    if let Some(lhs) = current.take() {
                        let e = self.postfix(lhs, p);
                        current = Some(self.bounded_expr(e));
                    }
                }
                rule => match binary_operator(rule) {
                    Some(op) => {
                        let operand = self.unary(current.take(), &mut nots, whole);
                        operands.push(operand);
                        while operators.last().is_some_and(|top| {
                            precedence(*top) > precedence(op)
                                || (precedence(*top) == precedence(op) && op != BinOp::Coalesce)
                        }) {
                            self.reduce(&mut operands, &mut operators);
                        }
                        operators.push(op);
                    }
                    None => current = Some(self.primary(p)),
                },
            }
        }
        let last = self.unary(current.take(), &mut nots, whole);
        operands.push(last);
        while !operators.is_empty() {
            self.reduce(&mut operands, &mut operators);
        }
        operands.pop().unwrap_or(Expr {
            kind: ExprKind::Error,
            span: whole,
        })
    }

    /// An operand with the `!`s written before it.
    fn unary(&mut self, operand: Option<Expr>, nots: &mut Vec<Span>, whole: Span) -> Expr {
        let mut e = operand.unwrap_or(Expr {
            kind: ExprKind::Error,
            span: whole,
        });
        while let Some(not) = nots.pop() {
            e = self.bounded_expr(Expr {
                span: not.to(e.span),
                kind: ExprKind::Not(Box::new(e)),
            });
        }
        e
    }

    /// Applies the operator on top of the stack to the two operands on top of theirs.
    fn reduce(&mut self, operands: &mut Vec<Expr>, operators: &mut Vec<BinOp>) {
        let (Some(op), Some(rhs), Some(lhs)) = (operators.pop(), operands.pop(), operands.pop())
        else {
            return;
        };
        let e = self.bounded_expr(Expr {
            span: lhs.span.to(rhs.span),
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        });
        operands.push(e);
    }

    /// An expression nested past the limit becomes an error; the outermost expression
    /// around it is reported (see [`Builder::outermost_expr`]).
    fn bounded_expr(&mut self, e: Expr) -> Expr {
        if expr_depth(&e) > MAX_NESTING {
            self.too_deep = true;
            Expr {
                kind: ExprKind::Error,
                span: e.span,
            }
        } else {
            e
        }
    }

    fn bounded_type(&mut self, t: TypeExpr) -> TypeExpr {
        if type_depth(&t) > MAX_NESTING {
            self.too_deep = true;
            error_type(t.span)
        } else {
            t
        }
    }

    /// Reports an outermost expression that nests past the limit, once, and replaces it
    /// by an error so that nothing after the parser sees part of it.
    fn outermost_expr(&mut self, e: Expr) -> Expr {
        if self.nesting > 0 || !std::mem::take(&mut self.too_deep) {
            return e;
        }
        self.report_too_deep(
            e.span,
            "expression",
            "compute the inner part in a node of its own, or give the value at run time",
        );
        Expr {
            kind: ExprKind::Error,
            span: e.span,
        }
    }

    fn outermost_type(&mut self, t: TypeExpr) -> TypeExpr {
        if self.nesting > 0 || !std::mem::take(&mut self.too_deep) {
            return t;
        }
        self.report_too_deep(
            t.span,
            "type",
            "give the inner part a name: `type Inner = ...`",
        );
        error_type(t.span)
    }

    fn report_too_deep(&mut self, span: Span, what: &str, help: &str) {
        self.diagnostics.push(
            Diagnostic::new(
                &NESTING_TOO_DEEP,
                self.file,
                span,
                format!("this {what} nests more than {} levels deep", MAX_NESTING),
            )
            .label(format!("more than {} levels", MAX_NESTING))
            .help(help),
        );
    }

    fn postfix(&mut self, lhs: Expr, op: Pair<'_, Rule>) -> Expr {
        let span = lhs.span.to(self.span(&op));
        let kind = match op.as_rule() {
            Rule::field_access => match op.into_inner().next() {
                Some(id) => ExprKind::Field(Box::new(lhs), self.ident(id)),
                None => ExprKind::Error,
            },
            Rule::splat_access => match op.into_inner().next() {
                Some(id) => ExprKind::Splat(Box::new(lhs), self.ident(id)),
                None => ExprKind::Error,
            },
            _ => {
                let mut args = Vec::new();
                for arg in op.into_inner() {
                    let arg_span = self.tight_span(&arg);
                    let mut name = None;
                    let mut value = None;
                    for p in arg.into_inner() {
                        match p.as_rule() {
                            Rule::arg_name => name = p.into_inner().next().map(|i| self.ident(i)),
                            Rule::expr => value = Some(self.expr(p)),
                            _ => {}
                        }
                    }
                    if let Some(value) = value {
                        args.push(Arg {
                            name,
                            value,
                            span: arg_span,
                        });
                    }
                }
                ExprKind::Call(Box::new(lhs), args)
            }
        };
        Expr { kind, span }
    }

    fn primary(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.tight_span(&pair);
        let kind = match pair.as_rule() {
            Rule::string | Rule::raw_string => ExprKind::Str(self.string(pair)),
            Rule::number => self.number(pair.as_str(), span),
            Rule::true_lit => ExprKind::Bool(true),
            Rule::false_lit => ExprKind::Bool(false),
            Rule::null_lit => ExprKind::Null,
            Rule::ident => ExprKind::Name(self.ident(pair)),
            Rule::paren_expr => match pair.into_inner().next() {
                Some(e) => ExprKind::Paren(Box::new(self.expr(e))),
                None => ExprKind::Error,
            },
            Rule::list_lit => ExprKind::List(pair.into_inner().map(|e| self.expr(e)).collect()),
            Rule::record_lit => {
                let mut entries = Vec::new();
                for entry in pair.into_inner() {
                    let espan = self.tight_span(&entry);
                    let mut inner = entry.into_inner();
                    let (Some(key), Some(value)) = (inner.next(), inner.next()) else {
                        continue;
                    };
                    let (key, quoted) = if key.as_rule() == Rule::string {
                        let s = self.string(key);
                        (
                            Ident {
                                name: s.value,
                                span: s.span,
                            },
                            true,
                        )
                    } else {
                        (self.ident(key), false)
                    };
                    entries.push(RecordEntry {
                        key,
                        quoted,
                        value: self.expr(value),
                        span: espan,
                    });
                }
                ExprKind::Record(entries)
            }
            _ => ExprKind::Error,
        };
        self.bounded_expr(Expr { kind, span })
    }

    fn number(&mut self, text: &str, span: Span) -> ExprKind {
        match literal::decode_number(text) {
            Ok(Number::Int(v)) => ExprKind::Int(v),
            Ok(Number::Float(v)) => ExprKind::Float(v),
            Ok(Number::Size(v)) => ExprKind::Size(v, text.to_string()),
            Ok(Number::Duration(v)) => ExprKind::Duration(v, text.to_string()),
            Err(message) => {
                self.diagnostics.push(
                    Diagnostic::new(&INVALID_LITERAL, self.file, span, message)
                        .label("not a valid number"),
                );
                ExprKind::Error
            }
        }
    }

    /// Decodes a `string` or `raw_string` pair.
    fn string(&mut self, pair: Pair<'_, Rule>) -> StrLit {
        let span = self.span(&pair);
        match pair.as_rule() {
            Rule::raw_string => {
                let mut hashes = 0;
                let mut body = "";
                let mut body_start = span.start;
                for p in pair.into_inner() {
                    match p.as_rule() {
                        Rule::raw_open => hashes = p.as_str().len().saturating_sub(1),
                        Rule::raw_body => {
                            body = p.as_str();
                            body_start = self.span(&p).start;
                        }
                        _ => {}
                    }
                }
                let decoded = literal::dedent_raw(body);
                StrLit {
                    value: decoded.value,
                    span,
                    raw_hashes: Some(hashes),
                    map: decoded
                        .map
                        .into_iter()
                        .map(|(v, s)| (v, s + body_start))
                        .collect(),
                }
            }
            _ => {
                let body_pair = pair.into_inner().next();
                let body = body_pair.as_ref().map_or("", |p| p.as_str());
                let body_start = span.start + 1;
                match literal::decode_string(body) {
                    Ok(decoded) => StrLit {
                        value: decoded.value,
                        span,
                        raw_hashes: None,
                        map: decoded
                            .map
                            .into_iter()
                            .map(|(v, s)| (v, s + body_start))
                            .collect(),
                    },
                    Err(bad) => {
                        self.diagnostics.push(
                            Diagnostic::new(
                                &INVALID_LITERAL,
                                self.file,
                                Span::new(
                                    body_start + bad.start as u32,
                                    body_start + bad.end as u32,
                                ),
                                bad.message,
                            )
                            .label("bad escape"),
                        );
                        StrLit {
                            value: body.to_string(),
                            span,
                            raw_hashes: None,
                            map: vec![(0, body_start)],
                        }
                    }
                }
            }
        }
    }
}

fn binary_operator(rule: Rule) -> Option<BinOp> {
    Some(match rule {
        Rule::coalesce_op => BinOp::Coalesce,
        Rule::or_op => BinOp::Or,
        Rule::and_op => BinOp::And,
        Rule::eq_op => BinOp::Eq,
        Rule::ne_op => BinOp::Ne,
        Rule::lt_op => BinOp::Lt,
        Rule::le_op => BinOp::Le,
        Rule::gt_op => BinOp::Gt,
        Rule::ge_op => BinOp::Ge,
        _ => return None,
    })
}

/// How tightly a binary operator binds: `||`, then `&&`, the comparisons, then `??`.
fn precedence(op: BinOp) -> u8 {
    match op {
        BinOp::Or => 1,
        BinOp::And => 2,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
        BinOp::Coalesce => 4,
    }
}

/// The levels of an expression: 0 for a literal or a name, one more for each bracket and
/// operator around it. The builder never makes one deeper than [`MAX_NESTING`] + 1,
/// so this recursion is bounded.
fn expr_depth(e: &Expr) -> usize {
    let below =
        |children: &mut dyn Iterator<Item = &Expr>| 1 + children.map(expr_depth).max().unwrap_or(0);
    match &e.kind {
        ExprKind::Field(of, _)
        | ExprKind::Splat(of, _)
        | ExprKind::Not(of)
        | ExprKind::Paren(of) => 1 + expr_depth(of),
        ExprKind::Call(callee, args) => {
            below(&mut std::iter::once(&**callee).chain(args.iter().map(|a| &a.value)))
        }
        ExprKind::Record(entries) => below(&mut entries.iter().map(|en| &en.value)),
        ExprKind::List(items) => below(&mut items.iter()),
        ExprKind::Binary(_, l, r) => 1 + expr_depth(l).max(expr_depth(r)),
        ExprKind::Str(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Size(..)
        | ExprKind::Duration(..)
        | ExprKind::Bool(_)
        | ExprKind::Null
        | ExprKind::Name(_)
        | ExprKind::Error => 0,
    }
}

/// The levels of a type, counted and bounded as [`expr_depth`]'s are.
fn type_depth(t: &TypeExpr) -> usize {
    match &t.kind {
        TypeExprKind::Generic(_, of)
        | TypeExprKind::List(of)
        | TypeExprKind::Optional(of)
        | TypeExprKind::Paren(of) => 1 + type_depth(of),
        TypeExprKind::Record(r) => {
            1 + r
                .fields
                .iter()
                .map(|f| type_depth(&f.ty))
                .max()
                .unwrap_or(0)
        }
        TypeExprKind::Union(terms) => 1 + terms.iter().map(type_depth).max().unwrap_or(0),
        TypeExprKind::Name(_) | TypeExprKind::Literal(_) => 0,
    }
}

fn error_type(span: Span) -> TypeExpr {
    TypeExpr {
        kind: TypeExprKind::Name(vec![Ident {
            name: "json".into(),
            span,
        }]),
        span,
    }
}

#[cfg(test)]
mod runs_tests {
    // Pieces parsed in runs parse to exactly what they parse to one by one: the same
    // declarations, doc comments, diagnostics and broken names, for every `.pipe` file of
    // the repository and for the cases where a run could differ.

    use super::{RUN, parse_in_runs};
    use pipec_base::source::FileId;

    /// Everything a parse gives, as text (a diagnostic has no equality of its own).
    fn parsed(text: &str, run: usize) -> String {
        let p = parse_in_runs(FileId(0), text, run);
        format!(
            "{:#?}\n{:#?}\n{:#?}\n{:#?}",
            p.file, p.comments, p.diagnostics, p.broken
        )
    }

    fn same_in_runs(name: &str, text: &str) {
        let alone = parsed(text, 1);
        for run in [2, 3, RUN] {
            assert_eq!(
                parsed(text, run),
                alone,
                "`{name}` parses differently in runs of {run}"
            );
        }
    }

    fn pipe_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            if path.is_dir() && name != "target" && name != ".git" && name != "node_modules" {
                pipe_files(&path, out);
            } else if path.extension().is_some_and(|x| x == "pipe") {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_pipe_file_of_the_repository_parses_the_same_in_runs() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        pipe_files(&root, &mut files);
        assert!(files.len() > 50, "found {} .pipe files", files.len());
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            same_in_runs(&f.display().to_string(), &text);
        }
    }

    #[test]
    fn a_doc_comment_left_at_the_end_of_a_piece_stays_stray() {
        // The blank line keeps the doc comment out of `b`'s piece: alone, `a`'s piece ends
        // with it, unattached; in one run it would document `b`.
        let text = "input x: int\n\nnode a(x: int = input.x) -> int {\n  return = x\n}\n/// left behind\n\nnode b(p: int = a) -> int {\n  return = p\n}\n\noutput b = b\n";
        let alone = parse_in_runs(FileId(0), text, 1);
        assert_eq!(alone.file.stray_docs.len(), 1, "{:#?}", alone.file);
        same_in_runs("stray doc", text);
    }

    #[test]
    fn a_declaration_keyword_at_the_start_of_a_line_inside_brackets_parses_as_alone() {
        // A line that starts like a declaration inside a bracket or a raw string: where the
        // file is cut there, a run must not join what the pieces make of it alone.
        let texts = [
            "node a(x: int = 1) -> { v: int } {\n  return = {\nv: x }\n}\n\nnode b(p: int = 2) -> int {\n  return = p\n}\n",
            "think a(x: string = \"q\") -> string {\n  model = m\n  prompt = #\"\nnode b is not a node\ninput y: int\n\"#\n}\n\nnode c(p: int = 2) -> int {\n  return = p\n}\n",
            "node a(x: int = 1) -> {\ninput: string\n} {\n  return = { input: \"x\" }\n}\n\nnode b(p: int = 2) -> int {\n  return = p\n}\n",
            "type T {\n  a: int\ntype b: int\n}\n\nnode n(p: int = 2) -> int {\n  return = p\n}\n",
        ];
        for (k, text) in texts.iter().enumerate() {
            same_in_runs(&format!("case {k}"), text);
        }
    }

    #[test]
    fn errors_and_bad_literals_amid_a_run_are_told_as_alone() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!(
                "node n{i}(p: int = {i}) -> int {{\n  return = p\n}}\n\n"
            ));
            if i == 7 {
                text.push_str("node broken(p: int = ) -> int {\n  return = p\n}\n\n");
            }
            if i == 20 {
                text.push_str("node odd(p: int = 12qq) -> int {\n  return = p\n}\n\n");
            }
            if i == 30 {
                text.push_str(
                    "/// a doc\nnode documented(p: int = 1) -> int {\n  return = p\n}\n\n",
                );
            }
        }
        let alone = parse_in_runs(FileId(0), &text, 1);
        assert_eq!(alone.diagnostics.len(), 2, "{:#?}", alone.diagnostics);
        same_in_runs("errors amid a run", &text);
    }
}
