//! A file's outline (document symbols) and its semantic tokens: every resolved name
//! coloured by what it names, and the comments.

use lsp_types::{
    DocumentSymbol, DocumentSymbolParams, DocumentSymbolResponse, SemanticToken,
    SemanticTokenModifier, SemanticTokenType, SemanticTokens, SemanticTokensLegend,
    SemanticTokensParams, SymbolKind,
};
use serde_json::Value;

use super::documents;
use super::index::{Sym, content_span};
use super::server::{Answer, Failure, known_path};
use super::workspace::Workspace;
use pipec_base::source::Span;
use pipec_check::hir::DeclRef;
use pipec_syntax::ast::{self, ItemKind, TypeDeclBody};
use pipec_syntax::lexer::CommentKind;

const TOKEN_TYPES: &[SemanticTokenType] = &[
    SemanticTokenType::TYPE,
    SemanticTokenType::FUNCTION,
    SemanticTokenType::METHOD,
    SemanticTokenType::VARIABLE,
    SemanticTokenType::PARAMETER,
    SemanticTokenType::PROPERTY,
    SemanticTokenType::ENUM_MEMBER,
    SemanticTokenType::NAMESPACE,
    SemanticTokenType::COMMENT,
];
const TYPE: u32 = 0;
const FUNCTION: u32 = 1;
const METHOD: u32 = 2;
const VARIABLE: u32 = 3;
const PARAMETER: u32 = 4;
const PROPERTY: u32 = 5;
const ENUM_MEMBER: u32 = 6;
const NAMESPACE: u32 = 7;
const COMMENT: u32 = 8;
const DECLARATION: u32 = 1;
const DOCUMENTATION: u32 = 2;

pub(crate) fn legend() -> SemanticTokensLegend {
    SemanticTokensLegend {
        token_types: TOKEN_TYPES.to_vec(),
        token_modifiers: vec![
            SemanticTokenModifier::DECLARATION,
            SemanticTokenModifier::DOCUMENTATION,
        ],
    }
}

fn to_value(v: impl serde::Serialize) -> Answer {
    serde_json::to_value(v).map_err(|e| Failure::invalid(e.to_string()))
}

pub(crate) fn semantic_tokens(ws: &mut Workspace, p: SemanticTokensParams) -> Answer {
    let path = known_path(ws, &p.text_document.uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(Value::Null);
    };
    let text = &snap.analysis.db.get(file).text;
    let mut raw: Vec<(Span, u32, u32)> = Vec::new();
    for o in snap.index().in_file(file) {
        let ty = match &o.sym {
            Sym::Decl(DeclRef::Type(_)) => TYPE,
            Sym::Decl(DeclRef::Node(_)) => FUNCTION,
            Sym::Decl(DeclRef::Tool(_)) => METHOD,
            Sym::Decl(DeclRef::Server(_) | DeclRef::Model(_)) => NAMESPACE,
            Sym::Decl(DeclRef::Input(_)) => VARIABLE,
            Sym::Decl(DeclRef::Link(_)) => ENUM_MEMBER,
            Sym::Field(..) => PROPERTY,
            Sym::Param(..) => PARAMETER,
            Sym::File(_) => continue,
        };
        raw.push((o.span, ty, if o.is_def { DECLARATION } else { 0 }));
    }
    if let Some(sf) = snap.analysis.syntax.iter().find(|s| s.file == file) {
        for c in &sf.comments {
            let modifiers = if c.kind == CommentKind::Line {
                0
            } else {
                DOCUMENTATION
            };
            raw.push((c.span, COMMENT, modifiers));
        }
    }
    raw.sort_by_key(|(s, _, _)| (s.start, s.end));
    let mut data = Vec::new();
    let (mut prev_line, mut prev_start) = (0u32, 0u32);
    let mut last_end = 0u32;
    for (span, ty, modifiers) in raw {
        if span.start < last_end || span.is_empty() {
            continue;
        }
        last_end = span.end;
        let start = documents::position(text, span.start);
        let end = documents::position(text, span.end);
        // A token lies on one line.
        let length = if end.line == start.line {
            end.character - start.character
        } else {
            let line_end = text[span.start as usize..].find('\n').unwrap_or(0);
            text[span.start as usize..span.start as usize + line_end]
                .encode_utf16()
                .count() as u32
        };
        let delta_line = start.line - prev_line;
        let delta_start = if delta_line == 0 {
            start.character - prev_start
        } else {
            start.character
        };
        data.push(SemanticToken {
            delta_line,
            delta_start,
            length,
            token_type: ty,
            token_modifiers_bitset: modifiers,
        });
        prev_line = start.line;
        prev_start = start.character;
    }
    to_value(SemanticTokens {
        result_id: None,
        data,
    })
}

