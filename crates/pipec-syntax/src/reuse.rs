//! Reusing the parse of unchanged pieces, for a caller that parses the same file over and
//! over with small edits (the language server).
//!
//! A piece (one top-level declaration, see the lexer's cut points) parses to the same
//! tree wherever it sits in the file, its spans moved by the distance it moved: nothing in
//! a clean piece's parse reads text outside it. So a piece whose text is unchanged since
//! the last parse of its file is taken from the last parse and shifted, rather than parsed
//! again. Only pieces that parsed without a diagnostic are kept; a failing piece is parsed
//! each time, since its message may read the text around it. Each file keeps only the
//! pieces of its last parse, so memory follows the file, not the number of edits.
//!
//! Off unless [`reuse_unchanged_pieces`] turns it on: a one-shot `pipec check` parses each
//! file once and would only pay for the copies.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::ast::*;
use pipec_base::source::{FileId, Span};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// A clean piece's parse: where it started, its declarations and stray docs.
#[derive(Clone)]
pub(crate) struct CleanPiece {
    pub base: u32,
    pub items: Vec<Item>,
    pub stray_docs: Vec<Doc>,
}

/// Per file, the clean pieces of its last parse, by text.
static LAST: Mutex<Option<HashMap<FileId, HashMap<String, CleanPiece>>>> = Mutex::new(None);

/// Turns reuse on (for the whole process).
pub fn reuse_unchanged_pieces(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
    if !on && let Ok(mut last) = LAST.lock() {
        *last = None;
    }
}

pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The last parse of each piece text of `file` that is still in the file, taken out.
pub(crate) fn take(file: FileId) -> HashMap<String, CleanPiece> {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    last.get_or_insert_with(HashMap::new)
        .remove(&file)
        .unwrap_or_default()
}

/// Keeps this parse's clean pieces for the next parse of `file`.
pub(crate) fn keep(file: FileId, pieces: HashMap<String, CleanPiece>) {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    last.get_or_insert_with(HashMap::new).insert(file, pieces);
}

/// The piece's declarations as they are at `base`.
pub(crate) fn moved(piece: &CleanPiece, base: u32) -> (Vec<Item>, Vec<Doc>) {
    let mut items = piece.items.clone();
    let mut docs = piece.stray_docs.clone();
    if base != piece.base {
        let by = base as i64 - piece.base as i64;
        let mut s = Shift(by);
        for i in &mut items {
            s.item(i);
        }
        for d in &mut docs {
            s.doc(d);
        }
    }
    (items, docs)
}

struct Shift(i64);

impl Shift {
    fn at(&self, o: u32) -> u32 {
        (o as i64 + self.0).max(0) as u32
    }
    fn span(&self, s: &mut Span) {
        *s = Span::new(self.at(s.start), self.at(s.end));
    }
    fn ident(&self, i: &mut Ident) {
        self.span(&mut i.span);
    }
    fn doc(&self, d: &mut Doc) {
        self.span(&mut d.span);
    }
    fn docs(&self, d: &mut Option<Doc>) {
        if let Some(d) = d {
            self.doc(d);
        }
    }
    fn str(&self, s: &mut StrLit) {
        self.span(&mut s.span);
        for (_, file_offset) in &mut s.map {
            *file_offset = self.at(*file_offset);
        }
    }

    fn item(&mut self, i: &mut Item) {
        self.docs(&mut i.doc);
        self.span(&mut i.span);
        match &mut i.kind {
            ItemKind::Import(im) => {
                self.str(&mut im.path);
                if let Some(a) = &mut im.alias {
                    self.ident(a);
                }
            }
            ItemKind::Type(t) => {
                self.ident(&mut t.name);
                match &mut t.body {
                    TypeDeclBody::Record(r) => self.record(r),
                    TypeDeclBody::Alias(e) => self.ty(e),
                }
            }
            ItemKind::Enum(e) => {
                self.ident(&mut e.name);
                for v in &mut e.variants {
                    self.docs(&mut v.doc);
                    self.span(&mut v.span);
                }
                for d in &mut e.stray_docs {
                    self.doc(d);
                }
            }
            ItemKind::Input(d) => {
                self.ident(&mut d.name);
                self.ty(&mut d.ty);
                if let Some(e) = &mut d.default {
                    self.expr(e);
                }
            }
            ItemKind::Output(d) => {
                self.ident(&mut d.name);
                if let Some(t) = &mut d.ty {
                    self.ty(t);
                }
                self.expr(&mut d.value);
            }
            ItemKind::Server(b) | ItemKind::Model(b) | ItemKind::Test(b) => {
                self.ident(&mut b.name);
                self.block(&mut b.body);
            }
            ItemKind::Link(l) => {
                self.str(&mut l.kind);
                self.ty(&mut l.ty);
                self.str(&mut l.template);
            }
            ItemKind::Tool(t) | ItemKind::Reader(t) => {
                self.ident(&mut t.name);
                self.params(&mut t.params);
                if let Some(r) = &mut t.returns {
                    self.ty(r);
                }
                self.ident(&mut t.server);
                if let Some(b) = &mut t.body {
                    self.block(b);
                }
            }
            ItemKind::Node(n) => {
                self.span(&mut n.kind_span);
                self.ident(&mut n.name);
                self.params(&mut n.params);
                if let Some(r) = &mut n.returns {
                    self.ty(r);
                }
                self.block(&mut n.body);
            }
            ItemKind::Serve(s) => {
                for e in &mut s.entries {
                    self.docs(&mut e.doc);
                    self.str(&mut e.uri);
                    self.block(&mut e.body);
                    self.span(&mut e.span);
                }
                for e in &mut s.prompts {
                    self.docs(&mut e.doc);
                    self.ident(&mut e.name);
                    self.params(&mut e.params);
                    self.block(&mut e.body);
                    self.span(&mut e.span);
                }
                for e in &mut s.tools {
                    self.docs(&mut e.doc);
                    self.span(&mut e.keyword);
                    self.block(&mut e.body);
                    self.span(&mut e.span);
                }
                for d in &mut s.stray_docs {
                    self.doc(d);
                }
            }
        }
    }

