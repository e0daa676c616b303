//! The grammar of `.pipe` files, read by recursive descent straight into the syntax tree.
//!
//! ```text
//! piece       = (doc* item)* doc* EOF
//! item        = import | type | enum | input | output | server | model | link | tool
//!             | reader | node | serve | test
//! import      = "import" string ("as" name)?
//! type        = "type" name (record_type | "=" type_expr)
//! enum        = "enum" name "{" (doc* (name | string) ","?)* doc* "}"
//! input       = "input" name ":" type_expr ("=" expr)?
//! output      = "output" name (":" type_expr)? "=" expr
//! server      = "server" name block          (model, test alike)
//! link        = "link" string ":" type_expr "=" any_string
//! tool        = "tool" name params ("->" type_expr)? "from" name block?   (reader alike)
//! node        = ("node" | "think" | "agent" | "act" | "gate") name params ("->" type_expr)? block
//! serve       = "serve" "{" (doc* (serve_entry | serve_prompt | serve_tool) ","?)* doc* "}"
//! serve_entry = ("resource" | "template") any_string block
//! serve_prompt = "prompt" name params block
//! serve_tool  = "tool" block
//! params      = "(" (doc* param ("," doc* param)* ","?)? doc* ")"
//! param       = name ":" type_expr ("as" string)? ("=" expr)?
//! block       = "{" (doc* name ("=" expr | block) ","?)* doc* "}"
//!
//! type_expr   = type_term ("|" type_term)* "?"?       (`?` makes the whole union optional)
//! type_term   = type_atom ("[" "]")*
//! type_atom   = "(" type_expr ")" | record_type | string | name "<" type_expr ">"
//!             | name ("." name)?
//! record_type = "{" (doc* name ":" type_expr ","?)* doc* "}"
//!
//! expr        = unary (infix unary)*      (folded by precedence: `??`, comparisons, `&&`, `||`)
//! unary       = "!"* primary postfix*
//! infix       = "??" | "||" | "&&" | "==" | "!=" | "<=" | ">=" | "<" | ">"
//! postfix     = "." name | "[" "*" "]" "." name | "(" (arg ("," arg)* ","?)? ")"
//! arg         = (name ":")? expr
//! primary     = any_string | number | "true" | "false" | "null" | record | list
//!             | "(" expr ")" | name
//! record      = "{" ((name | string) ":" expr ","?)* "}"
//! list        = "[" (expr ","?)* "]"
//! ```
//!
//! Tokens: a name is `[A-Za-z_][A-Za-z0-9_]*`; keywords are contextual (a declaration
//! keyword is one only where a declaration starts, so `type`, `from` and `input` stay valid
//! field names); a number is `-`? a digit, then letters, digits, `_` and `.` before a digit
//! (the literal's decoder decides int, float, size or duration, and reports a bad one); a
//! string is `"` ... `"` on one line with `\` escapes; a raw string is `#`ⁿ`"` ... `"#`ⁿ;
//! a doc comment is a `///` line (not `////`). Between tokens go spaces, tabs, line ends
//! and `//` comments, which the lexer's pre-pass keeps for `fmt`.
//!
//! A piece either parses whole or fails: then the furthest point any token was looked for,
//! and what was looked for there, make the syntax error (see [`Failure`]).

use super::ast::*;
use super::literal::{self, Number};
use pipec_base::nesting::MAX_NESTING;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::{INVALID_LITERAL, NESTING_TOO_DEEP};