pub(crate) fn document_symbols(ws: &mut Workspace, p: DocumentSymbolParams) -> Answer {
    let path = known_path(ws, &p.text_document.uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(Value::Null);
    };
    let text = &snap.analysis.db.get(file).text;
    let Some(sf) = snap.analysis.syntax.iter().find(|s| s.file == file) else {
        return to_value(DocumentSymbolResponse::Nested(Vec::new()));
    };
    let symbols: Vec<DocumentSymbol> = sf
        .ast
        .items
        .iter()
        .filter_map(|item| item_symbol(text, item))
        .collect();
    to_value(DocumentSymbolResponse::Nested(symbols))
}

#[allow(deprecated)]
fn symbol(
    text: &str,
    name: &str,
    detail: Option<String>,
    kind: SymbolKind,
    span: Span,
    name_span: Span,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    DocumentSymbol {
        name: if name.is_empty() {
            "?".into()
        } else {
            name.to_string()
        },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: documents::range(text, span),
        selection_range: documents::range(text, name_span),
        children: (!children.is_empty()).then_some(children),
    }
}

fn fields(text: &str, r: &ast::RecordType) -> Vec<DocumentSymbol> {
    r.fields
        .iter()
        .map(|f| {
            symbol(
                text,
                &f.name.name,
                Some(slice(text, f.ty.span)),
                SymbolKind::FIELD,
                f.span,
                f.name.span,
                Vec::new(),
            )
        })
        .collect()
}

fn slice(text: &str, span: Span) -> String {
    text.get(span.start as usize..span.end as usize)
        .unwrap_or("")
        .to_string()
}

fn item_symbol(text: &str, item: &ast::Item) -> Option<DocumentSymbol> {
    let kw = item.kind.keyword().to_string();
    Some(match &item.kind {
        ItemKind::Import(i) => symbol(
            text,
            &i.path.value,
            i.alias.as_ref().map(|a| format!("as {}", a.name)),
            SymbolKind::MODULE,
            item.span,
            i.path.span,
            Vec::new(),
        ),
        ItemKind::Type(t) => {
            let children = match &t.body {
                TypeDeclBody::Record(r) => fields(text, r),
                TypeDeclBody::Alias(_) => Vec::new(),
            };
            symbol(
                text,
                &t.name.name,
                Some(kw),
                SymbolKind::STRUCT,
                item.span,
                t.name.span,
                children,
            )
        }
        ItemKind::Enum(e) => {
            let children = e
                .variants
                .iter()
                .map(|v| {
                    symbol(
                        text,
                        &v.name,
                        None,
                        SymbolKind::ENUM_MEMBER,
                        v.span,
                        v.span,
                        Vec::new(),
                    )
                })
                .collect();
            symbol(
                text,
                &e.name.name,
                Some(kw),
                SymbolKind::ENUM,
                item.span,
                e.name.span,
                children,
            )
        }
        ItemKind::Input(i) => symbol(
            text,
            &i.name.name,
            Some(slice(text, i.ty.span)),
            SymbolKind::VARIABLE,
            item.span,
            i.name.span,
            Vec::new(),
        ),
        ItemKind::Output(o) => symbol(
            text,
            &o.name.name,
            Some(kw),
            SymbolKind::PROPERTY,
            item.span,
            o.name.span,
            Vec::new(),
        ),
        ItemKind::Server(b) | ItemKind::Model(b) => symbol(
            text,
            &b.name.name,
            Some(kw),
            SymbolKind::OBJECT,
            item.span,
            b.name.span,
            Vec::new(),
        ),
        ItemKind::Test(b) => symbol(
            text,
            &b.name.name,
            Some(kw),
            SymbolKind::METHOD,
            item.span,
            b.name.span,
            Vec::new(),
        ),
        ItemKind::Link(l) => symbol(
            text,
            &l.kind.value,
            Some(format!("link: {}", slice(text, l.ty.span))),
            SymbolKind::ENUM_MEMBER,
            item.span,
            content_span(&l.kind),
            Vec::new(),
        ),
        ItemKind::Tool(t) | ItemKind::Reader(t) => symbol(
            text,
            &t.name.name,
            Some(kw),
            SymbolKind::METHOD,
            item.span,
            t.name.span,
            Vec::new(),
        ),
        ItemKind::Node(n) => {
            let children = n
                .params
                .params
                .iter()
                .map(|p| {
                    symbol(
                        text,
                        &p.name.name,
                        Some(slice(text, p.ty.span)),
                        SymbolKind::VARIABLE,
                        p.span,
                        p.name.span,
                        Vec::new(),
                    )
                })
                .collect();
            let detail = match &n.returns {
                Some(r) => format!("{kw} -> {}", slice(text, r.span)),
                None => kw,
            };
            symbol(
                text,
                &n.name.name,
                Some(detail),
                SymbolKind::FUNCTION,
                item.span,
                n.name.span,
                children,
            )
        }
        ItemKind::Serve(_) => {
            let head = Span::new(item.span.start, item.span.start + 5);
            symbol(
                text,
                "serve",
                None,
                SymbolKind::NAMESPACE,
                item.span,
                head,
                Vec::new(),
            )
        }
    })
}
