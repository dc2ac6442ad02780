package mcp

import sdk "github.com/modelcontextprotocol/go-sdk/mcp"

// ToolSpec is one row of the tool table (specs), for the external tests
// (package mcp_test, which runs the api apiserver.New builds and so
// cannot be package mcp: apiserver imports it).
type ToolSpec struct {
	Name, Description string
	Annotations       *sdk.ToolAnnotations
	Input, Output     string
}

// ToolSpecs is the tool table, in its order.
func ToolSpecs() []ToolSpec {
	out := make([]ToolSpec, 0, len(specs))
	for _, s := range specs {
		out = append(out, ToolSpec{Name: s.name, Description: s.description, Annotations: s.annotations, Input: s.input, Output: s.output})
	}
	return out
}
