// Starts pipec's language server (`pipec lsp`, over stdio) for .pipe files and their
// prompt templates. Plain JavaScript, so the extension needs no build step.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function serverOptions() {
  const command = vscode.workspace.getConfiguration("pipec").get("path") || "pipec";
  const run = { command, args: ["lsp"] };
  return { run, debug: run };
}

async function start(context) {
  client = new LanguageClient(
    "pipec",
    "pipec",
    serverOptions(),
    {
      documentSelector: [
        { scheme: "file", language: "pipe" },
        { scheme: "file", language: "jinja" },
      ],
      synchronize: {
        // Imported files and prompt templates change what a pipeline checks to.
        fileEvents: vscode.workspace.createFileSystemWatcher("**/*.{pipe,jinja}"),
      },
    },
  );
  try {
    await client.start();
  } catch (e) {
    const command = serverOptions().run.command;
    vscode.window.showErrorMessage(
      `pipec: could not start \`${command} lsp\` (${e.message || e}). ` +
        "Set `pipec.path` to the pipec program, or put pipec on PATH.",
    );
  }
  context.subscriptions.push(client);
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("pipec.restartServer", async () => {
      if (client) await client.stop();
      await start(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("pipec.path")) {
        if (client) await client.stop();
        await start(context);
      }
    }),
  );
  await start(context);
}

async function deactivate() {
  if (client) await client.stop();
}

module.exports = { activate, deactivate };
