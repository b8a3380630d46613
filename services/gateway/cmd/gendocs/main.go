// Command gendocs prints docs/tools.md, generated from the tool catalog:
//
//	cd services/gateway && go run ./cmd/gendocs > ../../docs/tools.md
package main

import (
	"fmt"

	"github.com/sovereign-fleet/sovereign/services/gateway"
)

func main() { fmt.Print(gateway.ToolsMarkdown()) }