/// What a piece parsed to.
pub(crate) struct Tree {
    pub(crate) items: Vec<Item>,
    pub(crate) stray_docs: Vec<Doc>,
    /// Bad literals and expressions nested too deep, found while parsing.
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Why a piece did not parse: the furthest offset (in the file) where a token was looked
/// for and not found, and what was looked for there, in words.
pub(crate) struct Failure {
    pub(crate) at: usize,
    pub(crate) expected: Vec<&'static str>,
}

/// Parses the piece `text[start..end]`.
pub(crate) fn parse_piece(
    file: FileId,
    text: &str,
    start: usize,
    end: usize,
) -> Result<Tree, Failure> {
    let mut p = Parser {
        file,
        text,
        b: &text.as_bytes()[..end],
        pos: start,
        last: start,
        far: start,
        wants: 0,
        diagnostics: Vec::new(),
        nesting: 0,
        too_deep: false,
    };
    match p.piece() {
        Ok((items, stray_docs)) => Ok(Tree {
            items,
            stray_docs,
            diagnostics: p.diagnostics,
        }),
        Err(Fail) => Err(Failure {
            at: p.far,
            expected: WANTS
                .iter()
                .enumerate()
                .filter(|(bit, _)| p.wants & (1 << bit) != 0)
                .map(|(_, words)| *words)
                .collect(),
        }),
    }
}

// What can be looked for, one bit each, and how an error says it.
const DECLARATION: u32 = 1 << 0;
const NAME: u32 = 1 << 1;
const VALUE: u32 = 1 << 2;
const TYPE: u32 = 1 << 3;
const STRING: u32 = 1 << 4;
const OPERATOR: u32 = 1 << 5;
const SERVE_ITEM: u32 = 1 << 6;
const EQ: u32 = 1 << 7;
const LBRACE: u32 = 1 << 8;
const RBRACE: u32 = 1 << 9;
const LPAREN: u32 = 1 << 10;
const RPAREN: u32 = 1 << 11;
const RBRACKET: u32 = 1 << 12;
const COLON: u32 = 1 << 13;
const COMMA: u32 = 1 << 14;
const ARROW: u32 = 1 << 15;
const BAR: u32 = 1 << 16;
const QUESTION: u32 = 1 << 17;
const LIST: u32 = 1 << 18;
const GT: u32 = 1 << 19;
const AS: u32 = 1 << 20;
const FROM: u32 = 1 << 21;
const DOT: u32 = 1 << 22;

const WANTS: [&str; 23] = [
    "a declaration",
    "a name",
    "a value",
    "a type",
    "a string",
    "an operator",
    "`resource`, `template`, `prompt`, `tool`",
    "`=`",
    "`{`",
    "`}`",
    "`(`",
    "`)`",
    "`]`",
    "`:`",
    "`,`",
    "`->`",
    "`|`",
    "`?`",
    "`[]`",
    "`>`",
    "`as`",
    "`from`",
    "`.`",
];

/// A piece that does not parse; what went wrong is in the parser's furthest miss.
struct Fail;

type R<T> = Result<T, Fail>;

struct Parser<'t> {
    file: FileId,
    text: &'t str,
    /// The file's bytes up to the piece's end.
    b: &'t [u8],
    pos: usize,
    /// The end of the last token taken: where a construct that ended with it ends.
    last: usize,
    /// The furthest offset where a token was looked for and not found, and what was.
    far: usize,
    wants: u32,
    diagnostics: Vec<Diagnostic>,
    /// How many expressions (or types) the parser is inside; 0 between them.
    nesting: usize,
    /// Whether the expression (or type) being built nests past the limit: its inner
    /// part was replaced by an error, and the outermost one is reported and replaced.
    too_deep: bool,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

impl<'t> Parser<'t> {
    // ------------------------------------------------------------ tokens

    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    /// Whether a doc comment starts at `i`: `///` not followed by another `/`.
    fn doc_at(&self, i: usize) -> bool {
        self.b[i..].starts_with(b"///") && self.at(i + 3) != b'/'
    }

    /// Skips spaces, line ends and `//` comments (not doc comments).
    fn skip(&mut self) {
        loop {
            match self.at(self.pos) {
                b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                b'/' if self.at(self.pos + 1) == b'/' && !self.doc_at(self.pos) => {
                    self.pos += self.b[self.pos..]
                        .iter()
                        .position(|c| *c == b'\n')
                        .unwrap_or(self.b.len() - self.pos);
                }
                _ => return,
            }
        }
    }

    /// Notes that `want` was looked for at the current offset and not found.
    fn miss(&mut self, want: u32) {
        if self.pos > self.far {
            self.far = self.pos;
            self.wants = want;
        } else if self.pos == self.far {
            self.wants |= want;
        }
    }

    fn take(&mut self, len: usize) -> Span {
        let start = self.pos;
        self.pos += len;
        self.last = self.pos;
        Span::new(start as u32, self.pos as u32)
    }

    /// Whether the next token starts with `lit`, without taking it or noting a miss.
    fn sees(&mut self, lit: &[u8]) -> bool {
        self.skip();
        self.b[self.pos..].starts_with(lit)
    }

    /// Takes `lit` if it comes next, noting no miss if it does not.
    fn quietly(&mut self, lit: &[u8]) -> bool {
        let seen = self.sees(lit);
        if seen {
            self.take(lit.len());
        }
        seen
    }

