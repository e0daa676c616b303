//! `pipec fmt`: the canonical printer of `.pipe` files.
//!
//! The printer walks the syntax tree in source order and prints it in the house layout:
//!
//! - two-space indentation, no trailing blanks, one newline at the end of the file, no
//!   column alignment (so a one-line edit stays a one-line diff);
//! - one blank line between top-level declarations, except that a run of one-line
//!   declarations of the same kind (`link`s, `input`s, `import`s, aliases) written without
//!   blank lines between them stays together; inside blocks, a run of blank lines between
//!   entries becomes one, and none is kept after `{` or before `}`; `//!` file docs are
//!   followed by a blank line;
//! - record types, enums, blocks of settings and `serve` entries one entry per line,
//!   without commas; empty ones as `{}`;
//! - parameter lists on the header line when the whole line fits in 100 columns and
//!   no parameter carries a doc or a comment, else one per line with trailing commas;
//! - records, lists and argument lists on one line when they fit and hold no comment, else
//!   one entry per line with trailing commas, breaking the outermost first;
//! - regular strings re-escaped; raw strings and numbers exactly as written; parentheses
//!   kept where they were written;
//! - a file with `\r\n` line ends keeps them.
//!
//! `//` comments are not in the tree: they come from the lexer pre-pass and are woven
//! back in by position. Before an element starting at offset X is printed, every comment
//! not yet printed that starts before X is printed on its own line; after an element, a
//! comment on the same source line is kept at the end of its printed line. A comment in
//! a place where no line can start (between the tokens of a header or an operator) ends
//! the printed line there, and the rest continues on the next line. So no comment is
//! ever dropped, and printing the result again gives the same text.

use super::ast::*;
use super::lexer::{Comment, CommentKind};
use super::parser::Parsed;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::SYNTAX_ERROR;

/// Lines longer than this are broken where the layout allows.
const WIDTH: usize = 100;

/// Formats a `.pipe` file. Returns `Err` with the parse diagnostics when the file has syntax errors (a broken file is never rewritten).
pub fn format_source(text: &str) -> Result<String, Vec<Diagnostic>> {
    let parsed = super::parse(FileId(0), text);
    if parsed.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(parsed.diagnostics);
    }
    // A safety net: text that no declaration, doc or comment accounts for would be lost
    // by printing the tree, so such a file is not rewritten.
    if let Some(span) = uncovered(text, &parsed) {
        return Err(vec![
            Diagnostic::new(
                &SYNTAX_ERROR,
                FileId(0),
                span,
                "`pipec fmt` cannot place this text",
            )
            .label("not part of any declaration"),
        ]);
    }
    let mut printer = Printer::new(text, &parsed.comments);
    printer.file(&parsed.file);
    Ok(printer.finish())
}

/// The first non-blank text outside every declaration, doc and comment, if any.
fn uncovered(text: &str, parsed: &Parsed) -> Option<Span> {
    let mut spans: Vec<Span> = parsed.comments.iter().map(|c| c.span).collect();
    for item in &parsed.file.items {
        spans.push(item.span);
        if let Some(doc) = &item.doc {
            spans.push(doc.span);
        }
    }
    spans.extend(parsed.file.stray_docs.iter().map(|d| d.span));
    spans.sort_by_key(|s| s.start);
    let gap = |from: usize, to: usize| -> Option<Span> {
        let slice = text.get(from..to)?;
        let off = slice.find(|c: char| !c.is_whitespace())?;
        Some(Span::new((from + off) as u32, to as u32))
    };
    let mut pos = 0usize;
    for span in spans {
        let start = span.start as usize;
        if start > pos
            && let Some(found) = gap(pos, start)
        {
            return Some(found);
        }
        pos = pos.max(span.end as usize);
    }
    gap(pos, text.len())
}

