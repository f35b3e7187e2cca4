// luakit's README example: its block loads acquire.lua, checks the keys' slots and runs the script.

package main

import (
	"context"
	"embed"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

//README:decls

func example(ctx context.Context, client rueidis.Client) error {
	//README:code
	if err != nil {
		return err
	}
	fmt.Println("luakit: README example ran: acquire.lua returned fencing token", fence)
	return nil
}

func main() { runClient(example) }