    /// Takes `lit` if it comes next, else notes `want` as missed.
    fn eat(&mut self, lit: &[u8], want: u32) -> Option<Span> {
        if self.sees(lit) {
            Some(self.take(lit.len()))
        } else {
            self.miss(want);
            None
        }
    }

    fn expect(&mut self, lit: &[u8], want: u32) -> R<Span> {
        self.eat(lit, want).ok_or(Fail)
    }

    /// The name that comes next, if one does (not taken).
    fn word(&mut self) -> Option<&'t str> {
        self.skip();
        if !is_ident_start(self.at(self.pos)) {
            return None;
        }
        let len = self.b[self.pos..]
            .iter()
            .position(|c| !is_ident_char(*c))
            .unwrap_or(self.b.len() - self.pos);
        Some(&self.text[self.pos..self.pos + len])
    }

    fn ident(&mut self) -> R<Ident> {
        match self.word() {
            Some(w) => {
                let name = w.to_string();
                let span = self.take(name.len());
                Ok(Ident { name, span })
            }
            None => {
                self.miss(NAME);
                Err(Fail)
            }
        }
    }

    /// Takes the keyword `kw` if it comes next as a whole word, else notes `want`.
    fn keyword(&mut self, kw: &str, want: u32) -> Option<Span> {
        if self.word() == Some(kw) {
            Some(self.take(kw.len()))
        } else {
            self.miss(want);
            None
        }
    }

    /// A run of doc comments, joined (one leading space of each line dropped).
    fn docs(&mut self) -> Option<Doc> {
        let mut doc: Option<Doc> = None;
        loop {
            self.skip();
            if !self.doc_at(self.pos) {
                return doc;
            }
            let len = self.b[self.pos..]
                .iter()
                .position(|c| *c == b'\n')
                .unwrap_or(self.b.len() - self.pos);
            let line = &self.text[self.pos + 3..self.pos + len];
            let span = self.take(len);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let line = line.strip_prefix(' ').unwrap_or(line);
            match &mut doc {
                Some(d) => {
                    d.text.push('\n');
                    d.text.push_str(line);
                    d.span = d.span.to(span);
                }
                None => {
                    doc = Some(Doc {
                        text: line.to_string(),
                        span,
                    })
                }
            }
        }
    }

    /// A `"..."` string, if one comes next (else notes `want`). Its escapes are decoded
    /// here; a bad one is reported and the string kept as written.
    fn string(&mut self, want: u32) -> R<StrLit> {
        self.skip();
        let start = self.pos;
        if self.at(start) != b'"' {
            self.miss(want);
            return Err(Fail);
        }
        let mut i = start + 1;
        loop {
            match self.b.get(i) {
                Some(b'"') => break,
                Some(b'\\') if !matches!(self.b.get(i + 1), None | Some(b'\n')) => i += 2,
                None | Some(b'\n' | b'\\') => {
                    self.miss(want);
                    return Err(Fail);
                }
                Some(_) => i += 1,
            }
        }
        let body = &self.text[start + 1..i];
        let span = self.take(i + 1 - start);
        let body_start = span.start + 1;
        Ok(match literal::decode_string(body) {
            Ok(decoded) => StrLit {
                value: decoded.value,
                span,
                raw_hashes: None,
                map: shifted(decoded.map, body_start),
            },
            Err(bad) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &INVALID_LITERAL,
                        self.file,
                        Span::new(body_start + bad.start as u32, body_start + bad.end as u32),
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
        })
    }

    /// A `"..."` or `#"..."#` string, if one comes next (else notes `want`).
    fn any_string(&mut self, want: u32) -> R<StrLit> {
        self.skip();
        if self.at(self.pos) != b'#' {
            return self.string(want);
        }
        let start = self.pos;
        let hashes = self.b[start..].iter().take_while(|c| **c == b'#').count();
        let open = start + hashes;
        if self.at(open) != b'"' {
            self.miss(want);
            return Err(Fail);
        }
        let body_start = open + 1;
        let closing = |i: usize| {
            self.at(i) == b'"'
                && self.b.len() >= i + 1 + hashes
                && self.b[i + 1..i + 1 + hashes].iter().all(|c| *c == b'#')
        };
        let Some(body_end) = (body_start..self.b.len()).find(|i| closing(*i)) else {
            self.miss(want);
            return Err(Fail);
        };
        let body = &self.text[body_start..body_end];
        let span = self.take(body_end + 1 + hashes - start);
        let decoded = literal::dedent_raw(body);
        Ok(StrLit {
            value: decoded.value,
            span,
            raw_hashes: Some(hashes),
            map: shifted(decoded.map, body_start as u32),
        })
    }

