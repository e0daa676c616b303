-- Neovim's built-in LSP client driving `pipec lsp` on an example pipeline: diagnostics
-- appear for an edit that breaks the file, hover names the model, definition jumps to its
-- declaration. Run by tests/lsp.rs as
--   PIPEC_BIN=... PIPE_FILE=... nvim --headless --clean -c 'luafile tests/editors/nvim_lsp.lua'
-- and exits non-zero (with FAIL: on stderr) when an answer is wrong.

local bin = os.getenv("PIPEC_BIN")
local file = os.getenv("PIPE_FILE")

local function fail(msg)
  io.stderr:write("FAIL: " .. msg .. "\n")
  vim.cmd("cquit 1")
end

local function run()
  if not bin or not file then
    return fail("set PIPEC_BIN and PIPE_FILE")
  end
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local published = 0
  local config = {
    name = "pipec",
    cmd = { bin, "lsp" },
    root_dir = vim.fn.fnamemodify(file, ":p:h"),
    handlers = {
      ["textDocument/publishDiagnostics"] = function(err, result, ctx, cfg)
        published = published + 1
        vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx, cfg)
      end,
    },
  }
  local client_id
  if vim.lsp.start then
    client_id = vim.lsp.start(config)
  else
    client_id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(buf, client_id)
  end
  if not client_id then
    return fail("the client did not start")
  end

  -- The example checks clean: the first diagnostics are an empty list.
  if not vim.wait(20000, function() return published > 0 end, 20) then
    return fail("no diagnostics were published for " .. file)
  end
  if #vim.diagnostic.get(buf) ~= 0 then
    return fail("the example has diagnostics: " .. vim.inspect(vim.diagnostic.get(buf)))
  end

  -- The first `model = NAME` line of a node, and the line declaring that model.
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local use_line, use_col, model, decl_line
  for i, l in ipairs(lines) do
    local s, _, name = l:find("^%s+model = ([%w_]+)")
    if s and not use_line then
      use_line = i - 1
      use_col = l:find(name, 1, true) - 1
      model = name
    end
  end
  if not model then
    return fail("no `model = ...` line in " .. file)
  end
  for i, l in ipairs(lines) do
    if l:match("^model " .. model .. " {") then
      decl_line = i - 1
    end
  end

  -- Break it in the buffer (unsaved): an unknown model.
  published = 0
  local broken = lines[use_line + 1]:gsub("model = " .. model, "model = " .. model .. "x")
  vim.api.nvim_buf_set_lines(buf, use_line, use_line + 1, false, { broken })
  local found = vim.wait(20000, function()
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      if d.lnum == use_line and d.severity == vim.diagnostic.severity.ERROR then
        return true
      end
    end
    return false
  end, 20)
  if not found then
    return fail("no error on line " .. use_line .. ": " .. vim.inspect(vim.diagnostic.get(buf)))
  end
  local d = vim.diagnostic.get(buf)[1]
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  if code ~= "P0101" then
    return fail("expected P0101, got " .. vim.inspect(d))
  end
  -- Fix it again: the error clears.
  vim.api.nvim_buf_set_lines(buf, use_line, use_line + 1, false, { lines[use_line + 1] })
  if not vim.wait(20000, function() return #vim.diagnostic.get(buf) == 0 end, 20) then
    return fail("the error did not clear: " .. vim.inspect(vim.diagnostic.get(buf)))
  end

  local client = vim.lsp.get_client_by_id(client_id)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = use_line, character = use_col + 1 },
  }
  local hover = client.request_sync("textDocument/hover", params, 10000, buf)
  if not hover or hover.err or not hover.result then
    return fail("no hover: " .. vim.inspect(hover))
  end
  local text = hover.result.contents.value or ""
  if not text:find("model " .. model, 1, true) then
    return fail("hover does not name the model: " .. text)
  end

  local def = client.request_sync("textDocument/definition", params, 10000, buf)
  if not def or def.err or not def.result then
    return fail("no definition: " .. vim.inspect(def))
  end
  local loc = def.result
  if loc[1] then
    loc = loc[1]
  end
  if loc.range.start.line ~= decl_line or loc.uri ~= vim.uri_from_bufnr(buf) then
    return fail("definition went to " .. vim.inspect(loc) .. ", not line " .. decl_line)
  end

  io.stdout:write("ok: diagnostics, hover and definition from pipec lsp in Neovim\n")
  vim.lsp.stop_client(client_id)
  vim.wait(2000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 20)
  vim.cmd("qall!")
end

local ok, err = pcall(run)
if not ok then
  fail(tostring(err))
end