    fn params(&mut self, p: &mut Params) {
        self.span(&mut p.span);
        for d in &mut p.stray_docs {
            self.doc(d);
        }
        for p in &mut p.params {
            self.docs(&mut p.doc);
            self.ident(&mut p.name);
            self.ty(&mut p.ty);
            if let Some(w) = &mut p.wire_name {
                self.str(w);
            }
            if let Some(v) = &mut p.value {
                self.expr(v);
            }
            self.span(&mut p.span);
        }
    }

    fn block(&mut self, b: &mut Block) {
        self.span(&mut b.span);
        for d in &mut b.stray_docs {
            self.doc(d);
        }
        for s in &mut b.settings {
            self.docs(&mut s.doc);
            self.ident(&mut s.name);
            match &mut s.value {
                SettingValue::Expr(e) => self.expr(e),
                SettingValue::Block(b) => self.block(b),
            }
            self.span(&mut s.span);
        }
    }

    fn record(&mut self, r: &mut RecordType) {
        self.span(&mut r.span);
        for d in &mut r.stray_docs {
            self.doc(d);
        }
        for f in &mut r.fields {
            self.docs(&mut f.doc);
            self.ident(&mut f.name);
            self.ty(&mut f.ty);
            self.span(&mut f.span);
        }
    }

    fn ty(&mut self, t: &mut TypeExpr) {
        self.span(&mut t.span);
        match &mut t.kind {
            TypeExprKind::Name(path) => {
                for i in path {
                    self.ident(i);
                }
            }
            TypeExprKind::Generic(name, inner) => {
                self.ident(name);
                self.ty(inner);
            }
            TypeExprKind::Record(r) => self.record(r),
            TypeExprKind::Literal(s) => self.str(s),
            TypeExprKind::List(inner)
            | TypeExprKind::Optional(inner)
            | TypeExprKind::Paren(inner) => self.ty(inner),
            TypeExprKind::Union(items) => {
                for i in items {
                    self.ty(i);
                }
            }
        }
    }

    fn expr(&mut self, e: &mut Expr) {
        self.span(&mut e.span);
        match &mut e.kind {
            ExprKind::Str(s) => self.str(s),
            ExprKind::Name(i) => self.ident(i),
            ExprKind::Field(base, i) | ExprKind::Splat(base, i) => {
                self.expr(base);
                self.ident(i);
            }
            ExprKind::Call(callee, args) => {
                self.expr(callee);
                for a in args {
                    if let Some(n) = &mut a.name {
                        self.ident(n);
                    }
                    self.expr(&mut a.value);
                    self.span(&mut a.span);
                }
            }
            ExprKind::Record(entries) => {
                for en in entries {
                    self.ident(&mut en.key);
                    self.expr(&mut en.value);
                    self.span(&mut en.span);
                }
            }
            ExprKind::List(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            ExprKind::Not(inner) | ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::Binary(_, a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Size(..)
            | ExprKind::Duration(..)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Error => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_parse_equals_a_fresh_one_after_edits_that_move_pieces() {
        reuse_unchanged_pieces(true);
        let text = crate::synth::pipeline(40);
        let file = FileId(90_001);
        let first = super::super::parse(file, &text);
        assert!(first.diagnostics.is_empty());
        // A line typed into a node near the top moves every piece after it; one broken
        // and fixed again, and a piece deleted.
        let at = text.find("  model = fast\n").unwrap_or(0);
        let edits = [
            format!("{}  // a note\n{}", &text[..at], &text[at..]),
            format!("{}  model = \n{}", &text[..at], &text[at..]),
            text.clone(),
            text.replacen("input key: string\n", "", 1),
        ];
        for (i, edited) in edits.iter().enumerate() {
            let reused = super::super::parse(file, edited);
            let fresh = super::super::parse(FileId(91_000 + i as u32), edited);
            assert_eq!(reused.file, fresh.file, "edit {i}");
            assert_eq!(
                reused.diagnostics.len(),
                fresh.diagnostics.len(),
                "edit {i}"
            );
            assert_eq!(reused.broken, fresh.broken, "edit {i}");
        }
    }
}