    // ------------------------------------------------------------ declarations

    fn piece(&mut self) -> R<(Vec<Item>, Vec<Doc>)> {
        // A piece is cut at a top-level declaration, so it holds one (a first push
        // would make room for four, ~1 KB a piece that is copied out and freed).
        let mut items = Vec::with_capacity(1);
        loop {
            let doc = self.docs();
            self.skip();
            if self.pos >= self.b.len() {
                return Ok((items, doc.into_iter().collect()));
            }
            items.push(self.item(doc)?);
        }
    }

    fn item(&mut self, doc: Option<Doc>) -> R<Item> {
        let Some(word) = self.word() else {
            self.miss(DECLARATION);
            return Err(Fail);
        };
        let start = self.pos as u32;
        let kind = match word {
            "import" => {
                self.take(word.len());
                let path = self.string(STRING)?;
                let alias = match self.keyword("as", AS) {
                    Some(_) => Some(self.ident()?),
                    None => None,
                };
                ItemKind::Import(Import { path, alias })
            }
            "type" => {
                self.take(word.len());
                let name = self.ident()?;
                let body = if self.sees(b"{") {
                    TypeDeclBody::Record(self.record_type()?)
                } else {
                    self.expect(b"=", EQ | LBRACE)?;
                    TypeDeclBody::Alias(self.type_expr()?)
                };
                ItemKind::Type(TypeDecl { name, body })
            }
            "enum" => {
                self.take(word.len());
                ItemKind::Enum(self.enum_body()?)
            }
            "input" => {
                self.take(word.len());
                let name = self.ident()?;
                self.expect(b":", COLON)?;
                let ty = self.type_expr()?;
                let default = match self.eat(b"=", EQ) {
                    Some(_) => Some(self.expr()?),
                    None => None,
                };
                ItemKind::Input(InputDecl { name, ty, default })
            }
            "output" => {
                self.take(word.len());
                let name = self.ident()?;
                let ty = match self.eat(b":", COLON) {
                    Some(_) => Some(self.type_expr()?),
                    None => None,
                };
                self.expect(b"=", EQ)?;
                let value = self.expr()?;
                ItemKind::Output(OutputDecl { name, ty, value })
            }
            "server" | "model" | "test" => {
                let keyword = word.len();
                let which = word.as_bytes()[0];
                self.take(keyword);
                let name = self.ident()?;
                let body = self.block()?;
                let decl = BlockDecl { name, body };
                match which {
                    b's' => ItemKind::Server(decl),
                    b'm' => ItemKind::Model(decl),
                    _ => ItemKind::Test(decl),
                }
            }
            "link" => {
                self.take(word.len());
                let kind = self.string(STRING)?;
                self.expect(b":", COLON)?;
                let ty = self.type_expr()?;
                self.expect(b"=", EQ)?;
                let template = self.any_string(STRING)?;
                ItemKind::Link(LinkDecl { kind, ty, template })
            }
            "tool" | "reader" => {
                let tool = word == "tool";
                self.take(word.len());
                let name = self.ident()?;
                let params = self.params()?;
                let returns = self.returns()?;
                if self.keyword("from", FROM).is_none() {
                    return Err(Fail);
                }
                let server = self.ident()?;
                let body = if self.sees(b"{") {
                    Some(self.block()?)
                } else {
                    None
                };
                let decl = ToolDecl {
                    name,
                    params,
                    returns,
                    server,
                    body,
                };
                if tool {
                    ItemKind::Tool(decl)
                } else {
                    ItemKind::Reader(decl)
                }
            }
            "serve" => {
                self.take(word.len());
                ItemKind::Serve(self.serve_body()?)
            }
            _ => match NodeKind::from_keyword(word) {
                Some(kind) => {
                    let kind_span = self.take(word.len());
                    let name = self.ident()?;
                    let params = self.params()?;
                    let returns = self.returns()?;
                    let body = self.block()?;
                    ItemKind::Node(NodeDecl {
                        kind,
                        kind_span,
                        name,
                        params,
                        returns,
                        body,
                    })
                }
                None => {
                    self.miss(DECLARATION);
                    return Err(Fail);
                }
            },
        };
        Ok(Item {
            doc,
            kind,
            span: Span::new(start, self.last as u32),
        })
    }

