package coordctl_test

import (
	"context"
	"fmt"
	"os"

	"github.com/coordkit/coordkit/coordctl"
)

// Run is the whole command: main passes os.Args[1:] and exits with its code. Here an admin action
// without --yes is refused before any connection is made.
func ExampleRun() {
	code := coordctl.Run(context.Background(), []string{"lock", "force-release", "invoice:42"}, os.Stdout, os.Stdout)
	fmt.Println("exit code", code)
	// Output:
	// coordctl: refusing to change state without --yes: coordctl lock force-release would delete the lease key "{invoice:42}:lease" of lock "invoice:42" whoever holds it (the fence key is kept)
	// exit code 2
}