/// One entry of a bracketed list: a block, a record type, an enum, a serve block, a
/// parameter list, or a record, list or argument list that does not fit on one line.
#[derive(Clone, Copy)]
enum Entry<'a> {
    Setting(&'a Setting),
    Field(&'a Field),
    Variant(&'a Variant),
    Serve(&'a ServeEntry),
    Prompt(&'a ServePrompt),
    Tool(&'a ServeTool),
    Param(&'a Param),
    Key(&'a RecordEntry),
    Elem(&'a Expr),
    Arg(&'a Arg),
    /// A `///` run that documents nothing, kept where it was.
    Stray(&'a Doc),
}

impl<'a> Entry<'a> {
    fn span(self) -> Span {
        match self {
            Entry::Setting(s) => s.span,
            Entry::Field(f) => f.span,
            Entry::Variant(v) => v.span,
            Entry::Serve(s) => s.span,
            Entry::Prompt(p) => p.span,
            Entry::Tool(t) => t.span,
            Entry::Param(p) => p.span,
            Entry::Key(r) => r.span,
            Entry::Elem(e) => e.span,
            Entry::Arg(a) => a.span,
            Entry::Stray(d) => d.span,
        }
    }

    fn doc(self) -> Option<&'a Doc> {
        match self {
            Entry::Setting(s) => s.doc.as_ref(),
            Entry::Field(f) => f.doc.as_ref(),
            Entry::Variant(v) => v.doc.as_ref(),
            Entry::Serve(s) => s.doc.as_ref(),
            Entry::Prompt(p) => p.doc.as_ref(),
            Entry::Tool(t) => t.doc.as_ref(),
            Entry::Param(p) => p.doc.as_ref(),
            _ => None,
        }
    }
}

/// A bracketed list to print: its brackets, where they are in the source, and whether
/// each entry takes a comma.
struct List<'a> {
    open: char,
    close: char,
    /// Offset of the opening bracket.
    open_pos: u32,
    /// Offset of the closing bracket.
    close_pos: u32,
    entries: Vec<Entry<'a>>,
    commas: bool,
}

fn block_entries(block: &Block) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = block.settings.iter().map(Entry::Setting).collect();
    entries.extend(block.stray_docs.iter().map(Entry::Stray));
    entries
}

/// A regular string literal for `value`, escaped (shared with what `tools pull` writes).
pub use pipec_base::identifiers::escape;

fn doc_line(text: &str) -> String {
    let text = text.trim_end();
    if text.is_empty() {
        "///".to_string()
    } else {
        format!("/// {text}")
    }
}

struct Printer<'a> {
    text: &'a str,
    /// Every comment of the file (docs included), in source order.
    all: &'a [Comment],
    /// The `//` and `//!` comments, in source order; `next` is the first not yet printed.
    queue: Vec<&'a Comment>,
    next: usize,
    out: String,
    indent: usize,
    /// Source offset of the end of what was printed last, to see blank lines in the
    /// source between it and what comes next.
    last_end: u32,
    /// Whether the next line may be preceded by a blank line kept from the source.
    allow_blank: bool,
    /// Whether the last line printed was a `//!` comment.
    after_file_doc: bool,
}

impl<'a> Printer<'a> {
    fn new(text: &'a str, comments: &'a [Comment]) -> Printer<'a> {
        Printer {
            text,
            all: comments,
            queue: comments
                .iter()
                .filter(|c| c.kind != CommentKind::Doc)
                .collect(),
            next: 0,
            out: String::with_capacity(text.len() + text.len() / 8),
            indent: 0,
            last_end: 0,
            allow_blank: false,
            after_file_doc: false,
        }
    }

    fn finish(mut self) -> String {
        // Whatever was not printed yet (nothing, normally) goes at the end.
        self.allow_blank = true;
        self.flush_before(u32::MAX);
        let len = self.out.trim_end().len();
        self.out.truncate(len);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        // A file written with `\r\n` line ends keeps them.
        let crlf = self
            .text
            .find('\n')
            .is_some_and(|i| i > 0 && self.text.as_bytes().get(i - 1) == Some(&b'\r'));
        if crlf {
            let mut out = String::with_capacity(self.out.len() + self.out.len() / 16);
            let mut prev = '\0';
            for c in self.out.chars() {
                if c == '\n' && prev != '\r' {
                    out.push('\r');
                }
                out.push(c);
                prev = c;
            }
            return out;
        }
        self.out
    }

    // ------------------------------------------------------------ source

    fn slice(&self, span: Span) -> &'a str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    }

    fn newlines(&self, from: u32, to: u32) -> usize {
        if from >= to {
            return 0;
        }
        self.text
            .get(from as usize..to as usize)
            .map_or(0, |s| s.matches('\n').count())
    }

    /// The offset of the first token at or after `pos` (skipping blanks and comments).
    fn skip_trivia(&self, pos: u32) -> u32 {
        let bytes = self.text.as_bytes();
        let mut i = pos as usize;
        loop {
            while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
                i += 1;
            }
            if bytes.get(i) == Some(&b'/') && bytes.get(i + 1) == Some(&b'/') {
                while bytes.get(i).is_some_and(|b| *b != b'\n') {
                    i += 1;
                }
            } else {
                break;
            }
        }
        i as u32
    }

    /// The offset of the bracket `ch` that is the next token after `pos`, else `pos`.
    fn find_open(&self, pos: u32, ch: u8) -> u32 {
        let i = self.skip_trivia(pos);
        if self.text.as_bytes().get(i as usize) == Some(&ch) {
            i
        } else {
            pos
        }
    }

    // ------------------------------------------------------------ comments

    fn peek(&self) -> Option<&'a Comment> {
        self.queue.get(self.next).copied()
    }

    fn peek_before(&self, pos: u32) -> Option<&'a Comment> {
        self.peek().filter(|c| c.span.start < pos)
    }

    fn comment_text(&self, c: &Comment) -> &'a str {
        self.slice(c.span).trim_end()
    }

    /// Whether a `//` comment starts inside `start..end` (a comment that only trails
    /// the range does not count).
    fn has_comment(&self, start: u32, end: u32) -> bool {
        self.has_comment_raw(start, self.tight_end(start, end))
    }

    /// Whether a `//` comment starts inside `start..end`, trailing or not.
    fn has_comment_raw(&self, start: u32, end: u32) -> bool {
        let i = self.queue.partition_point(|c| c.span.start < start);
        self.queue.get(i).is_some_and(|c| c.span.start < end)
    }

    /// The end of `start..end` without the blanks and comments that trail it. The
    /// parser's spans end at the last token, except in files with `\r\n` line ends,
    /// where a trailing comment can remain inside them.
    fn tight_end(&self, start: u32, end: u32) -> u32 {
        let bytes = self.text.as_bytes();
        let mut end = end;
        loop {
            while end > start
                && bytes
                    .get(end as usize - 1)
                    .is_some_and(|b| b.is_ascii_whitespace())
            {
                end -= 1;
            }
            let i = self.queue.partition_point(|c| c.span.start < end);
            let last = i.checked_sub(1).and_then(|i| self.queue.get(i));
            match last {
                Some(c)
                    if c.span.start >= start
                        && c.span
                            .start
                            .saturating_add(self.slice(c.span).trim_end().len() as u32)
                            == end =>
                {
                    end = c.span.start;
                }
                _ => return end,
            }
        }
    }

    /// Prints, each on its own line, the comments that start before `pos`.
    fn flush_before(&mut self, pos: u32) {
        while let Some(c) = self.peek_before(pos) {
            self.next += 1;
            let file_doc = c.kind == CommentKind::FileDoc;
            self.before_line(c.span.start, file_doc);
            self.begin_line();
            let text = self.comment_text(c);
            self.push(text);
            self.end_line();
            self.last_end = c.span.end;
            self.allow_blank = true;
            self.after_file_doc = file_doc;
        }
    }

    /// Prints the comments that start before `pos` in the middle of a line: each ends
    /// the line, and the line goes on one level deeper.
    fn inline_before(&mut self, pos: u32) {
        while let Some(c) = self.peek_before(pos) {
            self.next += 1;
            let text = format!(" {}", self.comment_text(c));
            self.push(&text);
            self.end_line();
            self.out.push_str(&"  ".repeat(self.indent + 1));
            self.last_end = c.span.end;
        }
    }

    /// Keeps a comment that follows `after` on the same source line at the end of the
    /// current line.
    fn trailing(&mut self, after: u32) {
        let Some(c) = self.peek() else {
            return;
        };
        let same_line = !c.own_line
            && c.span.start >= after
            && self
                .text
                .get(after as usize..c.span.start as usize)
                .is_some_and(|s| s.chars().all(|ch| matches!(ch, ' ' | '\t' | ',')));
        if same_line {
            self.next += 1;
            let text = format!(" {}", self.comment_text(c));
            self.push(&text);
            self.last_end = c.span.end;
        }
    }

    // ------------------------------------------------------------ output

    fn last_line(&self) -> &str {
        self.out.rsplit('\n').next().unwrap_or("")
    }

    fn col(&self) -> usize {
        self.last_line().chars().count()
    }

    fn fits(&self, text: &str, reserve: usize) -> bool {
        self.col() + text.chars().count() + reserve <= WIDTH
    }

    /// Appends text; a leading space is dropped at the start of a line.
    fn push(&mut self, s: &str) {
        if s.starts_with(' ') && self.last_line().trim().is_empty() {
            self.out.push_str(s.trim_start_matches(' '));
        } else {
            self.out.push_str(s);
        }
    }

    fn begin_line(&mut self) {
        self.out.push_str(&"  ".repeat(self.indent));
    }

    fn end_line(&mut self) {
        let len = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(len);
        self.out.push('\n');
    }

    fn blank_line(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    /// Before a line for the source at `src`: a blank line if the source had one (at
    /// most one), and always after the `//!` file docs.
    fn before_line(&mut self, src: u32, file_doc: bool) {
        if (self.after_file_doc && !file_doc)
            || (self.allow_blank && self.newlines(self.last_end, src) >= 2)
        {
            self.blank_line();
        }
        self.after_file_doc = false;
    }

    // ------------------------------------------------------------ docs

    /// Prints a `///` run, one line each, with any `//` comments between its lines.
    fn doc(&mut self, doc: &Doc) {
        self.flush_before(doc.span.start);
        self.before_line(doc.span.start, false);
        let first = self.all.partition_point(|c| c.span.start < doc.span.start);
        let lines: Vec<&Comment> = self
            .all
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(|c| c.span.start < doc.span.end)
            .filter(|c| c.kind == CommentKind::Doc)
            .collect();
        if lines.is_empty() {
            for line in doc.text.split('\n') {
                self.begin_line();
                self.push(&doc_line(line));
                self.end_line();
            }
        } else {
            for line in lines {
                while let Some(c) = self.peek_before(line.span.start) {
                    self.next += 1;
                    self.begin_line();
                    let text = self.comment_text(c);
                    self.push(text);
                    self.end_line();
                }
                self.begin_line();
                self.push(&doc_line(&line.text));
                self.end_line();
            }
        }
        self.last_end = doc.span.end;
        self.allow_blank = false;
        self.after_file_doc = false;
    }

    // ------------------------------------------------------------ lists

    /// Prints a bracketed list one entry per line (or `{}` when it is empty).
    fn list(&mut self, list: List<'_>) {
        let List {
            open,
            close,
            open_pos,
            close_pos,
            mut entries,
            commas,
        } = list;
        entries.sort_by_key(|e| e.span().start);
        if entries.is_empty() && !self.has_comment_raw(open_pos, close_pos) {
            self.out.push(open);
            self.out.push(close);
            self.last_end = close_pos.saturating_add(1);
            return;
        }
        self.out.push(open);
        self.last_end = open_pos.saturating_add(1);
        self.trailing(open_pos.saturating_add(1));
        self.end_line();
        self.indent += 1;
        self.allow_blank = false;
        for entry in entries {
            let span = entry.span();
            let span = Span::new(span.start, self.tight_end(span.start, span.end));
            if let Entry::Stray(doc) = entry {
                self.doc(doc);
                self.allow_blank = true;
                continue;
            }
            if let Some(doc) = entry.doc() {
                self.doc(doc);
            }
            self.flush_before(span.start);
            self.before_line(span.start, false);
            self.begin_line();
            self.entry(entry, usize::from(commas));
            if commas {
                self.out.push(',');
            }
            self.last_end = span.end;
            self.trailing(span.end);
            self.end_line();
            self.allow_blank = true;
        }
        self.flush_before(close_pos);
        self.indent = self.indent.saturating_sub(1);
        self.begin_line();
        self.out.push(close);
        self.last_end = close_pos.saturating_add(1);
    }

    fn entry(&mut self, entry: Entry<'_>, reserve: usize) {
        match entry {
            Entry::Setting(s) => self.setting(s),
            Entry::Field(f) => {
                self.push(&f.name.name);
                self.push(":");
                self.inline_before(f.ty.span.start);
                self.push(" ");
                self.ty(&f.ty);
            }
            Entry::Variant(v) => {
                if v.quoted {
                    self.push(&escape(&v.name));
                } else {
                    self.push(&v.name);
                }
            }
            Entry::Serve(s) => {
                self.push(match s.kind {
                    ServeEntryKind::Resource => "resource",
                    ServeEntryKind::Template => "template",
                });
                self.inline_before(s.uri.span.start);
                self.push(" ");
                let uri = self.str_lit(&s.uri);
                self.push(&uri);
                self.inline_before(s.body.span.start);
                self.push(" ");
                self.block(&s.body);
            }
            Entry::Prompt(p) => {
                self.header("prompt", &p.name, &p.params, None, None, Some(&p.body))
            }
            Entry::Tool(t) => {
                self.push("tool");
                self.inline_before(t.body.span.start);
                self.push(" ");
                self.block(&t.body);
            }
            Entry::Param(p) => self.param(p, reserve),
            Entry::Key(r) => {
                self.record_key(r);
                self.push(":");
                self.inline_before(r.value.span.start);
                self.push(" ");
                self.expr(&r.value, reserve);
            }
            Entry::Elem(e) => self.expr(e, reserve),
            Entry::Arg(a) => {
                if let Some(name) = &a.name {
                    self.push(&name.name);
                    self.push(":");
                    self.inline_before(a.value.span.start);
                    self.push(" ");
                }
                self.expr(&a.value, reserve);
            }
            Entry::Stray(doc) => self.doc(doc),
        }
    }

    fn record_key(&mut self, r: &RecordEntry) {
        if r.quoted {
            self.push(&escape(&r.key.name));
        } else {
            self.push(&r.key.name);
        }
    }

    fn block(&mut self, block: &Block) {
        self.list(List {
            open: '{',
            close: '}',
            open_pos: block.span.start,
            close_pos: block.span.end.saturating_sub(1),
            entries: block_entries(block),
            commas: false,
        });
    }

    fn setting(&mut self, s: &Setting) {
        self.push(&s.name.name);
        match &s.value {
            SettingValue::Expr(e) => {
                self.push(" =");
                self.inline_before(e.span.start);
                self.push(" ");
                self.expr(e, 0);
            }
            SettingValue::Block(b) => {
                self.inline_before(b.span.start);
                self.push(" ");
                self.block(b);
            }
        }
    }

    fn param(&mut self, p: &Param, reserve: usize) {
        self.push(&p.name.name);
        self.push(":");
        self.inline_before(p.ty.span.start);
        self.push(" ");
        self.ty(&p.ty);
        if let Some(wire) = &p.wire_name {
            self.inline_before(wire.span.start);
            self.push(" as ");
            let w = self.str_lit(wire);
            self.push(&w);
        }
        if let Some(value) = &p.value {
            self.push(" =");
            self.inline_before(value.span.start);
            self.push(" ");
            self.expr(value, reserve);
        }
    }

    // ------------------------------------------------------------ declarations

    fn file(&mut self, file: &File) {
        enum Top<'t> {
            Item(&'t Item),
            Stray(&'t Doc),
        }
        let mut tops: Vec<(u32, Top<'_>)> = file
            .items
            .iter()
            .map(|i| {
                let lead = i.doc.as_ref().map_or(i.span.start, |d| d.span.start);
                (lead, Top::Item(i))
            })
            .collect();
        tops.extend(
            file.stray_docs
                .iter()
                .map(|d| (d.span.start, Top::Stray(d))),
        );
        tops.sort_by_key(|(lead, _)| *lead);

        // The previous declaration: its keyword, and whether it printed on one line.
        let mut prev: Option<(&'static str, bool)> = None;
        let mut first = true;
        for (lead, top) in tops {
            let first_src = self.peek_before(lead).map_or(lead, |c| c.span.start);
            let gap = self.newlines(self.last_end, first_src) >= 2;
            // Each declaration, with its comments and doc, is printed on its own and
            // then appended after the blank line it needs, if any.
            let before = std::mem::take(&mut self.out);
            self.allow_blank = first;
            self.flush_before(lead);
            let cur = match top {
                Top::Stray(doc) => {
                    self.doc(doc);
                    self.allow_blank = true;
                    None
                }
                Top::Item(item) => {
                    if let Some(doc) = &item.doc {
                        self.doc(doc);
                        self.flush_before(item.span.start);
                    }
                    let start = self.out.len();
                    self.item(item);
                    let one_line = self
                        .out
                        .get(start..)
                        .is_some_and(|s| !s.trim_matches('\n').contains('\n'));
                    Some((item.kind.keyword(), one_line))
                }
            };
            let group = std::mem::replace(&mut self.out, before);
            // One blank line between declarations, except that one-line declarations of
            // the same kind (a run of `link`s, `input`s, aliases) may stay together.
            let together = match (prev, cur) {
                (Some((a, true)), Some((b, true))) => a == b && !gap,
                _ => false,
            };
            if !first && !together {
                self.blank_line();
            }
            self.out.push_str(&group);
            prev = cur;
            first = false;
        }
    }

    fn item(&mut self, item: &Item) {
        self.before_line(item.span.start, false);
        self.begin_line();
        match &item.kind {
            ItemKind::Import(i) => {
                self.push("import");
                self.inline_before(i.path.span.start);
                self.push(" ");
                let path = self.str_lit(&i.path);
                self.push(&path);
                if let Some(alias) = &i.alias {
                    self.inline_before(alias.span.start);
                    self.push(" as ");
                    self.push(&alias.name);
                }
            }
            ItemKind::Type(t) => {
                self.push("type");
                self.inline_before(t.name.span.start);
                self.push(" ");
                self.push(&t.name.name);
                match &t.body {
                    TypeDeclBody::Record(r) => {
                        self.inline_before(r.span.start);
                        self.push(" ");
                        self.record_type_block(r);
                    }
                    TypeDeclBody::Alias(ty) => {
                        self.push(" =");
                        self.inline_before(ty.span.start);
                        self.push(" ");
                        self.ty(ty);
                    }
                }
            }
            ItemKind::Enum(e) => {
                self.push("enum");
                self.inline_before(e.name.span.start);
                self.push(" ");
                self.push(&e.name.name);
                let open = self.find_open(e.name.span.end, b'{');
                self.inline_before(open);
                self.push(" ");
                let mut entries: Vec<Entry<'_>> = e.variants.iter().map(Entry::Variant).collect();
                entries.extend(e.stray_docs.iter().map(Entry::Stray));
                self.list(List {
                    open: '{',
                    close: '}',
                    open_pos: open,
                    close_pos: item.span.end.saturating_sub(1),
                    entries,
                    commas: false,
                });
            }
            ItemKind::Input(i) => {
                self.push("input");
                self.inline_before(i.name.span.start);
                self.push(" ");
                self.push(&i.name.name);
                self.push(":");
                self.inline_before(i.ty.span.start);
                self.push(" ");
                self.ty(&i.ty);
                if let Some(d) = &i.default {
                    self.push(" =");
                    self.inline_before(d.span.start);
                    self.push(" ");
                    self.expr(d, 0);
                }
            }
            ItemKind::Output(o) => {
                self.push("output");
                self.inline_before(o.name.span.start);
                self.push(" ");
                self.push(&o.name.name);
                if let Some(ty) = &o.ty {
                    self.push(":");
                    self.inline_before(ty.span.start);
                    self.push(" ");
                    self.ty(ty);
                }
                self.push(" =");
                self.inline_before(o.value.span.start);
                self.push(" ");
                self.expr(&o.value, 0);
            }
            ItemKind::Server(b) | ItemKind::Model(b) | ItemKind::Test(b) => {
                self.push(item.kind.keyword());
                self.inline_before(b.name.span.start);
                self.push(" ");
                self.push(&b.name.name);
                self.inline_before(b.body.span.start);
                self.push(" ");
                self.block(&b.body);
            }
            ItemKind::Link(l) => {
                self.push("link");
                self.inline_before(l.kind.span.start);
                self.push(" ");
                let kind = self.str_lit(&l.kind);
                self.push(&kind);
                self.push(":");
                self.inline_before(l.ty.span.start);
                self.push(" ");
                self.ty(&l.ty);
                self.push(" =");
                self.inline_before(l.template.span.start);
                self.push(" ");
                let template = self.str_lit(&l.template);
                self.push(&template);
            }
            ItemKind::Tool(t) | ItemKind::Reader(t) => self.header(
                item.kind.keyword(),
                &t.name,
                &t.params,
                t.returns.as_ref(),
                Some(&t.server),
                t.body.as_ref(),
            ),
            ItemKind::Node(n) => self.header(
                n.kind.keyword(),
                &n.name,
                &n.params,
                n.returns.as_ref(),
                None,
                Some(&n.body),
            ),
            ItemKind::Serve(s) => {
                self.push("serve");
                let open = self.find_open(item.span.start.saturating_add(5), b'{');
                self.inline_before(open);
                self.push(" ");
                let mut entries: Vec<Entry<'_>> = s.entries.iter().map(Entry::Serve).collect();
                entries.extend(s.prompts.iter().map(Entry::Prompt));
                entries.extend(s.tools.iter().map(Entry::Tool));
                entries.extend(s.stray_docs.iter().map(Entry::Stray));
                self.list(List {
                    open: '{',
                    close: '}',
                    open_pos: open,
                    close_pos: item.span.end.saturating_sub(1),
                    entries,
                    commas: false,
                });
            }
        }
        let end = self.tight_end(item.span.start, item.span.end);
        self.last_end = end;
        self.trailing(end);
        self.end_line();
        self.allow_blank = true;
    }

    /// `kind name(params) -> T from server {`: the parameters on the header line when
    /// the whole line fits and no parameter carries a comment, else one per line.
    fn header(
        &mut self,
        keyword: &str,
        name: &Ident,
        params: &Params,
        returns: Option<&TypeExpr>,
        server: Option<&Ident>,
        body: Option<&Block>,
    ) {
        self.push(keyword);
        self.inline_before(name.span.start);
        self.push(" ");
        self.push(&name.name);
        self.inline_before(params.span.start);
        let flat = self.flat_params(params).filter(|flat| {
            let mut rest = format!("({flat})");
            if let Some(ty) = returns {
                rest.push_str(" -> ");
                rest.push_str(&self.flat_type(ty).unwrap_or_default());
            }
            if let Some(server) = server {
                rest.push_str(" from ");
                rest.push_str(&server.name);
            }
            if body.is_some() {
                rest.push_str(" {");
            }
            self.fits(&rest, 0)
        });
        match flat {
            Some(flat) => {
                self.push(&format!("({flat})"));
                self.last_end = params.span.end;
            }
            None => {
                let mut entries: Vec<Entry<'_>> = params.params.iter().map(Entry::Param).collect();
                entries.extend(params.stray_docs.iter().map(Entry::Stray));
                self.list(List {
                    open: '(',
                    close: ')',
                    open_pos: params.span.start,
                    close_pos: params.span.end.saturating_sub(1),
                    entries,
                    commas: true,
                });
            }
        }
        if let Some(ty) = returns {
            self.inline_before(ty.span.start);
            self.push(" -> ");
            self.ty(ty);
        }
        if let Some(server) = server {
            self.inline_before(server.span.start);
            self.push(" from ");
            self.push(&server.name);
        }
        if let Some(body) = body {
            self.inline_before(body.span.start);
            self.push(" ");
            self.block(body);
        }
    }

    fn flat_params(&self, params: &Params) -> Option<String> {
        if !params.stray_docs.is_empty()
            || params.params.iter().any(|p| p.doc.is_some())
            || self.has_comment(params.span.start, params.span.end)
        {
            return None;
        }
        let parts = params
            .params
            .iter()
            .map(|p| self.flat_param(p))
            .collect::<Option<Vec<_>>>()?;
        Some(parts.join(", "))
    }

    fn flat_param(&self, p: &Param) -> Option<String> {
        let mut s = format!("{}: {}", p.name.name, self.flat_type(&p.ty)?);
        if let Some(wire) = &p.wire_name {
            s.push_str(" as ");
            s.push_str(&self.str_lit(wire));
        }
        if let Some(value) = &p.value {
            s.push_str(" = ");
            s.push_str(&self.flat_expr(value)?);
        }
        if s.contains('\n') { None } else { Some(s) }
    }

    // ------------------------------------------------------------ types

    /// A record type that is a declaration's body: always one field per line.
    fn record_type_block(&mut self, r: &RecordType) {
        let mut entries: Vec<Entry<'_>> = r.fields.iter().map(Entry::Field).collect();
        entries.extend(r.stray_docs.iter().map(Entry::Stray));
        self.list(List {
            open: '{',
            close: '}',
            open_pos: r.span.start,
            close_pos: r.span.end.saturating_sub(1),
            entries,
            commas: false,
        });
    }

    /// Prints a type as written, on one line; an inline record type that holds a doc or
    /// a comment, or does not fit, is printed one field per line.
    fn ty(&mut self, t: &TypeExpr) {
        if let Some(flat) = self.flat_type(t)
            && self.fits(&flat, 0)
        {
            self.push(&flat);
            return;
        }
        match &t.kind {
            TypeExprKind::Name(parts) => {
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        self.inline_before(part.span.start);
                        self.push(".");
                    }
                    self.push(&part.name);
                }
            }
            TypeExprKind::Generic(name, inner) => {
                self.push(&name.name);
                self.push("<");
                self.inline_before(inner.span.start);
                self.ty(inner);
                self.inline_before(t.span.end.saturating_sub(1));
                self.push(">");
            }
            TypeExprKind::Record(r) => self.record_type_block(r),
            TypeExprKind::Literal(s) => {
                let s = self.str_lit(s);
                self.push(&s);
            }
            TypeExprKind::List(inner) => {
                self.ty(inner);
                self.inline_before(t.span.end.saturating_sub(1));
                self.push("[]");
            }
            TypeExprKind::Optional(inner) => {
                self.ty(inner);
                self.inline_before(t.span.end.saturating_sub(1));
                self.push("?");
            }
            TypeExprKind::Union(members) => {
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        self.inline_before(member.span.start);
                        self.push(" | ");
                    }
                    self.ty(member);
                }
            }
            TypeExprKind::Paren(inner) => {
                self.push("(");
                self.inline_before(inner.span.start);
                self.ty(inner);
                self.inline_before(t.span.end.saturating_sub(1));
                self.push(")");
            }
        }
    }

    /// A type on one line, if it holds no comment and no doc.
    fn flat_type(&self, t: &TypeExpr) -> Option<String> {
        if self.has_comment(t.span.start, t.span.end) {
            return None;
        }
        self.flat_type_inner(t)
    }

    fn flat_type_inner(&self, t: &TypeExpr) -> Option<String> {
        Some(match &t.kind {
            TypeExprKind::Name(parts) => parts
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join("."),
            TypeExprKind::Generic(name, inner) => {
                format!("{}<{}>", name.name, self.flat_type_inner(inner)?)
            }
            TypeExprKind::Record(r) => {
                if !r.stray_docs.is_empty()
                    || r.fields.iter().any(|f| f.doc.is_some())
                    || self.has_comment(r.span.start, r.span.end)
                {
                    return None;
                }
                if r.fields.is_empty() {
                    "{}".to_string()
                } else {
                    let fields = r
                        .fields
                        .iter()
                        .map(|f| Some(format!("{}: {}", f.name.name, self.flat_type_inner(&f.ty)?)))
                        .collect::<Option<Vec<_>>>()?;
                    format!("{{ {} }}", fields.join(", "))
                }
            }
            TypeExprKind::Literal(s) => self.str_lit(s),
            TypeExprKind::List(inner) => format!("{}[]", self.flat_type_inner(inner)?),
            TypeExprKind::Optional(inner) => format!("{}?", self.flat_type_inner(inner)?),
            TypeExprKind::Union(members) => members
                .iter()
                .map(|m| self.flat_type_inner(m))
                .collect::<Option<Vec<_>>>()?
                .join(" | "),
            TypeExprKind::Paren(inner) => format!("({})", self.flat_type_inner(inner)?),
        })
    }

    // ------------------------------------------------------------ expressions

    /// A string literal: raw strings exactly as written, regular ones re-escaped.
    fn str_lit(&self, s: &StrLit) -> String {
        match s.raw_hashes {
            Some(hashes) => {
                let written = self.slice(s.span);
                if written.is_empty() {
                    let h = "#".repeat(hashes.max(1));
                    format!("{h}\"{}\"{h}", s.value)
                } else {
                    written.to_string()
                }
            }
            None => escape(&s.value),
        }
    }

    /// A number as written (`1_000`, `0.50`, `200kb`, `30s`).
    fn number(&self, e: &Expr) -> String {
        let written = self.slice(e.span).trim();
        if !written.is_empty() {
            return written.to_string();
        }
        match &e.kind {
            ExprKind::Int(v) => v.to_string(),
            ExprKind::Float(v) => format!("{v:?}"),
            ExprKind::Size(_, text) | ExprKind::Duration(_, text) => text.clone(),
            _ => String::new(),
        }
    }

    /// Prints an expression: on one line when it fits in what is left of the line
    /// (keeping `reserve` columns for what follows), else breaking records, lists and
    /// argument lists one entry per line.
    fn expr(&mut self, e: &Expr, reserve: usize) {
        if let Some(flat) = self.flat_expr(e)
            && self.fits(&flat, reserve)
        {
            self.push(&flat);
            return;
        }
        match &e.kind {
            ExprKind::Record(entries) => self.list(List {
                open: '{',
                close: '}',
                open_pos: e.span.start,
                close_pos: e.span.end.saturating_sub(1),
                entries: entries.iter().map(Entry::Key).collect(),
                commas: true,
            }),
            ExprKind::List(items) => self.list(List {
                open: '[',
                close: ']',
                open_pos: e.span.start,
                close_pos: e.span.end.saturating_sub(1),
                entries: items.iter().map(Entry::Elem).collect(),
                commas: true,
            }),
            ExprKind::Call(callee, args) => {
                self.expr(callee, 0);
                let open = self.find_open(callee.span.end, b'(');
                self.inline_before(open);
                self.list(List {
                    open: '(',
                    close: ')',
                    open_pos: open,
                    close_pos: e.span.end.saturating_sub(1),
                    entries: args.iter().map(Entry::Arg).collect(),
                    commas: true,
                });
            }
            ExprKind::Field(base, name) => {
                self.expr(base, 0);
                self.inline_before(name.span.start);
                self.push(".");
                self.push(&name.name);
            }
            ExprKind::Splat(base, name) => {
                self.expr(base, 0);
                self.inline_before(name.span.start);
                self.push("[*].");
                self.push(&name.name);
            }
            ExprKind::Not(inner) => {
                self.push("!");
                self.inline_before(inner.span.start);
                self.expr(inner, reserve);
            }
            ExprKind::Binary(op, lhs, rhs) => {
                self.expr(lhs, 0);
                self.inline_before(rhs.span.start);
                self.push(&format!(" {} ", op.symbol()));
                self.expr(rhs, reserve);
            }
            ExprKind::Paren(inner) => {
                self.push("(");
                self.inline_before(inner.span.start);
                self.expr(inner, reserve + 1);
                self.inline_before(e.span.end.saturating_sub(1));
                self.push(")");
            }
            _ => {
                let atom = self.flat_atom(e);
                self.push(&atom);
            }
        }
    }

    /// An expression on one line, if it holds no comment and no line break.
    fn flat_expr(&self, e: &Expr) -> Option<String> {
        if self.has_comment(e.span.start, e.span.end) {
            return None;
        }
        let s = self.flat_expr_inner(e)?;
        if s.contains('\n') { None } else { Some(s) }
    }

    fn flat_atom(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Str(s) => self.str_lit(s),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Size(..) | ExprKind::Duration(..) => {
                self.number(e)
            }
            ExprKind::Bool(true) => "true".to_string(),
            ExprKind::Bool(false) => "false".to_string(),
            ExprKind::Null => "null".to_string(),
            ExprKind::Name(id) => id.name.clone(),
            _ => self.slice(e.span).to_string(),
        }
    }

    fn flat_expr_inner(&self, e: &Expr) -> Option<String> {
        Some(match &e.kind {
            ExprKind::Field(base, name) => format!("{}.{}", self.flat_expr_inner(base)?, name.name),
            ExprKind::Splat(base, name) => {
                format!("{}[*].{}", self.flat_expr_inner(base)?, name.name)
            }
            ExprKind::Call(callee, args) => {
                let args = args
                    .iter()
                    .map(|a| {
                        let value = self.flat_expr_inner(&a.value)?;
                        Some(match &a.name {
                            Some(name) => format!("{}: {value}", name.name),
                            None => value,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                format!("{}({})", self.flat_expr_inner(callee)?, args.join(", "))
            }
            ExprKind::Record(entries) => {
                if entries.is_empty() {
                    return Some("{}".to_string());
                }
                let entries = entries
                    .iter()
                    .map(|r| {
                        let key = if r.quoted {
                            escape(&r.key.name)
                        } else {
                            r.key.name.clone()
                        };
                        Some(format!("{key}: {}", self.flat_expr_inner(&r.value)?))
                    })
                    .collect::<Option<Vec<_>>>()?;
                format!("{{ {} }}", entries.join(", "))
            }
            ExprKind::List(items) => {
                let items = items
                    .iter()
                    .map(|i| self.flat_expr_inner(i))
                    .collect::<Option<Vec<_>>>()?;
                format!("[{}]", items.join(", "))
            }
            ExprKind::Not(inner) => format!("!{}", self.flat_expr_inner(inner)?),
            ExprKind::Binary(op, lhs, rhs) => format!(
                "{} {} {}",
                self.flat_expr_inner(lhs)?,
                op.symbol(),
                self.flat_expr_inner(rhs)?
            ),
            ExprKind::Paren(inner) => format!("({})", self.flat_expr_inner(inner)?),
            _ => self.flat_atom(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEAL: &str = include_str!("../../../pipelines/deal_research.pipe");

    fn fmt(text: &str) -> String {
        match format_source(text) {
            Ok(out) => out,
            Err(diags) => panic!(
                "unexpected errors: {:?}\n--- input ---\n{text}",
                diags.iter().map(|d| d.message.clone()).collect::<Vec<_>>()
            ),
        }
    }

    /// The `Debug` text of a file's tree with every span and offset map removed.
    fn shape(text: &str) -> String {
        let parsed = crate::parse(FileId(0), text);
        assert!(parsed.diagnostics.is_empty(), "does not parse:\n{text}");
        strip_positions(&format!("{:?}", parsed.file))
    }

    fn strip_positions(debug: &str) -> String {
        let mut out = String::new();
        let mut rest = debug;
        loop {
            let span = rest.find("Span { start: ");
            let map = rest.find("map: [");
            let (at, is_span) = match (span, map) {
                (Some(s), Some(m)) if m < s => (m, false),
                (Some(s), _) => (s, true),
                (None, Some(m)) => (m, false),
                (None, None) => break,
            };
            out.push_str(&rest[..at]);
            let close = if is_span { '}' } else { ']' };
            match rest[at..].find(close) {
                Some(end) => rest = &rest[at + end + 1..],
                None => {
                    rest = "";
                    break;
                }
            }
        }
        out.push_str(rest);
        trim_doc_lines(&out)
    }

    /// Drops the blanks at the end of doc lines (`pipec fmt` leaves none) in a `Debug`
    /// text.
    fn trim_doc_lines(debug: &str) -> String {
        let marker = "Doc { text: \"";
        let mut out = String::new();
        let mut rest = debug;
        while let Some(at) = rest.find(marker) {
            out.push_str(&rest[..at + marker.len()]);
            rest = &rest[at + marker.len()..];
            // The text runs to the first quote not escaped.
            let mut end = rest.len();
            let mut escaped = false;
            for (i, c) in rest.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = i;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let text = &rest[..end];
            let lines: Vec<&str> = text.split("\\n").map(str::trim_end).collect();
            out.push_str(&lines.join("\\n"));
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    /// Item kinds, names and parameter names, as the brief asks to compare.
    fn outline(text: &str) -> Vec<String> {
        let parsed = crate::parse(FileId(0), text);
        parsed
            .file
            .items
            .iter()
            .map(|item| {
                let (name, params) = match &item.kind {
                    ItemKind::Import(i) => (i.path.value.clone(), vec![]),
                    ItemKind::Type(t) => (t.name.name.clone(), vec![]),
                    ItemKind::Enum(e) => (e.name.name.clone(), vec![]),
                    ItemKind::Input(i) => (i.name.name.clone(), vec![]),
                    ItemKind::Output(o) => (o.name.name.clone(), vec![]),
                    ItemKind::Server(b) | ItemKind::Model(b) | ItemKind::Test(b) => {
                        (b.name.name.clone(), vec![])
                    }
                    ItemKind::Link(l) => (l.kind.value.clone(), vec![]),
                    ItemKind::Tool(t) | ItemKind::Reader(t) => (
                        t.name.name.clone(),
                        t.params
                            .params
                            .iter()
                            .map(|p| p.name.name.clone())
                            .collect(),
                    ),
                    ItemKind::Node(n) => (
                        n.name.name.clone(),
                        n.params
                            .params
                            .iter()
                            .map(|p| p.name.name.clone())
                            .collect(),
                    ),
                    ItemKind::Serve(_) => (String::new(), vec![]),
                };
                format!("{} {name} {}", item.kind.keyword(), params.join(","))
            })
            .collect()
    }

    /// Everything the printer promises about one input.
    fn check_all(input: &str) -> String {
        let once = fmt(input);
        let twice = fmt(&once);
        assert_eq!(
            once, twice,
            "not idempotent\n--- input ---\n{input}\n--- once ---\n{once}"
        );
        assert_eq!(
            shape(input),
            shape(&once),
            "tree changed\n--- once ---\n{once}"
        );
        assert_eq!(outline(input), outline(&once));
        for c in &crate::parse(FileId(0), input).comments {
            assert!(
                once.contains(c.text.trim()),
                "comment `{}` lost\n--- once ---\n{once}",
                c.text
            );
        }
        let in_count = crate::parse(FileId(0), input).comments.len();
        let out_count = crate::parse(FileId(0), &once).comments.len();
        assert_eq!(in_count, out_count, "comment count changed\n{once}");
        assert!(
            once.ends_with('\n') && !once.ends_with("\n\n"),
            "bad end:\n{once}"
        );
        assert!(!once.contains("\n\n\n"), "two blank lines:\n{once}");
        for line in once.lines() {
            // Only raw strings (kept as written) may have trailing blanks.
            assert!(
                line == line.trim_end() || input.contains(line),
                "trailing whitespace:\n{once}"
            );
        }
        once
    }

    #[test]
    fn deal_research_is_canonical() {
        let out = fmt(DEAL);
        assert_eq!(out, DEAL);
        check_all(DEAL);
    }

    const MESSY_DECLS: &str = r#"// leading comment before file doc
//! File doc one.
//! File doc two.
import   "shared/tracker.pipe"   as  tracker // trailing on import
import "other.pipe"
server crm { command = "pipec-demo-crm", args = ["--x",   "y"] , env = { A: "1" } } // after server
model fast {
  provider="openai"    // provider


  name   =   "gpt-4o-mini"
  // before closing brace
}
/// Doc on Deal.
// pipec: allow(unused)
type Deal { deal_id: string, name:string
  /// Amount in cents.
  amount : int, // trailing on amount
  tags: ( "a" | "b" )[]?
  extra: map<ref<tracker.Ticket>>?
  inline: { a: int, b: string? }
  /// stray at end of record
}
type Empty {}
type EmptyWithComment {
  // nothing here yet
}
type Event = "COMMENT" | "APPROVE"
enum Verdict { approve, reject , "needs-changes"
  /// documented
  maybe // trailing on maybe
}
enum Nothing {}
input deal_id : string = "abc\"q\\\n\u{41}"
input limit: int = 1_000
output brief : Brief? = consume // out
link "activity-history" : ActivityLog = "mcp://crm/deals/{deal_id}/activity"
// between links
link "email-history": EmailPage = "mcp://crm/x"
tool get_deal(deal_id: string as "dealId" = "x", ) -> Deal from crm
"#;

    const MESSY_NODES: &str = r####"tool get_deal(
  // comment inside params
  deal_id: string,
  /// the page
  page: int = 1, // trailing page
) -> Deal from crm { read_only = true, links = ["activity-history", "email-history"] }
reader r(a: string) -> X from crm
agent research(deal_id: string = input.deal_id, dossier: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 50kb)) -> DealSummary {
  model = fast
  prompt = #"
    You are a researcher.
      Indented line.
    Deal: {{ deal_id }}
  "#
  tools = [get_deal, read_emails] // tools
  max_steps = 10 timeout = 30s
}
node digest(ack: Approval = review, x: int = 1) -> Digest {
  when = !ack.approved && (x > 1 || x <= 2) ?? false
  return = { deal_id: deal_id, events: len(activity.activity), names: activity.activity[*].name, very_long_field_name_one: "aaaaaaaaaaaaaaaa", other: 1.50 }
}
act send(token: string = secret("T")) -> Result {
  call = send_email(token: token, body: { to: "x", "x-y": "y" })
  limits = {
    send_email: 3, // at most three
    // and this
  }
  approve = [send_email]
}
gate review(summary: DealSummary = research) -> Approval {
  message = "Approve?" timeout = 2d on_timeout = { approved: false, note: null }
}
serve {
  resource "file:///project/readme.md" {
    name        = "README.MD"
    text        = ##"## Hello "#"##
    annotations { audience = ["user"], priority = 0.8 }
  }
  // a template
  template "note://{id}" {
    render    = #"{"id": "{{ id }}"}"#        // rendered
  }
  /// stray in serve
}
// final comment

// really final"####;

    const MESSY_COMMENTS: &str = r#"type   A = int   // a
type B = { x: int, // inside inline record
  y: string }

/// doc for C

// comment between doc and decl
type C = map< // in generic
  int >

/// one
// between doc lines
///
/// three
type D = int
node n(a: int // after a
  , b: string) // after params
  -> // after arrow
  X {
  when = a > 1 && // mid binary
    b == "x"
  return = f( // open call
    a, b: [1, // in list
      2],
  )
  other = ( // paren
    a )
  x = a. // dotted
    b
  y = !
    // not
    c
  z = { // open record
    k: 1 // trailing k
    // before close
  } // after record
}
node long(
  first_parameter_with_a_long_name: SomeLongTypeName = upstream_node.some_field,
  second: OtherType = resource("mcp://server/some/very/long/uri/template/{first_parameter_with_a_long_name}", max_bytes: 200kb),
) -> Out {
  exec = ["some-command", "--with-a-long-flag", "--and-another-long-flag", "value-of-the-flag", "more"]
  return = { nested: { deeper: { deepest_key_with_long_name: "some long value here to overflow the line limit" } } }
}
/// stray doc at top level

output x = y
tool t() from s
tool u() from s {}
tool v() from s { // c
}
enum E { // open
  // first
  a // after a


  b
  // last
}
// end of file"#;

    #[test]
    fn messy_inputs_are_idempotent_and_keep_everything() {
        for input in [MESSY_DECLS, MESSY_NODES, MESSY_COMMENTS] {
            check_all(input);
        }
    }

    #[test]
    fn layout_of_messy_declarations() {
        let out = check_all(MESSY_DECLS);
        let expected = r#"// leading comment before file doc
//! File doc one.
//! File doc two.

import "shared/tracker.pipe" as tracker // trailing on import
import "other.pipe"

server crm {
  command = "pipec-demo-crm"
  args = ["--x", "y"]
  env = { A: "1" }
} // after server

model fast {
  provider = "openai" // provider

  name = "gpt-4o-mini"
  // before closing brace
}

/// Doc on Deal.
// pipec: allow(unused)
type Deal {
  deal_id: string
  name: string
  /// Amount in cents.
  amount: int // trailing on amount
  tags: ("a" | "b")[]?
  extra: map<ref<tracker.Ticket>>?
  inline: { a: int, b: string? }
  /// stray at end of record
}

type Empty {}

type EmptyWithComment {
  // nothing here yet
}

type Event = "COMMENT" | "APPROVE"

enum Verdict {
  approve
  reject
  "needs-changes"
  /// documented
  maybe // trailing on maybe
}

enum Nothing {}

input deal_id: string = "abc\"q\\\nA"
input limit: int = 1_000

output brief: Brief? = consume // out

link "activity-history": ActivityLog = "mcp://crm/deals/{deal_id}/activity"
// between links
link "email-history": EmailPage = "mcp://crm/x"

tool get_deal(deal_id: string as "dealId" = "x") -> Deal from crm
"#;
        assert_eq!(out, expected);
    }

    #[test]
    fn layout_of_nodes_and_breaking() {
        let out = check_all(MESSY_NODES);
        assert!(out.starts_with(
            "tool get_deal(\n  // comment inside params\n  deal_id: string,\n  /// the page\n  page: int = 1, // trailing page\n) -> Deal from crm {\n  read_only = true\n  links = [\"activity-history\", \"email-history\"]\n}\n\nreader r(a: string) -> X from crm\n\n"
        ));
        assert!(out.contains(
            "agent research(\n  deal_id: string = input.deal_id,\n  dossier: ActivityLog = resource(\"mcp://crm/deals/{deal_id}/activity\", max_bytes: 50kb),\n) -> DealSummary {\n"
        ));
        assert!(out.contains("  max_steps = 10\n  timeout = 30s\n"));
        assert!(out.contains("  when = !ack.approved && (x > 1 || x <= 2) ?? false\n"));
        assert!(out.contains("  return = {\n    deal_id: deal_id,\n    events: len(activity.activity),\n    names: activity.activity[*].name,\n"));
        assert!(out.contains("    other: 1.50,\n  }\n"));
        assert!(
            out.contains(
                "  call = send_email(token: token, body: { to: \"x\", \"x-y\": \"y\" })\n"
            )
        );
        assert!(
            out.contains(
                "  limits = {\n    send_email: 3, // at most three\n    // and this\n  }\n"
            )
        );
        assert!(out.contains("  message = \"Approve?\"\n  timeout = 2d\n  on_timeout = { approved: false, note: null }\n"));
        assert!(out.contains(
            "    annotations {\n      audience = [\"user\"]\n      priority = 0.8\n    }\n"
        ));
        assert!(out.contains("  }\n  // a template\n  template \"note://{id}\" {\n    render = #\"{\"id\": \"{{ id }}\"}\"# // rendered\n  }\n  /// stray in serve\n}\n"));
        assert!(out.ends_with("}\n// final comment\n\n// really final\n"));
    }

    #[test]
    fn comments_everywhere() {
        let out = check_all(MESSY_COMMENTS);
        assert!(out.starts_with(
            "type A = int // a\n\ntype B = {\n  x: int // inside inline record\n  y: string\n}\n"
        ));
        assert!(out.contains("/// one\n// between doc lines\n///\n/// three\ntype D = int\n"));
        assert!(out.contains("  z = { // open record\n    k: 1, // trailing k\n    // before close\n  } // after record\n"));
        assert!(
            out.contains("enum E { // open\n  // first\n  a // after a\n\n  b\n  // last\n}\n")
        );
        assert!(out.contains("\n/// stray doc at top level\n\noutput x = y\n"));
        assert!(
            out.contains("\ntool t() from s\ntool u() from s {}\n\ntool v() from s { // c\n}\n")
        );
        assert!(out.ends_with("}\n// end of file\n"));
        // Lines are broken where they do not fit.
        assert!(out.contains("  second: OtherType = resource(\n    \"mcp://server/some/very/long/uri/template/{first_parameter_with_a_long_name}\",\n    max_bytes: 200kb,\n  ),\n"));
        assert!(out.contains("  exec = [\n    \"some-command\",\n"));
        for line in out.lines() {
            assert!(line.chars().count() <= WIDTH, "too long: {line}");
        }
    }

    #[test]
    fn long_inline_record_types_break() {
        let input = "type T {\n  themes: { name: string, ticket_ids: string[], description_of_the_theme: string, weight: float, rank: int }[]\n  short: { a: int }\n}\n";
        let out = check_all(input);
        assert_eq!(
            out,
            "type T {\n  themes: {\n    name: string\n    ticket_ids: string[]\n    description_of_the_theme: string\n    weight: float\n    rank: int\n  }[]\n  short: { a: int }\n}\n"
        );
        // Written on several lines, a short one goes back to one line.
        assert_eq!(
            check_all("type T {\n  short: {\n    a: int\n    b: string\n  }?\n}\n"),
            "type T {\n  short: { a: int, b: string }?\n}\n"
        );
    }

    #[test]
    fn raw_strings_survive_unchanged() {
        let input = "node brief(deal: Deal = research) -> string {\n  prompt = ##\"\n      You write briefs.\n        - indented \"quoted\"# text   \n\n      Deal: {{ deal.name }}\n    \"##\n  return = #\"one line \\n\"#\n}\n";
        let out = check_all(input);
        assert_eq!(out, input);
        let raw = "##\"\n      You write briefs.\n        - indented \"quoted\"# text   \n\n      Deal: {{ deal.name }}\n    \"##";
        assert!(out.contains(raw));
        // Also when the node is messy around it.
        let messy = "node brief(deal: Deal = research) -> string { prompt = ##\"\n      You write briefs.\n        - indented \"quoted\"# text   \n\n      Deal: {{ deal.name }}\n    \"##, return = #\"one line \\n\"# }";
        assert_eq!(check_all(messy), input);
    }

    #[test]
    fn crlf_files_keep_their_line_ends() {
        let input = "type A = int\r\n// note\r\ntype B {\r\n  x: int // t\r\n}\r\n";
        let out = check_all(input);
        assert_eq!(
            out,
            "type A = int\r\n\r\n// note\r\ntype B {\r\n  x: int // t\r\n}\r\n"
        );
    }

    #[test]
    fn empty_and_comment_only_files() {
        assert_eq!(fmt(""), "");
        assert_eq!(fmt("\n\n  \n"), "");
        assert_eq!(fmt("// only a comment"), "// only a comment\n");
        assert_eq!(fmt("//! doc\n\n\n"), "//! doc\n");
        assert_eq!(
            fmt("type A = int\n/// stray"),
            "type A = int\n\n/// stray\n"
        );
    }

    #[test]
    fn syntax_errors_are_returned() {
        assert!(format_source("server crm {\n  command: \"x\"\n}\n").is_err());
        assert!(format_source("type A = \n").is_err());
        assert!(format_source("input a: string = \"unterminated\n").is_err());
        assert!(format_source("input a: int = 12qq\n").is_err());
        let broken = DEAL.replace("-> Deal from crm", "-> Deal frm crm");
        let errs = format_source(&broken).err().unwrap_or_default();
        assert!(!errs.is_empty());
    }

    /// The sweeps below try every position under `PIPEC_TEST_FULL=1` (the tests' full tier,
    /// which CI runs) and every `SMALL_STRIDE`-th one by default.
    fn stride() -> usize {
        const SMALL_STRIDE: usize = 5;
        let full = std::env::var("PIPEC_TEST_FULL").is_ok_and(|v| !v.is_empty() && v != "0");
        if full { 1 } else { SMALL_STRIDE }
    }

    #[test]
    fn never_panics_on_truncated_files() {
        let chars = DEAL.char_indices().chain([(DEAL.len(), ' ')]);
        for (i, _) in chars.step_by(stride()) {
            let prefix = &DEAL[..i];
            if let Ok(out) = format_source(prefix) {
                // What formats must format to itself and keep the tree.
                assert_eq!(format_source(&out).ok().as_ref(), Some(&out), "prefix {i}");
                assert_eq!(shape(prefix), shape(&out), "prefix {i}");
            }
        }
    }

    #[test]
    fn ui_test_files_format_stably() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut stack = vec![
            root.join("tests"),
            root.join("pipelines"),
            root.join("examples"),
        ];
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "pipe")
                    && let Ok(text) = std::fs::read_to_string(&path)
                    && format_source(&text).is_ok()
                {
                    seen += 1;
                    check_all(&text);
                }
            }
        }
        assert!(seen > 0);
    }

    /// Inserts a comment at every blank of a file (a comment is a blank to the grammar),
    /// or between any two characters with `anywhere`, and checks that each result formats stably and keeps everything.
    fn comment_everywhere(input: &str, step: usize, anywhere: bool) {
        let base = shape(input);
        let positions: Vec<usize> = input
            .char_indices()
            .filter(|(_, c)| anywhere || *c == ' ' || *c == '\n')
            .map(|(i, _)| i)
            .step_by(step * stride())
            .collect();
        for (n, at) in positions.into_iter().enumerate() {
            let comment = if n % 2 == 0 { " // zz\n" } else { "\n// zz\n" };
            let text = format!("{}{comment}{}", &input[..at], &input[at..]);
            let parsed = crate::parse(FileId(0), &text);
            // Inside a string the insertion changes the text or breaks the file.
            if !parsed.diagnostics.is_empty() || shape(&text) != base {
                continue;
            }
            let once = check_all(&text);
            assert!(once.contains("// zz"), "{once}");
        }
    }

    #[test]
    fn a_comment_anywhere_is_kept() {
        comment_everywhere(DEAL, 5, false);
        comment_everywhere(MESSY_NODES, 2, false);
        comment_everywhere(MESSY_COMMENTS, 2, false);
        comment_everywhere(MESSY_DECLS, 2, false);
        comment_everywhere(MESSY_NODES, 7, true);
        comment_everywhere(MESSY_COMMENTS, 7, true);
    }
}
