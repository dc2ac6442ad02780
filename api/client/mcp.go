package client

// MCPPath is where the control MCP answers on the api's listener: the CLI
// prints the snippet that points an agent there. Contract: Control MCP
// (box lifecycle for native agents, M4.7).
const MCPPath = "/cocoonbox.mcp/control"