    fn enum_body(&mut self) -> R<EnumDecl> {
        let name = self.ident()?;
        self.expect(b"{", LBRACE)?;
        let mut variants = Vec::new();
        loop {
            let doc = self.docs();
            if self.eat(b"}", RBRACE).is_some() {
                return Ok(EnumDecl {
                    name,
                    variants: fit(variants),
                    stray_docs: doc.into_iter().collect(),
                });
            }
            let variant = if self.sees(b"\"") {
                let s = self.string(STRING)?;
                Variant {
                    doc,
                    name: s.value,
                    quoted: true,
                    span: s.span,
                }
            } else if self.word().is_some() {
                let id = self.ident()?;
                Variant {
                    doc,
                    name: id.name,
                    quoted: false,
                    span: id.span,
                }
            } else {
                self.miss(NAME | STRING);
                return Err(Fail);
            };
            variants.push(variant);
            self.eat(b",", COMMA);
        }
    }

    fn serve_body(&mut self) -> R<ServeDecl> {
        self.expect(b"{", LBRACE)?;
        let mut decl = ServeDecl {
            entries: Vec::new(),
            prompts: Vec::new(),
            tools: Vec::new(),
            stray_docs: Vec::new(),
        };
        loop {
            let doc = self.docs();
            if self.eat(b"}", RBRACE).is_some() {
                decl.stray_docs = doc.into_iter().collect();
                return Ok(decl);
            }
            let start = self.pos as u32;
            match self.word() {
                Some(w @ ("resource" | "template")) => {
                    let kind = if w == "resource" {
                        ServeEntryKind::Resource
                    } else {
                        ServeEntryKind::Template
                    };
                    self.take(w.len());
                    let uri = self.any_string(STRING)?;
                    let body = self.block()?;
                    decl.entries.push(ServeEntry {
                        doc,
                        kind,
                        uri,
                        body,
                        span: Span::new(start, self.last as u32),
                    });
                }
                Some("prompt") => {
                    self.take("prompt".len());
                    let name = self.ident()?;
                    let params = self.params()?;
                    let body = self.block()?;
                    decl.prompts.push(ServePrompt {
                        doc,
                        name,
                        params,
                        body,
                        span: Span::new(start, self.last as u32),
                    });
                }
                Some("tool") => {
                    let keyword = self.take("tool".len());
                    let body = self.block()?;
                    decl.tools.push(ServeTool {
                        doc,
                        keyword,
                        body,
                        span: Span::new(start, self.last as u32),
                    });
                }
                _ => {
                    self.miss(SERVE_ITEM);
                    return Err(Fail);
                }
            }
            self.eat(b",", COMMA);
        }
    }

    fn returns(&mut self) -> R<Option<TypeExpr>> {
        match self.eat(b"->", ARROW) {
            Some(_) => Ok(Some(self.type_expr()?)),
            None => Ok(None),
        }
    }

    fn params(&mut self) -> R<Params> {
        let open = self.expect(b"(", LPAREN)?;
        let mut params = Vec::new();
        let mut doc = self.docs();
        if self.eat(b")", RPAREN).is_none() {
            loop {
                params.push(self.param(doc)?);
                if self.eat(b",", COMMA).is_some() {
                    doc = self.docs();
                    if self.eat(b")", RPAREN).is_some() {
                        break;
                    }
                } else {
                    doc = self.docs();
                    self.expect(b")", RPAREN)?;
                    break;
                }
            }
        }
        Ok(Params {
            params: fit(params),
            stray_docs: doc.into_iter().collect(),
            span: Span::new(open.start, self.last as u32),
        })
    }

    fn param(&mut self, doc: Option<Doc>) -> R<Param> {
        let name = self.ident()?;
        self.expect(b":", COLON)?;
        let ty = self.type_expr()?;
        let wire_name = match self.keyword("as", AS) {
            Some(_) => Some(self.string(STRING)?),
            None => None,
        };
        let value = match self.eat(b"=", EQ) {
            Some(_) => Some(self.expr()?),
            None => None,
        };
        Ok(Param {
            doc,
            span: Span::new(name.span.start, self.last as u32),
            name,
            ty,
            wire_name,
            value,
        })
    }

