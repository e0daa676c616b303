// Tokenizes files with the TextMate grammars of editors/vscode/ (through vscode-textmate and
// the Oniguruma build VS Code uses) and reports where a grammar fails to describe them.
//
// A file fails when:
//   1. the rule stack is not back at the grammar's root at the end of the file (a string,
//      block or template tag the grammar opened was never closed);
//   2. any token has a scope that starts with `invalid.`;
//   3. `.pipe` files: any token with non-blank text has only the root scope
//      `source.pipe` (every character of pipec's syntax belongs to some rule);
//      `.jinja` files: any root-only token (plain text, which is allowed) contains a tag
//      delimiter, `{{`, `}}`, `{%`, `%}`, `{#` or `#}`, that no rule matched.
//
// Usage: node grammar_check.mjs [--expect-failure] FILE...
// With --expect-failure every file must fail (the check of the checker itself).

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(process.env.GRAMMAR_CHECK_MODULES + "/");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const here = path.dirname(new URL(import.meta.url).pathname);
const syntaxes = path.join(here, "..", "editors", "vscode", "syntaxes");
const grammarFiles = {
  "source.pipe": path.join(syntaxes, "pipe.tmLanguage.json"),
  "source.jinja": path.join(syntaxes, "jinja.tmLanguage.json"),
};

const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm")).buffer;
await oniguruma.loadWASM(wasm);
const registry = new vsctm.Registry({
  onigLib: Promise.resolve({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (s) => new oniguruma.OnigString(s),
  }),
  loadGrammar: async (scope) => {
    const file = grammarFiles[scope];
    if (!file) return null;
    return vsctm.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
  },
});

const grammars = {
  ".pipe": await registry.loadGrammar("source.pipe"),
  ".jinja": await registry.loadGrammar("source.jinja"),
};

function problems(file) {
  const ext = path.extname(file);
  const grammar = grammars[ext];
  if (!grammar) return [`${file}: no grammar for ${ext}`];
  const root = ext === ".pipe" ? "source.pipe" : "source.jinja";
  const out = [];
  const lines = fs.readFileSync(file, "utf8").split(/\r?\n/);
  let stack = vsctm.INITIAL;
  lines.forEach((line, i) => {
    const r = grammar.tokenizeLine(line, stack);
    for (const t of r.tokens) {
      const text = line.slice(t.startIndex, t.endIndex);
      const where = `${file}:${i + 1}:${t.startIndex + 1}`;
      const bad = t.scopes.find((s) => s.startsWith("invalid."));
      if (bad) out.push(`${where}: ${bad} on ${JSON.stringify(text)}`);
      const rootOnly = t.scopes.length === 1 && t.scopes[0] === root;
      if (rootOnly && ext === ".pipe" && text.trim() !== "") {
        out.push(`${where}: ${JSON.stringify(text)} has only the root scope`);
      }
      if (rootOnly && ext === ".jinja" && /\{\{|\}\}|\{%|%\}|\{#|#\}/.test(text)) {
        out.push(`${where}: an unmatched tag delimiter in ${JSON.stringify(text)}`);
      }
    }
    stack = r.ruleStack;
  });
  // At the root, the stack is INITIAL or a frame of depth 1 for the root rule.
  if (stack.depth > 1) {
    out.push(`${file}: at the end of the file the grammar is still inside ${stack.depth - 1} rule(s) (something it opened is not closed)`);
  }
  return out;
}

const args = process.argv.slice(2);
const expectFailure = args[0] === "--expect-failure";
const files = expectFailure ? args.slice(1) : args;
let failed = 0;
for (const file of files) {
  const found = problems(file);
  if (expectFailure) {
    if (found.length === 0) {
      console.error(`${file}: expected the grammar check to fail on it, and it passed`);
      failed++;
    } else {
      console.log(`${file}: fails as it should (${found[0]})`);
    }
  } else if (found.length > 0) {
    failed++;
    for (const p of found) console.error(p);
  }
}
if (!expectFailure) console.log(`${files.length - failed} of ${files.length} files tokenize cleanly`);
process.exit(failed > 0 ? 1 : 0);
