// Command mcpagent is the MCP test agent of test/realnode: a container image's only program that serves the
// Streamable HTTP MCP endpoint an AgentDeployment's pods are expected to serve (spec.port, spec.mcp.path; :8080
// and /mcp by default) with a fixed set of tools, so the operator's registry discovers a real pod through its
// Service name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve MCP on")
	path := flag.String("path", "/mcp", "HTTP path of the MCP endpoint")
	tools := flag.String("tools", "echo,uptime", "comma-separated tool names the agent offers")
	flag.Parse()
	if err := serve(*listen, *path, strings.Split(*tools, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		os.Exit(1)
	}
}

// serve answers MCP at path on listen with one tool per name; every tool answers its own name and the time.
func serve(listen, path string, tools []string) error {
	server := sdk.NewServer(&sdk.Implementation{Name: "quartet-mcpagent", Version: "1.0.0"}, nil)
	for _, name := range tools {
		if name == "" {
			return errors.New("empty tool name")
		}
		server.AddTool(&sdk.Tool{Name: name, Description: "test tool " + name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{
					Text: name + " at " + time.Now().UTC().Format(time.RFC3339)}}}, nil
			})
	}
	mux := http.NewServeMux()
	mux.Handle(path, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	log.Printf("serving MCP at %s%s with tools %v", listen, path, tools)
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}
