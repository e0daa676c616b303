//! The CRM as an rmcp server handler: what it says it offers, its tool list and
//! templates, and tool calls and reads handed to `tools` and `resources`. The call log and
//! faults are not here: the transports apply them before a request reaches this handler.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::crm::Crm;
use super::{resources, tools};

/// One handler per MCP session; the sessions of a process share its `Crm`.
#[derive(Clone)]
pub(crate) struct CrmServer {
    crm: Arc<Crm>,
}

impl CrmServer {
    pub(crate) fn new(crm: Arc<Crm>) -> CrmServer {
        CrmServer { crm }
    }
}

impl ServerHandler for CrmServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(
            Implementation::new("pipec-demo-crm", env!("CARGO_PKG_VERSION"))
                .with_title("pipec demo CRM"),
        )
        .with_instructions(
            "A made-up CRM: get_deal looks a deal up and links its activity and email \
             history; read those through the two resource templates.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        tools::call(&self.crm, &request.name, &arguments).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Every resource is a deal's, so there is nothing to list without a deal id.
        Ok(ListResourcesResult::with_all_items(Vec::new()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(&self.crm, &request.uri).map(Into::into)
    }
}
