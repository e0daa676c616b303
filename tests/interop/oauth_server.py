"""An MCP server over streamable HTTP that requires OAuth 2.1 as the MCP specification
has it, and is its own authorization server, for pipec's client tests. Built with the
official Python SDK (mcp 2.x, MCPServer and its `mcp.server.auth`).

    oauth_server.py --port PORT [--token-ttl SECONDS] [--log FILE]
                    [--client-id ID --client-secret SECRET]

Once listening on 127.0.0.1 (PORT 0 picks a free port) it prints one line to stdout:
`ready http://127.0.0.1:PORT/mcp`.

What it offers
  /mcp                     the MCP endpoint; without a valid token a 401 whose
                           WWW-Authenticate names the resource metadata (RFC 9728)
  /.well-known/oauth-protected-resource/mcp    the protected resource metadata
  /.well-known/oauth-authorization-server      the authorization server metadata
  /register                dynamic client registration (RFC 7591)
  /authorize               approves every request at once (there are no users): a 302 to
                           the client's redirect_uri with a fresh code, the state and
                           `iss` (RFC 9207); PKCE S256 is required
  /token                   authorization_code and refresh_token grants (a refresh gives a
                           new access token and a new refresh token, the old one is
                           spent); client_credentials for the client of --client-id
  /revoke                  token revocation
  tool whoami              the token's {"client_id", "scopes", "token_serial"} as JSON
                           text; token_serial is the number of access tokens the server
                           had issued when it issued this one (1 for the first), so a
                           refresh shows as a larger number
  tool echo(text)          the text

Every token is for the one scope `mcp` and is bound to the resource the client names
(RFC 8707): a token issued for another resource, or none, is refused with 401, as are
unknown and expired ones.

Options
  --token-ttl SECONDS      access tokens expire after that long (default 3600)
  --log FILE               gets one JSON line per token endpoint request:
                           {"grant_type": ..., "client_id": ...} (never a token)
  --client-id, --client-secret
                           a confidential client registered beforehand, which may use
                           the client_credentials grant (client_secret_post)
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import time

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.routing import Route

SCOPE = "mcp"
CODE_TTL = 300  # seconds an authorization code may wait for its exchange

token_ttl = 3600
log_path: str | None = None


def log_token_request(grant_type, client_id) -> None:
    if log_path:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"grant_type": grant_type, "client_id": client_id}) + "\n")


class Token(AccessToken):
    serial: int  # how many access tokens the server had issued, this one included


class Provider:
    """The SDK's OAuthAuthorizationServerProvider, in memory, approving everything."""

    def __init__(self, issuer: str):
        self.issuer = issuer
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, Token] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.issued = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        # No login page: the request is approved as it arrives.
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or (client.scope or SCOPE).split(),
            expires_at=time.time() + CODE_TTL,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        redirect_uri = str(params.redirect_uri)
        return construct_redirect_uri(redirect_uri, code=code, state=params.state, iss=self.issuer)

    async def load_authorization_code(self, client, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]  # a code is good once
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token: str) -> RefreshToken | None:
        return self.refresh_tokens.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]):
        del self.refresh_tokens[refresh_token.token]  # rotated: the old one is spent
        return self.issue(client.client_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> Token | None:
        found = self.access_tokens.get(token)
        if found is None or found.expires_at < time.time():
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)

    def issue(self, client_id: str, scopes: list[str], resource: str | None, refresh=True) -> OAuthToken:
        """A new access token (and, unless told otherwise, a refresh token)."""
        self.issued += 1
        access = Token(
            token=secrets.token_urlsafe(32),
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + token_ttl,
            resource=resource,
            serial=self.issued,
        )
        self.access_tokens[access.token] = access
        refresh_token = None
        if refresh:
            refresh_token = secrets.token_urlsafe(32)
            self.refresh_tokens[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
        return OAuthToken(
            access_token=access.token,
            expires_in=token_ttl,
            scope=" ".join(scopes),
            refresh_token=refresh_token,
        )


class TokenEndpoint(TokenHandler):
    """The SDK's token endpoint, logging each request, plus the client_credentials grant,
    which the SDK's handler does not know (it has authorization_code, refresh_token and the
    jwt-bearer grant only)."""

    async def handle(self, request: Request):
        form = await request.form()  # Starlette keeps it: the SDK's handler reads it again
        log_token_request(form.get("grant_type"), form.get("client_id"))
        if form.get("grant_type") != "client_credentials":
            return await super().handle(request)
        try:
            client = await self.client_authenticator.authenticate_request(request)
        except AuthenticationError as e:
            error = TokenErrorResponse(error="invalid_client", error_description=e.message)
            return PydanticJSONResponse(content=error, status_code=401, headers={"Cache-Control": "no-store"})
        if not client.client_secret or "client_credentials" not in client.grant_types:
            error = TokenErrorResponse(error="unauthorized_client", error_description="no client_credentials")
            return self.response(error)
        allowed = (client.scope or SCOPE).split()
        scopes = str(form.get("scope") or "").split() or allowed
        if not set(scopes) <= set(allowed):
            error = TokenErrorResponse(error="invalid_scope", error_description=" ".join(scopes))
            return self.response(error)
        resource = str(form["resource"]) if form.get("resource") else None
        # RFC 6749 §4.4.3: no refresh token for this grant; the client asks again.
        return self.response(self.provider.issue(client.client_id, scopes, resource, refresh=False))


def whoami() -> str:
    """Who the access token of this request belongs to, as JSON."""
    token = get_access_token()
    assert isinstance(token, Token)
    return json.dumps({"client_id": token.client_id, "scopes": token.scopes, "token_serial": token.serial})


def echo(text: str) -> str:
    """The text, as given."""
    return text


def replace_route(app, path: str, endpoint, methods: list[str]) -> None:
    """Puts `endpoint` in place of the SDK's route for `path`."""
    for i, route in enumerate(app.router.routes):
        if getattr(route, "path", None) == path:
            app.router.routes[i] = Route(path, endpoint=cors_middleware(endpoint, methods), methods=methods)
            return
    raise LookupError(path)


def main() -> None:
    global token_ttl, log_path
    import uvicorn

    parser = argparse.ArgumentParser(description="An MCP server that requires OAuth 2.1.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-ttl", type=int, default=3600)
    parser.add_argument("--log")
    parser.add_argument("--client-id")
    parser.add_argument("--client-secret")
    args = parser.parse_args()
    token_ttl, log_path = args.token_ttl, args.log

    # The socket is bound here, not by uvicorn, so that port 0 can be read back: the
    # issuer and resource URLs name the port.
    host = "127.0.0.1"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, args.port))
    sock.listen(128)
    sock.set_inheritable(True)
    issuer = f"http://{host}:{sock.getsockname()[1]}"
    resource = f"{issuer}/mcp"

    provider = Provider(issuer)
    if args.client_id and args.client_secret:
        provider.clients[args.client_id] = OAuthClientInformationFull(
            client_id=args.client_id,
            client_secret=args.client_secret,
            token_endpoint_auth_method="client_secret_post",
            grant_types=["client_credentials"],
            scope=SCOPE,
        )

    registration = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE])
    revocation = RevocationOptions(enabled=True)
    auth = AuthSettings(
        issuer_url=issuer,
        resource_server_url=resource,
        validate_token_resource=True,
        required_scopes=[SCOPE],
        client_registration_options=registration,
        revocation_options=revocation,
    )
    server = MCPServer("oauth", auth_server_provider=provider, auth=auth, log_level="WARNING")
    server.add_tool(whoami)
    server.add_tool(echo)
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)

    # The SDK's routes but two: the token endpoint above, and metadata that says the
    # redirect carries `iss` and, with a confidential client, client_credentials.
    token_endpoint = TokenEndpoint(provider, ClientAuthenticator(provider))
    replace_route(app, "/token", token_endpoint.handle, ["POST", "OPTIONS"])
    metadata = build_metadata(auth.issuer_url, None, registration, revocation)
    metadata.authorization_response_iss_parameter_supported = True
    if args.client_id and args.client_secret:
        metadata.grant_types_supported.append("client_credentials")
    metadata_path = "/.well-known/oauth-authorization-server"
    replace_route(app, metadata_path, MetadataHandler(metadata).handle, ["GET", "OPTIONS"])

    print(f"ready {resource}", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
