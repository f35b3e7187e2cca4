package testkit

import "go.uber.org/goleak"

// GoleakOptions returns goleak options that ignore goroutines left behind by code that is not ours:
//   - rueidis, on purpose after Close: a cluster client's topology refresh closes replaced connections
//     from a detached goroutine after a 5s sleep, and a refresh triggered by an error (a killed node,
//     MOVED) is delayed by a detached goroutine that sleeps up to 1s;
//   - the in-process toxiproxy (v2.12.0) behind [Proxy]: when a toxic is added or removed while bytes
//     flow, a link stage can stay blocked for good sending to the stage that replaced it
//     ((*NoopToxic).Pipe; seen once in about twenty runs of testkit's own proxy tests). It holds no
//     server connection and is not Coordkit code.
//
// Use it in TestMain of packages that make cluster clients or proxies:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.GoleakOptions()...) }
func GoleakOptions(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	}, extra...)
}