    fn block(&mut self) -> R<Block> {
        let open = self.expect(b"{", LBRACE)?;
        let mut settings = Vec::new();
        loop {
            let doc = self.docs();
            if self.eat(b"}", RBRACE).is_some() {
                return Ok(Block {
                    settings: fit(settings),
                    stray_docs: doc.into_iter().collect(),
                    span: Span::new(open.start, self.last as u32),
                });
            }
            let name = self.ident()?;
            let value = if self.eat(b"=", EQ | LBRACE).is_some() {
                SettingValue::Expr(self.expr()?)
            } else if self.sees(b"{") {
                SettingValue::Block(self.block()?)
            } else {
                return Err(Fail);
            };
            settings.push(Setting {
                doc,
                span: Span::new(name.span.start, self.last as u32),
                name,
                value,
            });
            self.eat(b",", COMMA);
        }
    }

    // ------------------------------------------------------------ types

    fn type_expr(&mut self) -> R<TypeExpr> {
        self.nesting += 1;
        let ty = self.union();
        self.nesting -= 1;
        let ty = ty?;
        Ok(self.outermost_type(ty))
    }

    fn union(&mut self) -> R<TypeExpr> {
        self.skip();
        let start = self.pos as u32;
        let mut terms = vec![self.type_term()?];
        while self.eat(b"|", BAR).is_some() {
            terms.push(self.type_term()?);
        }
        let optional = self.eat(b"?", QUESTION).is_some();
        let base = if terms.len() == 1 {
            terms.pop().ok_or(Fail)?
        } else {
            let span = terms[0].span.to(terms[terms.len() - 1].span);
            self.bounded_type(TypeExpr {
                kind: TypeExprKind::Union(terms),
                span,
            })
        };
        Ok(if optional {
            self.bounded_type(TypeExpr {
                kind: TypeExprKind::Optional(Box::new(base)),
                span: Span::new(start, self.last as u32),
            })
        } else {
            base
        })
    }

    fn type_term(&mut self) -> R<TypeExpr> {
        let mut ty = self.type_atom()?;
        while self.eat(b"[", LIST).is_some() {
            let close = self.expect(b"]", RBRACKET)?;
            ty = self.bounded_type(TypeExpr {
                span: Span::new(ty.span.start, close.end),
                kind: TypeExprKind::List(Box::new(ty)),
            });
        }
        Ok(ty)
    }

    fn type_atom(&mut self) -> R<TypeExpr> {
        self.skip();
        let start = self.pos as u32;
        let kind = match self.at(self.pos) {
            b'(' => {
                self.take(1);
                let inner = self.type_expr()?;
                self.expect(b")", RPAREN)?;
                TypeExprKind::Paren(Box::new(inner))
            }
            b'{' => TypeExprKind::Record(self.record_type()?),
            b'"' => TypeExprKind::Literal(self.string(TYPE)?),
            c if is_ident_start(c) => {
                let name = self.ident()?;
                if self.quietly(b"<") {
                    let arg = self.type_expr()?;
                    self.expect(b">", GT)?;
                    TypeExprKind::Generic(name, Box::new(arg))
                } else if self.quietly(b".") {
                    let member = self.ident()?;
                    TypeExprKind::Name(vec![name, member])
                } else {
                    TypeExprKind::Name(vec![name])
                }
            }
            _ => {
                self.miss(TYPE);
                return Err(Fail);
            }
        };
        Ok(self.bounded_type(TypeExpr {
            kind,
            span: Span::new(start, self.last as u32),
        }))
    }

    fn record_type(&mut self) -> R<RecordType> {
        let open = self.expect(b"{", LBRACE)?;
        let mut fields = Vec::new();
        loop {
            let doc = self.docs();
            if self.eat(b"}", RBRACE).is_some() {
                return Ok(RecordType {
                    fields: fit(fields),
                    stray_docs: doc.into_iter().collect(),
                    span: Span::new(open.start, self.last as u32),
                });
            }
            let name = self.ident()?;
            self.expect(b":", COLON)?;
            let ty = self.type_expr()?;
            fields.push(Field {
                doc,
                span: Span::new(name.span.start, self.last as u32),
                name,
                ty,
            });
            self.eat(b",", COMMA);
        }
    }

    // ------------------------------------------------------------ expressions

