// Package mcpurl is where the control MCP answers on the api's listener,
// apart from the MCP server (api/mcp) so that the CLI, which prints the
// snippet that points an agent there, links no server package.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
package mcpurl

// Path is where the control MCP answers on the api's listener.
const Path = "/cocoonbox.mcp/control"
