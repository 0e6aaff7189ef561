package main

// The MCP server's read tool: the read tracker's Read tool (readtool.go,
// docs/DESIGN.md#read-tool) as the model calls it.

import (
	"context"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func init() {
	registerMCPTool("read", func(s *mcp.Server, name string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Read a file of the workspace, lines numbered, and count it as " +
			"read for your session (the guard then lets you edit it). Reading the same lines again while they are " +
			"unchanged answers \"unchanged since your last read\" instead of the bytes. A file over 2,000 lines or " +
			"256 KiB read whole gives an outline with elided line ranges: read a range with offset and limit to see it."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in readToolInput) (*mcp.CallToolResult, any, error) {
				mnt, err := findMount(os.Getenv("RUBINO_MOUNT"))
				if err != nil {
					return nil, nil, err
				}
				text, err := readTool(mnt, in)
				if err != nil {
					return nil, nil, err
				}
				return textResult(clipText(text)), nil, nil
			})
	})
}