    fn expr(&mut self) -> R<Expr> {
        self.nesting += 1;
        let e = self.fold();
        self.nesting -= 1;
        let e = e?;
        Ok(self.outermost_expr(e))
    }

    /// Reads `unary (infix unary)*` and folds it by operator precedence, with explicit
    /// stacks rather than recursion, so that a long chain of operators cannot overflow
    /// the stack before its depth is measured. Postfix operators bind tightest, then
    /// `!`, then `??` (right-associative), the comparisons, `&&` and `||` (all
    /// left-associative).
    fn fold(&mut self) -> R<Expr> {
        let mut operands: Vec<Expr> = Vec::new();
        let mut operators: Vec<BinOp> = Vec::new();
        loop {
            operands.push(self.unary()?);
            let Some(op) = self.infix() else {
                break;
            };
            while operators.last().is_some_and(|top| {
                precedence(*top) > precedence(op)
                    || (precedence(*top) == precedence(op) && op != BinOp::Coalesce)
            }) {
                self.reduce(&mut operands, &mut operators);
            }
            operators.push(op);
        }
        while !operators.is_empty() {
            self.reduce(&mut operands, &mut operators);
        }
        operands.pop().ok_or(Fail)
    }

    fn infix(&mut self) -> Option<BinOp> {
        self.skip();
        let rest = &self.b[self.pos..];
        let (op, len) = match rest {
            [b'?', b'?', ..] => (BinOp::Coalesce, 2),
            [b'|', b'|', ..] => (BinOp::Or, 2),
            [b'&', b'&', ..] => (BinOp::And, 2),
            [b'=', b'=', ..] => (BinOp::Eq, 2),
            [b'!', b'=', ..] => (BinOp::Ne, 2),
            [b'<', b'=', ..] => (BinOp::Le, 2),
            [b'>', b'=', ..] => (BinOp::Ge, 2),
            [b'<', ..] => (BinOp::Lt, 1),
            [b'>', ..] => (BinOp::Gt, 1),
            _ => {
                self.miss(OPERATOR);
                return None;
            }
        };
        self.take(len);
        Some(op)
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

    /// An operand: the `!`s written before it, the value, and what follows it.
    fn unary(&mut self) -> R<Expr> {
        let mut nots = Vec::new();
        while self.sees(b"!") {
            nots.push(self.take(1));
        }
        let mut e = self.primary()?;
        while let Some(suffix) = self.suffix()? {
            let span = Span::new(e.span.start, self.last as u32);
            let kind = match suffix {
                Suffix::Field(name) => ExprKind::Field(Box::new(e), name),
                Suffix::Splat(name) => ExprKind::Splat(Box::new(e), name),
                Suffix::Call(args) => ExprKind::Call(Box::new(e), args),
            };
            e = self.bounded_expr(Expr { kind, span });
        }
        while let Some(not) = nots.pop() {
            e = self.bounded_expr(Expr {
                span: not.to(e.span),
                kind: ExprKind::Not(Box::new(e)),
            });
        }
        Ok(e)
    }

    /// What follows a value: `.name`, `[*].name` or call arguments. A `[` that does not
    /// start `[*].name` is left alone (in a list it starts the next item).
    fn suffix(&mut self) -> R<Option<Suffix>> {
        self.skip();
        let (pos, last) = (self.pos, self.last);
        let found = match self.at(self.pos) {
            b'.' => {
                self.take(1);
                self.ident().ok().map(Suffix::Field)
            }
            b'[' => {
                self.take(1);
                // Past `[*` nothing else could be meant: what is missing after it is told.
                if self.quietly(b"*")
                    && self.eat(b"]", RBRACKET).is_some()
                    && self.eat(b".", DOT).is_some()
                {
                    self.ident().ok().map(Suffix::Splat)
                } else {
                    None
                }
            }
            b'(' => Some(Suffix::Call(self.call_args()?)),
            _ => None,
        };
        if found.is_none() {
            (self.pos, self.last) = (pos, last);
        }
        Ok(found)
    }

    fn call_args(&mut self) -> R<Vec<Arg>> {
        self.expect(b"(", LPAREN)?;
        let mut args = Vec::new();
        if self.eat(b")", RPAREN).is_some() {
            return Ok(args);
        }
        loop {
            args.push(self.arg()?);
            if self.eat(b",", COMMA).is_some() {
                if self.eat(b")", RPAREN).is_some() {
                    return Ok(fit(args));
                }
            } else {
                self.expect(b")", RPAREN)?;
                return Ok(fit(args));
            }
        }
    }

    fn arg(&mut self) -> R<Arg> {
        self.skip();
        let start = self.pos as u32;
        let (pos, last) = (self.pos, self.last);
        let mut name = None;
        if self.word().is_some() {
            let id = self.ident()?;
            if self.quietly(b":") {
                name = Some(id);
            } else {
                (self.pos, self.last) = (pos, last);
            }
        }
        let value = self.expr()?;
        Ok(Arg {
            name,
            value,
            span: Span::new(start, self.last as u32),
        })
    }

    fn primary(&mut self) -> R<Expr> {
        self.skip();
        let start = self.pos;
        let kind = match self.at(start) {
            b'"' | b'#' => ExprKind::Str(self.any_string(VALUE)?),
            b'-' | b'0'..=b'9' => {
                let digits = start + usize::from(self.at(start) == b'-');
                if !self.at(digits).is_ascii_digit() {
                    self.miss(VALUE);
                    return Err(Fail);
                }
                let mut end = digits + 1;
                loop {
                    let c = self.at(end);
                    if is_ident_char(c) {
                        end += 1;
                    } else if c == b'.' && self.at(end + 1).is_ascii_digit() {
                        end += 2;
                    } else {
                        break;
                    }
                }
                let span = self.take(end - start);
                self.number(&self.text[start..end], span)
            }
            b'{' => self.record_lit()?,
            b'[' => {
                self.take(1);
                let mut items = Vec::new();
                while self.eat(b"]", RBRACKET).is_none() {
                    items.push(self.expr()?);
                    self.eat(b",", COMMA);
                }
                ExprKind::List(fit(items))
            }
            b'(' => {
                self.take(1);
                let inner = self.expr()?;
                self.expect(b")", RPAREN)?;
                ExprKind::Paren(Box::new(inner))
            }
            c if is_ident_start(c) => {
                let id = self.ident()?;
                match id.name.as_str() {
                    "true" => ExprKind::Bool(true),
                    "false" => ExprKind::Bool(false),
                    "null" => ExprKind::Null,
                    _ => ExprKind::Name(id),
                }
            }
            _ => {
                self.miss(VALUE);
                return Err(Fail);
            }
        };
        Ok(self.bounded_expr(Expr {
            kind,
            span: Span::new(start as u32, self.last as u32),
        }))
    }

    fn record_lit(&mut self) -> R<ExprKind> {
        self.expect(b"{", LBRACE)?;
        let mut entries = Vec::new();
        while self.eat(b"}", RBRACE).is_none() {
            let (key, quoted) = if self.sees(b"\"") {
                let s = self.string(STRING)?;
                (
                    Ident {
                        name: s.value,
                        span: s.span,
                    },
                    true,
                )
            } else if self.word().is_some() {
                (self.ident()?, false)
            } else {
                self.miss(NAME | STRING);
                return Err(Fail);
            };
            self.expect(b":", COLON)?;
            let value = self.expr()?;
            entries.push(RecordEntry {
                span: Span::new(key.span.start, self.last as u32),
                key,
                quoted,
                value,
            });
            self.eat(b",", COMMA);
        }
        Ok(ExprKind::Record(fit(entries)))
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

    // ------------------------------------------------------------ nesting

    /// An expression nested past the limit becomes an error; the outermost expression
    /// around it is reported (see [`Parser::outermost_expr`]).
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
}

/// What follows a value.
enum Suffix {
    Field(Ident),
    Splat(Ident),
    Call(Vec<Arg>),
}

/// Shifts a decoded string's offset map from the string's body to the file.
/// `v` without its spare capacity: a tree lives as long as the check, and a vector grown
/// one push at a time holds room for four (a node's parameters, a block's settings).
fn fit<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

fn shifted(map: Vec<(u32, u32)>, base: u32) -> Vec<(u32, u32)> {
    map.into_iter().map(|(v, s)| (v, s + base)).collect()
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
/// operator around it. The parser never makes one deeper than [`MAX_NESTING`] + 1, so
/// this recursion is bounded.
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

/// The type an error stands for: `json`, which anything is.
fn error_type(span: Span) -> TypeExpr {
    TypeExpr {
        kind: TypeExprKind::Name(vec![Ident {
            name: "json".into(),
            span,
        }]),
        span,
    }
}
